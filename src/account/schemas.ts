// The account's schemas: the balance and the ledger statement, and its pages.
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
export type Balance = z.output<typeof Balance>;
export type LedgerEntry = z.output<typeof LedgerEntry>;
export type LedgerEntryList = z.output<typeof LedgerEntryList>;

export const RESPONSE_COMPONENTS = { Balance, LedgerEntry, LedgerEntryList } satisfies Record<string, z.ZodType>;
