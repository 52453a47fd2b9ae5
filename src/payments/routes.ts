// POST /v2/billing/checkout (API key): a Stripe Checkout Session to buy credits.
// POST /v2/billing/stripe-webhook (no API key: Stripe's signature is the authentication): the events Stripe
// sends, outside the OpenAPI document like the provider callbacks. Anyone can send to it, so before its body
// is read: the sender's rate (per source address), the declared length, a slot among the bodies being read;
// then the body is read raw (bounded), and the Stripe-Signature header is checked by the stripe library over
// it before anything else (https://docs.stripe.com/webhooks#verify-events).
//
//   200 {"received": true}   verified: handled now, handled before (nothing changes), or not ours (ignored)
//   400 invalid_signature    missing, bad or stale signature: nothing changes
//   413 request_too_large    body above STRIPE_WEBHOOK_BODY_BYTES_MAX
//   429 rate_limited         too many deliveries from one address (Retry-After)
//   503                      Stripe not configured here (billing_not_configured), too many bodies being read,
//                            or the database down: Stripe delivers the event again later
import express, { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import { ApiError, fromZodError, invalidParam } from '../errors.js';
import { principalOf } from '../http/auth.js';
import { inFlightLimit } from '../http/in-flight.js';
import { jsonBody } from '../http/json-body.js';
import { ApiRouter, json, type RouteContract } from '../http/openapi.js';
import { rateLimit } from '../http/rate-limit.js';
import { microEurToEur } from '../money.js';
import { callbackSourceOf } from '../video-jobs/callback-routes.js';
import { CheckoutSession, CreateCheckoutBody } from './schemas.js';
import { billingNotConfigured, type PaymentsService } from './service.js';

/** A Stripe event is a few KiB; this bounds what one delivery may make the process read. */
export const STRIPE_WEBHOOK_BODY_BYTES_MAX = 256 * 1024;
/** Deliveries per minute from one source address, and bodies read at once per API process. */
export const STRIPE_WEBHOOK_LIMITS = { per_source_per_minute: 600, reads_max: 32, reads_per_source_max: 16 };

const createCheckout = {
  method: 'post',
  path: '/v2/billing/checkout',
  operationId: 'createCheckoutSession',
  tag: 'Billing',
  summary: 'Buy credits (a Stripe Checkout Session)',
  description:
    'A Checkout Session in payment mode, in EUR, for `amount_in_euro`: send the customer to its `url`. Once Stripe says it is paid, ' +
    'the amount is credited to this workspace (first paying anything owed), exactly once. The card may be saved for auto top-up.',
  security: 'apiKey',
  body: {
    component: 'CreateCheckoutBody',
    schema: CreateCheckoutBody,
    example: { amount_in_euro: 20, success_url: 'https://example.com/paid', cancel_url: 'https://example.com/account' },
  },
  responses: { '201': json(CheckoutSession, 'The Checkout Session.') },
  errors: {
    400: '`amount_in_euro` with more than two decimals or outside the bounds (by default 5 to 1000 EUR), or a bad URL; `error.param` names it.',
    429: undefined,
    502: 'Stripe refused the request (stripe_error).',
    503: 'Buying credits is not configured here (billing_not_configured), or Stripe could not be reached (service_unavailable).',
  },
} satisfies RouteContract;

export function checkoutRoutes(deps: { auth: RequestHandler; limit: RequestHandler; payments: PaymentsService | null }): ApiRouter {
  const api = new ApiRouter();
  const configured: RequestHandler = (_req, _res, next) => next(deps.payments ? undefined : billingNotConfigured());
  api.route(createCheckout, deps.auth, configured, deps.limit, jsonBody, async ({ body }, _req, res) => {
    const payments = deps.payments!;
    const amount_micro_eur = Math.round(body.amount_in_euro * 100) * 10_000;
    const { min_micro_eur, max_micro_eur } = payments.bounds;
    if (amount_micro_eur < min_micro_eur || amount_micro_eur > max_micro_eur) {
      throw invalidParam(
        'amount_in_euro',
        `amount_in_euro must be between ${microEurToEur(min_micro_eur)} and ${microEurToEur(max_micro_eur)} EUR`,
      );
    }
    const session = await payments.createCheckout(principalOf(res).workspace_id, {
      amount_micro_eur,
      success_url: body.success_url,
      cancel_url: body.cancel_url,
    });
    res.status(201).json({ object: 'checkout_session', id: session.id, url: session.url });
  });
  return api;
}

const WebhookHead = z.object({
  'content-length': z
    .string()
    .optional()
    .transform((declared) => (declared === undefined ? undefined : Number(declared))),
  'content-encoding': z
    .string()
    .default('identity')
    .transform((e) => e.trim().toLowerCase()),
  'stripe-signature': z.string().max(4096).optional(),
});

export function stripeWebhookRoutes(deps: { payments: PaymentsService | null; limits?: Partial<typeof STRIPE_WEBHOOK_LIMITS> }): Router {
  const limits = { ...STRIPE_WEBHOOK_LIMITS, ...deps.limits };
  const sourceOf = (req: express.Request) => callbackSourceOf(req.socket.remoteAddress);
  const perSource = rateLimit(limits.per_source_per_minute, sourceOf);
  const reads = inFlightLimit(limits.reads_max, 'Stripe events being read', limits.reads_per_source_max, 'this address');
  const raw = express.raw({ type: () => true, limit: STRIPE_WEBHOOK_BODY_BYTES_MAX, inflate: false });
  const r = Router();
  r.post(
    '/v2/billing/stripe-webhook',
    perSource,
    (req, res, next) => {
      if (!deps.payments) return next(billingNotConfigured());
      const parsed = WebhookHead.safeParse(req.headers);
      if (!parsed.success) return next(fromZodError(parsed.error));
      if (parsed.data['content-encoding'] !== 'identity')
        return next(new ApiError(415, 'invalid_request_error', 'unsupported_encoding', 'Stripe events are sent without Content-Encoding'));
      const declared = parsed.data['content-length'];
      if (declared !== undefined && declared > STRIPE_WEBHOOK_BODY_BYTES_MAX) {
        res.set('Connection', 'close');
        return next(
          new ApiError(413, 'invalid_request_error', 'request_too_large', `request body exceeds ${STRIPE_WEBHOOK_BODY_BYTES_MAX} bytes`),
        );
      }
      reads.acquire(res, sourceOf(req));
      res.locals['stripeSignature'] = parsed.data['stripe-signature'];
      next();
    },
    raw,
    async (req, res) => {
      const payments = deps.payments!;
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      // The signature first: nothing of the body is believed, nor anything changed, before it verifies.
      const event = payments.verify(body, res.locals['stripeSignature'] as string | undefined);
      const outcome = await payments.handle(event);
      res.json({ received: true, outcome });
    },
  );
  return r;
}
