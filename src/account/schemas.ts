// The account's schemas: the account and its settings, the balance and the ledger statement, and its pages.
import { z } from 'zod';
import { Euros, serialPageQuery, UnixSeconds, Uuid } from '../http/schemas.js';

/** The public id of a ledger entry: this prefix and its serial number. */
export const LEDGER_ENTRY_ID_PREFIX = 'le_';
export const LedgerPageQuery = serialPageQuery(LEDGER_ENTRY_ID_PREFIX);

export const Balance = z
  .strictObject({
    object: z.literal('balance'),
    balance_in_euro: Euros,
    owed_in_euro: Euros.describe(
      'What refunds and disputes of bought credits took beyond the balance (credits already spent). While above 0, paid requests answer 402 ' +
        'payment_required; the next credits pay it first.',
    ),
  })
  .describe("The caller's workspace balance.");
/** The highest low balance alert a workspace may set, in euros (as much as one top-up may add). */
export const LOW_BALANCE_THRESHOLD_EUR_MAX = 1_000_000;
export const LowBalanceThreshold = Euros.describe(
  'Low balance alert: the webhook event balance.low is sent when a charge leaves the balance below this amount (once, ' +
    'then again only after a credit brought the balance back to or above it); null = off.',
);
export const Account = z
  .strictObject({
    object: z.literal('account'),
    balance_in_euro: Euros.describe("The workspace's balance."),
    owed_in_euro: Euros.describe(
      'What refunds and disputes of bought credits took beyond the balance, not paid yet (0: nothing); while above 0, paid requests answer 402.',
    ),
    low_balance_threshold_in_euro: LowBalanceThreshold.nullable(),
    auto_top_up: z
      .strictObject({
        threshold_in_euro: Euros.describe('When a charge leaves the balance below this, `amount_in_euro` is charged to the saved card.'),
        amount_in_euro: Euros.describe('What one automatic top-up buys.'),
      })
      .nullable()
      .describe('Automatic top-up with the card a Checkout saved: once per crossing of the threshold; null = off.'),
    credits_checkout: z
      .strictObject({ min_in_euro: Euros, max_in_euro: Euros })
      .nullable()
      .describe(
        'Buying credits with Stripe Checkout (POST /v2/billing/checkout): the amounts one Checkout may buy; null = not offered here.',
      ),
    auto_top_up_error: z
      .string()
      .nullable()
      .describe('Why automatic top-up was turned off (its payment failed, and it is not tried again until set anew); null otherwise.'),
  })
  .describe("The caller's workspace: its balance and budget settings.");
export const UpdateAccountBody = z
  .object({
    low_balance_threshold_in_euro: z
      .number()
      .min(0)
      .max(LOW_BALANCE_THRESHOLD_EUR_MAX)
      .nullable()
      .optional()
      .describe(
        `Euros from 0 to ${LOW_BALANCE_THRESHOLD_EUR_MAX}, rounded to the nearest micro-euro; null turns the alert off; absent leaves it as it is. ` +
          'A new amount arms the alert: the next charge leaving the balance below it sends balance.low.',
      ),
    auto_top_up: z
      .strictObject({
        threshold_in_euro: z.number().min(0).max(LOW_BALANCE_THRESHOLD_EUR_MAX).describe('Euros, with at most two decimals.'),
        amount_in_euro: z
          .number()
          .positive()
          .describe("Euros, with at most two decimals, within the service's top-up bounds (by default 5 to 1000)."),
      })
      .nullable()
      .optional()
      .describe(
        'Automatic top-up (needs Stripe, and a card saved by a paid Checkout): when a charge leaves the balance below `threshold_in_euro`, one ' +
          'off-session payment of `amount_in_euro` is made, once per crossing; a failed payment turns it off. null turns it off; absent leaves it.',
      ),
  })
  .strict();

export const LedgerEntry = z
  .strictObject({
    id: z
      .string()
      .regex(/^le_\d+$/)
      .describe('The entry id; `after` of the next page.'),
    object: z.literal('ledger_entry'),
    type: z
      .enum(['credit', 'charge', 'refund', 'debit'])
      .describe(
        'credit: a top-up (bought with Stripe: `stripe_id` is its PaymentIntent, or a dispute won); charge: a video job (its estimate, charged up front) ' +
          'or a speech request; refund: what a job did not deliver; debit: a Stripe refund or dispute of bought credits (`stripe_id` names it).',
      ),
    amount_in_euro: z
      .number()
      .positive()
      .describe(
        'The amount, always positive; `type` says which way. Of a credit, the part that paid what was owed is not added to the balance; ' +
          'of a debit, the part the balance did not have is owed.',
      ),
    balance_after_in_euro: Euros.describe('The workspace balance right after this entry.'),
    job_id: Uuid.nullable().describe('The video job the entry belongs to; null for credits and speech.'),
    speech_request_id: Uuid.nullable().describe('The speech request charged (X-Speech-Request-Id); null otherwise.'),
    stripe_id: z
      .string()
      .nullable()
      .describe(
        "Stripe's object of a credit (its PaymentIntent, pi_...) or debit (the refund re_... or dispute du_/dp_...); null otherwise.",
      ),
    created: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe('One entry of the append-only ledger.');
export const LedgerEntryList = z.strictObject({
  object: z.literal('list'),
  data: z.array(LedgerEntry).describe('Newest first.'),
  has_more: z.boolean(),
});

/** What the API answers, as its clients read it (z.output of the response schemas). */
export type Account = z.output<typeof Account>;
export type Balance = z.output<typeof Balance>;
export type LedgerEntry = z.output<typeof LedgerEntry>;
export type LedgerEntryList = z.output<typeof LedgerEntryList>;

export const RESPONSE_COMPONENTS = { Account, Balance, LedgerEntry, LedgerEntryList } satisfies Record<string, z.ZodType>;
