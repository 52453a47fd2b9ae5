// Buying credits with Stripe: Checkout Sessions for the customers, and the events Stripe sends back.
//
// Stripe's documentation this follows:
//   Checkout fulfilment    https://docs.stripe.com/checkout/fulfillment
//                          (checkout.session.completed with payment_status "paid", and
//                          checkout.session.async_payment_succeeded for delayed methods; fulfil once per Session)
//   Webhook signatures     https://docs.stripe.com/webhooks#verify-events (the Stripe-Signature header, checked by
//                          the library's constructEvent over the raw body, with its 5-minute tolerance)
//   Events and their data  https://docs.stripe.com/api/events/types (charge.refunded, charge.dispute.created,
//                          charge.dispute.closed, payment_intent.succeeded, payment_intent.payment_failed)
//   Saving a card          https://docs.stripe.com/payments/checkout/save-during-payment (setup_future_usage)
//   Idempotent requests    https://docs.stripe.com/api/idempotent_requests
// Amounts: Stripe counts EUR in cents; this service in micro-euros (1 cent = 10,000 micro-euros).
import type { Logger } from 'pino';
import Stripe from 'stripe';
import type { StripeConfig } from '../config.js';
import { inTransaction, type Db } from '../db/pool.js';
import { ApiError } from '../errors.js';
import { isUuid } from '../ids.js';
import { creditPayment, debitRefunds, disputeMoney, type MovementResult } from './billing.js';
import { autoTopUpFailed, autoTopUpSucceeded, refusalMessage } from './auto-top-up.js';
import { MICRO_EUR_PER_CENT } from './money.js';

export { MICRO_EUR_PER_CENT };

/** The library, pointed at Stripe or (STRIPE_API_BASE) elsewhere, e.g. stripe-mock. */
export function createStripeClient(config: StripeConfig): Stripe {
  const base = config.apiBase;
  return new Stripe(config.secretKey, {
    maxNetworkRetries: 2,
    timeout: 20_000,
    ...(base
      ? {
          host: base.hostname,
          port: base.port || (base.protocol === 'http:' ? 80 : 443),
          protocol: base.protocol === 'http:' ? ('http' as const) : ('https' as const),
        }
      : {}),
  });
}

export interface CheckoutSessionCreated {
  id: string;
  url: string | null;
}

/** What handling one event did: `credited`/`debited` moved money, `duplicate` was handled before, `ignored` is not ours. */
export type EventOutcome = 'credited' | 'debited' | 'recorded' | 'duplicate' | 'ignored';

/** Automatic top-up without Stripe configured: 503. */
export const AUTO_TOP_UP_NOT_CONFIGURED = { refusal: () => Promise.resolve(billingNotConfigured()), checkoutBounds: null };

export class PaymentsService {
  readonly stripe: Stripe;

  constructor(
    private readonly deps: {
      db: Db;
      config: StripeConfig;
      logger: Logger;
      /** Called once a credit committed (auto top-up's arming, for example); errors are logged, never thrown. */
      afterCredit?: (workspaceId: string) => Promise<void>;
      /** Called once an auto top-up's failure was recorded: starts the deliveries of its webhook event. */
      afterFailure?: (workspaceId: string) => void;
    },
  ) {
    this.stripe = createStripeClient(deps.config);
  }

  /** Why automatic top-up cannot be turned on: no card saved by a paid Checkout, or an amount outside the bounds (../account/). */
  async refusal(workspaceId: string, amount_micro_eur: number): Promise<ApiError | null> {
    const { min_micro_eur, max_micro_eur } = this.bounds;
    if (amount_micro_eur < min_micro_eur || amount_micro_eur > max_micro_eur) {
      return new ApiError(
        400,
        'invalid_request_error',
        'invalid_parameter',
        `auto_top_up.amount_in_euro must be between ${min_micro_eur / 1_000_000} and ${max_micro_eur / 1_000_000} EUR`,
        'auto_top_up.amount_in_euro',
      );
    }
    const r = await this.deps.db.query<{ stripe_customer_id: string | null }>('SELECT stripe_customer_id FROM workspaces WHERE id = $1', [
      workspaceId,
    ]);
    if (!r.rows[0]?.stripe_customer_id) {
      return new ApiError(
        400,
        'invalid_request_error',
        'payment_method_required',
        'automatic top-up charges the card a paid Checkout saved: buy credits once with POST /v2/billing/checkout first',
        'auto_top_up',
      );
    }
    return null;
  }

  get checkoutBounds() {
    return this.bounds;
  }

  get bounds() {
    return { min_micro_eur: this.deps.config.topupMicroEurMin, max_micro_eur: this.deps.config.topupMicroEurMax };
  }

