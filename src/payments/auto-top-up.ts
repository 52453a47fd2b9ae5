// Automatic top-up. A charge leaving the balance below the workspace's threshold records one row of
// auto_top_ups in its own transaction (the database's trigger, migration 025_stripe_credits.sql): one per
// crossing, kept or lost with the charge. Every worker process runs a starter that takes pending rows and
// creates their off-session PaymentIntent, the row's id being Stripe's idempotency key
// (https://docs.stripe.com/api/idempotent_requests): a starter that dies after Stripe answered and before
// the row was marked leaves it pending, and the next start gets the same PaymentIntent back, so a crossing
// is never paid twice. The PaymentIntent is credited when Stripe sends payment_intent.succeeded
// (./service.ts). A payment that fails (declined now, or payment_intent.payment_failed later) is not
// tried again: automatic top-up is turned off, the account says why (Stripe's message and code), and the
// webhook event billing.auto_top_up_failed is recorded with it. Charging a saved card off-session:
// https://docs.stripe.com/payments/save-during-payment#charge-saved-payment-method; a payment refused at
// once is a 402 card_error (card_declined, or authentication_required when the bank wants the customer)
// carrying the PaymentIntent, left in requires_payment_method (https://docs.stripe.com/payments/save-and-reuse,
// https://docs.stripe.com/api/errors): that PaymentIntent is kept with the top-up, and Stripe's later
// payment_intent.payment_failed about it changes nothing more.
import type { Logger } from 'pino';
import type Stripe from 'stripe';
import { inTransaction, type Db, type Tx } from '../db/pool.js';
import { MICRO_EUR_PER_CENT } from './money.js';

/** Pending top-ups one sweep starts at most. */
const SWEEP_ROWS_MAX = 20;

interface PendingTopUp {
  id: string;
  workspace_id: string;
  amount_micro_eur: number;
  stripe_customer_id: string | null;
  enabled: boolean;
}

/** The errors of Stripe that say the payment itself was refused (not that Stripe could not be reached). */
const REFUSED = new Set(['StripeCardError', 'StripeInvalidRequestError', 'StripePermissionError', 'StripeIdempotencyError']);

/** What Stripe said of a payment refused (an error, or a PaymentIntent's last_payment_error): its message and codes. */
export function refusalMessage(e: { message?: string | undefined; code?: string | undefined; decline_code?: string | undefined }): string {
  const codes = [...new Set([e.code, e.decline_code].filter((c): c is string => typeof c === 'string' && c !== ''))];
  const message = e.message || 'the payment failed';
  return codes.length ? `${message} (${codes.join(', ')})` : message;
}

/**
 * Marks a top-up failed (if it was still in flight), keeping its PaymentIntent if it had none yet, turns
 * automatic top-up off saying why, and records billing.auto_top_up_failed for the workspace's endpoints, in
 * one transaction. True when it changed something.
 */
export async function autoTopUpFailed(
  tx: Tx,
  f: { topUpId?: string; paymentIntentId?: string; workspaceId: string; message: string },
): Promise<boolean> {
  const r = await tx.query<{ id: string; ledger_entry_id: number; amount_micro_eur: number; payment_intent_id: string | null }>(
    `UPDATE auto_top_ups SET status = 'failed', error = $3, payment_intent_id = COALESCE(payment_intent_id, $2), updated_at = now()
      WHERE CASE WHEN $1::uuid IS NOT NULL THEN id = $1::uuid ELSE payment_intent_id = $2 END
        AND workspace_id = $4 AND status IN ('pending', 'started')
      RETURNING id, ledger_entry_id, amount_micro_eur, payment_intent_id`,
    [f.topUpId ?? null, f.paymentIntentId ?? null, f.message.slice(0, 500), f.workspaceId],
  );
  const row = r.rows[0];
  if (!row) return false;
  const said = `automatic top-up of ${row.amount_micro_eur / 1_000_000} EUR failed: ${f.message}`.slice(0, 500);
  await tx.query(
    `UPDATE workspaces SET auto_top_up_threshold_micro_eur = NULL, auto_top_up_amount_micro_eur = NULL, auto_top_up_failure = $2
      WHERE id = $1`,
    [f.workspaceId, said],
  );
  await tx.query(
    `SELECT webhook_alert_record($1, 'billing.auto_top_up_failed', 'billing.auto_top_up_failed:' || $2, $3,
       json_build_object('object', 'auto_top_up', 'id', $2::text, 'amount_in_euro', micro_eur_to_eur($4::bigint),
                         'payment_intent', $5::text, 'message', $6::text))`,
    [f.workspaceId, row.id, row.ledger_entry_id, row.amount_micro_eur, row.payment_intent_id, f.message.slice(0, 500)],
  );
  return true;
}

