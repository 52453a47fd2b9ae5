// Buying credits: the Checkout request and the Checkout Session answered.
import { z } from 'zod';

/** Where Stripe sends the customer back: an http(s) URL (Checkout's success_url / cancel_url). */
const ReturnUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .describe('An http or https URL, at most 2048 characters.');

export const CreateCheckoutBody = z
  .object({
    amount_in_euro: z
      .number()
      .positive()
      .refine((v) => Math.abs(Math.round(v * 100) - v * 100) < 1e-6, 'at most two decimals')
      .describe("The credits to buy, in euros, with at most two decimals, within the service's bounds (by default 5 to 1000)."),
    success_url: ReturnUrl.describe('Where Checkout sends the customer once paid.'),
    cancel_url: ReturnUrl.describe('Where Checkout sends the customer who goes back.'),
  })
  .strict();
export type CreateCheckoutBody = z.output<typeof CreateCheckoutBody>;

export const CheckoutSession = z
  .strictObject({
    object: z.literal('checkout_session'),
    id: z.string().describe("Stripe's Checkout Session id (cs_...)."),
    url: z.string().nullable().describe('Where to send the customer to pay (redirect the browser there).'),
  })
  .describe('A Stripe Checkout Session for credits: paid, they are credited to the workspace once Stripe says so.');

export const RESPONSE_COMPONENTS = { CheckoutSession } satisfies Record<string, z.ZodType>;