  /** A Checkout Session in payment mode, in EUR, for `amount_micro_eur`, naming the workspace in its and its PaymentIntent's metadata. */
  async createCheckout(
    workspaceId: string,
    input: { amount_micro_eur: number; success_url: string; cancel_url: string },
  ): Promise<CheckoutSessionCreated> {
    const customer = await this.deps.db.query<{ stripe_customer_id: string | null }>(
      'SELECT stripe_customer_id FROM workspaces WHERE id = $1',
      [workspaceId],
    );
    const customerId = customer.rows[0]?.stripe_customer_id ?? null;
    const metadata = { workspace_id: workspaceId, purpose: 'checkout' };
    try {
      const session = await this.stripe.checkout.sessions.create({
        mode: 'payment',
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: 'eur',
              unit_amount: input.amount_micro_eur / MICRO_EUR_PER_CENT,
              product_data: { name: 'Video and voice API credits' },
            },
          },
        ],
        success_url: input.success_url,
        cancel_url: input.cancel_url,
        client_reference_id: workspaceId,
        metadata,
        // The card is saved for off-session use: auto top-up charges it later.
        payment_intent_data: { metadata, setup_future_usage: 'off_session' },
        ...(customerId ? { customer: customerId } : { customer_creation: 'always' as const }),
      });
      return { id: session.id, url: session.url };
    } catch (err) {
      throw stripeFailure(err, this.deps.logger);
    }
  }

  /** Verifies the signature over the raw body (the library's check, before anything else); throws a 400 when it fails. */
  verify(raw_body: Buffer, signature: string | undefined): Stripe.Event {
    if (!signature) throw badSignature('no Stripe-Signature header');
    try {
      return this.stripe.webhooks.constructEvent(raw_body, signature, this.deps.config.webhookSecret);
    } catch (err) {
      throw badSignature(err instanceof Error ? err.message : String(err));
    }
  }

  /** Handles a verified event: its money moves at most once, in one transaction with the record that it was handled. */
  async handle(event: Stripe.Event): Promise<EventOutcome> {
    switch (event.type) {
      case 'checkout.session.completed':
      case 'checkout.session.async_payment_succeeded':
        return this.fulfilCheckout(event.data.object, event.type === 'checkout.session.completed');
      case 'payment_intent.succeeded':
        return this.creditAutoTopUp(event.data.object);
      case 'payment_intent.payment_failed':
        return this.autoTopUpFailed(event.data.object);
      case 'charge.refunded':
        return this.refund(event.data.object);
      case 'charge.dispute.created':
        return this.dispute(event.data.object, false);
      case 'charge.dispute.closed':
        return event.data.object.status === 'won' ? this.dispute(event.data.object, true) : 'ignored';
      default:
        return 'ignored';
    }
  }

  private async fulfilCheckout(session: Stripe.Checkout.Session, completed: boolean): Promise<EventOutcome> {
    // A delayed payment method completes the Session unpaid: its credit waits for async_payment_succeeded.
    if (completed && session.payment_status !== 'paid') return 'ignored';
    const workspaceId = session.metadata?.['workspace_id'];
    if (session.mode !== 'payment' || session.currency !== 'eur' || !workspaceId || !isUuid(workspaceId) || !(session.amount_total! > 0)) {
      this.deps.logger.warn({ session: session.id }, 'stripe: a Checkout Session that is not a credit purchase of this service; ignored');
      return 'ignored';
    }
    const paymentIntentId = idOf(session.payment_intent) ?? session.id;
    const customerId = idOf(session.customer);
    return this.credit(workspaceId, async (tx) => {
      if (customerId) await tx.query('UPDATE workspaces SET stripe_customer_id = $2 WHERE id = $1', [workspaceId, customerId]);
      return creditPayment(tx, {
        workspaceId,
        paymentIntentId,
        checkoutSessionId: session.id,
        amount_micro_eur: session.amount_total! * MICRO_EUR_PER_CENT,
      });
    });
  }

  /** payment_intent.succeeded credits only the PaymentIntents auto top-up started (Checkout's are credited by their Session). */
  private async creditAutoTopUp(pi: Stripe.PaymentIntent): Promise<EventOutcome> {
    const workspaceId = pi.metadata?.['workspace_id'];
    if (pi.metadata?.['purpose'] !== 'auto_top_up' || pi.currency !== 'eur' || !workspaceId || !isUuid(workspaceId)) return 'ignored';
    const amount = pi.amount_received > 0 ? pi.amount_received : pi.amount;
    return this.credit(workspaceId, async (tx) => {
      // Marked paid before its credit, which may then arm automatic top-up again.
      await autoTopUpSucceeded(tx, uuidOrUndefined(pi.metadata['auto_top_up_id']), pi.id);
      return creditPayment(tx, {
        workspaceId,
        paymentIntentId: pi.id,
        checkoutSessionId: null,
        amount_micro_eur: amount * MICRO_EUR_PER_CENT,
      });
    });
  }

  private async autoTopUpFailed(pi: Stripe.PaymentIntent): Promise<EventOutcome> {
    const workspaceId = pi.metadata?.['workspace_id'];
    if (pi.metadata?.['purpose'] !== 'auto_top_up' || !workspaceId || !isUuid(workspaceId)) return 'ignored';
    const message = refusalMessage(pi.last_payment_error ?? {});
    const topUpId = uuidOrUndefined(pi.metadata['auto_top_up_id']);
    const failed = await inTransaction(this.deps.db, (tx) =>
      autoTopUpFailed(tx, { ...(topUpId ? { topUpId } : {}), paymentIntentId: pi.id, workspaceId, message }),
    );
    if (!failed) return 'duplicate';
    this.deps.afterFailure?.(workspaceId);
    return 'recorded';
  }

  private async credit(workspaceId: string, move: Parameters<typeof inTransaction<MovementResult>>[1]): Promise<EventOutcome> {
    const exists = await this.deps.db.query('SELECT 1 FROM workspaces WHERE id = $1', [workspaceId]);
    if (exists.rowCount !== 1) {
      this.deps.logger.warn({ workspace_id: workspaceId }, 'stripe: a payment names a workspace that does not exist here; ignored');
      return 'ignored';
    }
    const moved = await inTransaction(this.deps.db, move);
    if (moved.duplicate) return 'duplicate';
    if (this.deps.afterCredit) await this.deps.afterCredit(workspaceId).catch((err) => this.deps.logger.error({ err }, 'after credit'));
    return 'credited';
  }

  private async refund(charge: Stripe.Charge): Promise<EventOutcome> {
    const paymentIntentId = idOf(charge.payment_intent);
    if (!paymentIntentId || charge.currency !== 'eur') return 'ignored';
    // The newest refund names the entry; without it in the event (recent API versions leave the list out), the charge does.
    const refundId = charge.refunds?.data?.[0]?.id ?? charge.id;
    const moved = await inTransaction(this.deps.db, (tx) =>
      debitRefunds(tx, { paymentIntentId, chargeId: charge.id, refundId, refunded_micro_eur: charge.amount_refunded * MICRO_EUR_PER_CENT }),
    );
    return outcomeOf(moved, 'debited');
  }

  private async dispute(dispute: Stripe.Dispute, won: boolean): Promise<EventOutcome> {
    const paymentIntentId = idOf(dispute.payment_intent);
    if (!paymentIntentId || dispute.currency !== 'eur') return 'ignored';
    const moved = await inTransaction(this.deps.db, (tx) =>
      disputeMoney(tx, { paymentIntentId, disputeId: dispute.id, amount_micro_eur: dispute.amount * MICRO_EUR_PER_CENT, won }),
    );
    const outcome = outcomeOf(moved, won ? 'credited' : 'debited');
    if (outcome === 'credited' && moved) {
      const ws = await this.deps.db.query<{ workspace_id: string }>(
        'SELECT workspace_id FROM stripe_payments WHERE payment_intent_id = $1',
        [paymentIntentId],
      );
      if (ws.rows[0] && this.deps.afterCredit)
        await this.deps.afterCredit(ws.rows[0].workspace_id).catch((err) => this.deps.logger.error({ err }, 'after credit'));
    }
    return outcome;
  }
}