/** Marks the top-up whose PaymentIntent Stripe says succeeded, in the transaction of its credit (before it: the credit may then arm again). */
export async function autoTopUpSucceeded(tx: Tx, topUpId: string | undefined, paymentIntentId: string): Promise<void> {
  await tx.query(
    `UPDATE auto_top_ups SET status = 'succeeded', payment_intent_id = COALESCE(payment_intent_id, $2), updated_at = now()
      WHERE CASE WHEN $1::uuid IS NOT NULL THEN id = $1::uuid ELSE payment_intent_id = $2 END AND status IN ('pending', 'started')`,
    [topUpId ?? null, paymentIntentId],
  );
}

export class AutoTopUpStarter {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly deps: {
      db: Db;
      stripe: Stripe;
      logger: Logger;
      interval_ms: number;
      /** After a failure was recorded: starts the deliveries of its webhook event. */
      afterFailure?: (workspaceId: string) => void;
    },
  ) {}

  start(): void {
    const tick = () => {
      this.running = this.sweep()
        .then(() => undefined)
        .catch((err: Error) => this.deps.logger.warn({ err: err.message }, 'auto top-up sweep failed; tried again'))
        .finally(() => {
          if (this.timer !== null) this.timer = setTimeout(tick, this.deps.interval_ms);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async shutdown(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /** Starts every pending top-up (a few at a time); returns how many were started or failed. */
  async sweep(): Promise<number> {
    const r = await this.deps.db.query<PendingTopUp>(
      `SELECT t.id, t.workspace_id, t.amount_micro_eur, w.stripe_customer_id, w.auto_top_up_threshold_micro_eur IS NOT NULL AS enabled
         FROM auto_top_ups t JOIN workspaces w ON w.id = t.workspace_id
        WHERE t.status = 'pending' ORDER BY t.created_at LIMIT ${SWEEP_ROWS_MAX}`,
    );
    let done = 0;
    for (const row of r.rows) if (await this.startOne(row)) done++;
    return done;
  }

  private async startOne(t: PendingTopUp): Promise<boolean> {
    if (!t.enabled) {
      // Turned off since the crossing: nothing is paid.
      await this.deps.db.query(`UPDATE auto_top_ups SET status = 'cancelled', updated_at = now() WHERE id = $1 AND status = 'pending'`, [
        t.id,
      ]);
      return true;
    }
    let pi: Stripe.PaymentIntent;
    try {
      if (!t.stripe_customer_id)
        throw Object.assign(new Error('no card is saved for this workspace'), { type: 'StripeInvalidRequestError' });
      const methods = await this.deps.stripe.customers.listPaymentMethods(t.stripe_customer_id, { limit: 1 });
      const method = methods.data[0];
      if (!method) throw Object.assign(new Error('the saved card is gone'), { type: 'StripeInvalidRequestError' });
      pi = await this.deps.stripe.paymentIntents.create(
        {
          amount: t.amount_micro_eur / MICRO_EUR_PER_CENT,
          currency: 'eur',
          customer: t.stripe_customer_id,
          payment_method: method.id,
          off_session: true,
          confirm: true,
          metadata: { workspace_id: t.workspace_id, purpose: 'auto_top_up', auto_top_up_id: t.id },
        },
        { idempotencyKey: `auto-top-up-${t.id}` },
      );
    } catch (err) {
      const refused = err as { type?: string; message?: string; code?: string; decline_code?: string; payment_intent?: { id?: unknown } };
      if (!REFUSED.has(refused.type ?? '')) throw err; // Stripe unreachable: the row stays pending, the next sweep tries again
      const declined = refused.payment_intent?.id;
      const failed = await inTransaction(this.deps.db, (tx) =>
        autoTopUpFailed(tx, {
          topUpId: t.id,
          ...(typeof declined === 'string' ? { paymentIntentId: declined } : {}),
          workspaceId: t.workspace_id,
          message: refusalMessage(refused),
        }),
      );
      this.deps.logger.warn(
        { workspace_id: t.workspace_id, auto_top_up_id: t.id, payment_intent: declined, code: refused.code },
        'auto top-up refused by Stripe; automatic top-up turned off',
      );
      if (failed) this.deps.afterFailure?.(t.workspace_id);
      return true;
    }
    await this.deps.db.query(
      `UPDATE auto_top_ups SET status = 'started', payment_intent_id = $2, updated_at = now() WHERE id = $1 AND status = 'pending'`,
      [t.id, pi.id],
    );
    this.deps.logger.info({ workspace_id: t.workspace_id, auto_top_up_id: t.id, payment_intent: pi.id }, 'auto top-up started');
    return true;
  }
}
