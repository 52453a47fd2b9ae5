// Automatic top-up. A charge leaving the balance below the workspace's threshold records one row of
// auto_top_ups in its own transaction (the database's trigger, migration 025_stripe_credits.sql): one per
// crossing, kept or lost with the charge. Every worker process runs a starter that takes pending rows and
// creates their off-session PaymentIntent (woken at once by the row's notification, migration
// 030_auto_top_up_notify.sql, and polling every second whatever happens), the row's id being Stripe's idempotency key
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

/** The channel the database notifies when a top-up is recorded (migration 030_auto_top_up_notify.sql). */
export const AUTO_TOP_UP_CHANNEL = 'auto_top_up_recorded';
/** After the listening connection was lost (or could not be had), how long before listening again; the poll covers meanwhile. */
const LISTEN_RETRY_MS = 5_000;

/**
 * Starts pending top-ups: at once when the database says one was recorded (LISTEN on AUTO_TOP_UP_CHANNEL,
 * on a connection of the pool kept for it), and every `interval_ms` whatever happens (the fallback: a
 * notification missed while the connection was down, a database without the notifying trigger).
 */
export class AutoTopUpStarter {
  private timer: NodeJS.Timeout | null = null;
  private sweeping: Promise<void> | null = null;
  /** A notification arrived during a sweep: another one right after it. */
  private again = false;
  private stopped = true;
  private listener: Tx | null = null;
  private relisten: NodeJS.Timeout | null = null;

  constructor(
    private readonly deps: {
      db: Db;
      stripe: Stripe;
      logger: Logger;
      interval_ms: number;
      /** Listen for recorded top-ups (default true); false: the poll only. */
      listen?: boolean;
      /** After a failure was recorded: starts the deliveries of its webhook event. */
      afterFailure?: (workspaceId: string) => void;
    },
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
    if (this.deps.listen !== false) void this.listen();
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.relisten) clearTimeout(this.relisten);
    this.timer = this.relisten = null;
    this.listener?.release(true);
    this.listener = null;
    await this.sweeping;
  }

  /** Sweeps now, or right after the sweep under way (a top-up was recorded). */
  wake(): void {
    if (this.stopped) return;
    if (this.sweeping) this.again = true;
    else this.schedule(0);
  }

  /** Whether the database's notifications are being listened to (else only the poll starts top-ups). */
  get listening(): boolean {
    return this.listener !== null;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), ms);
  }

  private tick(): void {
    this.timer = null;
    this.sweeping = this.sweep()
      .then((done) => {
        if (done >= SWEEP_ROWS_MAX) this.again = true; // perhaps more pending than one sweep takes
      })
      .catch((err: Error) => this.deps.logger.warn({ err: err.message }, 'auto top-up sweep failed; tried again'))
      .finally(() => {
        this.sweeping = null;
        const again = this.again;
        this.again = false;
        this.schedule(again ? 0 : this.deps.interval_ms);
      });
  }

  /** LISTENs on a connection of its own; lost, it is released and listened again later (the poll meanwhile). */
  private async listen(): Promise<void> {
    this.relisten = null;
    if (this.stopped) return;
    let client: Tx;
    try {
      client = await this.deps.db.connect();
    } catch (err) {
      return this.listenLater(err);
    }
    let lost = false;
    const onLost = (err: Error) => {
      if (lost) return;
      lost = true;
      if (this.listener === client) this.listener = null;
      client.release(err);
      this.listenLater(err);
    };
    client.on('error', onLost);
    client.on('notification', (n) => {
      if (n.channel === AUTO_TOP_UP_CHANNEL) this.wake();
    });
    try {
      await client.query(`LISTEN ${AUTO_TOP_UP_CHANNEL}`);
    } catch (err) {
      return onLost(err as Error);
    }
    if (this.stopped) {
      client.release(true);
      return;
    }
    this.listener = client;
    this.wake(); // what was recorded before listening
  }

  private listenLater(err: unknown): void {
    if (this.stopped) return;
    this.deps.logger.warn(
      { err: err instanceof Error ? err.message : String(err) },
      'auto top-up: not listening for recorded top-ups; polling, listening again soon',
    );
    this.relisten = setTimeout(() => void this.listen(), LISTEN_RETRY_MS);
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