const uuidOrUndefined = (v: string | undefined): string | undefined => (v !== undefined && isUuid(v) ? v : undefined);

const idOf = (v: string | { id: string } | null | undefined): string | null => (v == null ? null : typeof v === 'string' ? v : v.id);

function outcomeOf(moved: MovementResult | null, moving: EventOutcome): EventOutcome {
  if (!moved) return 'ignored';
  if (moved.duplicate) return 'duplicate';
  return moved.moved_micro_eur === 0 ? 'recorded' : moving;
}

function badSignature(detail: string): ApiError {
  return new ApiError(400, 'invalid_request_error', 'invalid_signature', `the Stripe-Signature does not verify: ${detail.slice(0, 200)}`);
}

/** Stripe unreachable or failing: 503 (nothing was created); refused by Stripe: 502. */
export function stripeFailure(err: unknown, logger: Logger): ApiError {
  logger.warn({ err }, 'stripe request failed');
  const type = (err as { type?: string }).type;
  if (type === 'StripeConnectionError' || type === 'StripeAPIError' || type === 'StripeRateLimitError' || !type) {
    return new ApiError(503, 'api_error', 'service_unavailable', 'Stripe could not be reached; nothing was created; try again', null, {
      'Retry-After': '5',
    });
  }
  return new ApiError(502, 'provider_error', 'stripe_error', `Stripe refused the request (${type})`);
}

export function billingNotConfigured(): ApiError {
  return new ApiError(503, 'api_error', 'billing_not_configured', 'buying credits is not configured on this service (no Stripe key)');
}
