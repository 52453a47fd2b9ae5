// What the payments tests share: a real stripe-mock process (scripts/install-stripe-mock.sh; STRIPE_MOCK_PATH)
// behind a recording proxy (the requests the stripe library sent it, their form bodies decoded, and what
// was answered; a test may answer a request itself, as Stripe would where stripe-mock always accepts), a stack
// whose STRIPE_API_BASE points at it, and Stripe events signed with the library's own test helper
// (stripe.webhooks.generateTestHeaderString), shaped as Stripe's event objects are
// (https://docs.stripe.com/api/events/object, https://docs.stripe.com/api/events/types).
import http from 'node:http';
import { after, before } from 'node:test';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Stripe from 'stripe';
import { freePort } from '../helpers/infra.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { goToolsMissing } from '../helpers/tools.js';
import { execFileSync } from 'node:child_process';

/** Why these tests cannot run here (no stripe-mock and no Go to build it), or undefined. */
export const STRIPE_MOCK_MISSING = goToolsMissing(['STRIPE_MOCK_PATH'], 'stripe-mock');

export const WEBHOOK_SECRET = 'whsec_dGVzdC13ZWJob29rLXNlY3JldC0wMTIzNDU2Nzg5';

export function stripeMockPath(): string {
  return (
    process.env['STRIPE_MOCK_PATH'] ??
    execFileSync('bash', ['scripts/install-stripe-mock.sh'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim()
  );
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The form body, decoded: keys as Stripe's library writes them (`metadata[workspace_id]`). */
  form: URLSearchParams;
  /** When its body had arrived (Date.now()). */
  at: number;
  /** What the proxy answered (stripe-mock's answer, or the test's), once answered. */
  response?: { status: number; body: any };
}

/** A test's own answer to a request (a status and a JSON body), or undefined to let stripe-mock answer. */
export type StripeAnswer = (req: RecordedRequest) => { status: number; body: unknown } | undefined;

export interface StripeMock {
  /** The proxy's base URL (STRIPE_API_BASE). */
  url: string;
  requests: RecordedRequest[];
  /** Set by a test: answers the requests it returns something for, instead of stripe-mock. */
  answer: StripeAnswer | null;
  stop(): Promise<void>;
}

/** Starts stripe-mock on a free loopback port, and a recording proxy in front of it. */
export async function startStripeMock(): Promise<StripeMock> {
  const [port, httpsPort] = [await freePort(), await freePort()];
  // Both listeners on free loopback ports (its HTTPS listener would take :12112 otherwise, shared by parallel test files).
  const child: ChildProcess = spawn(stripeMockPath(), ['-http-addr', `127.0.0.1:${port}`, '-https-addr', `127.0.0.1:${httpsPort}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const upstream = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`stripe-mock exited (${child.exitCode}): ${output}`);
    const up = await fetch(`${upstream}/v1/charges`, { headers: { authorization: 'Bearer sk_test_123' } }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (up) break;
    if (i > 200) throw new Error(`stripe-mock did not start: ${output}`);
    await sleep(50);
  }
  const requests: RecordedRequest[] = [];
  const mock: Omit<StripeMock, 'url' | 'stop'> = { requests, answer: null };
  const proxy = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const recorded: RecordedRequest = {
        method: req.method!,
        path: req.url!,
        headers: req.headers,
        form: new URLSearchParams(body.toString('utf8')),
        at: Date.now(),
      };
      requests.push(recorded);
      const reply = (status: number, text: string, contentType = 'application/json') => {
        try {
          recorded.response = { status, body: JSON.parse(text) };
        } catch {
          recorded.response = { status, body: text };
        }
        res.writeHead(status, { 'content-type': contentType, 'request-id': `req_proxy${requests.length}` });
        res.end(text);
      };
      const own = mock.answer?.(recorded);
      if (own) return reply(own.status, JSON.stringify(own.body));
      const headers = { ...req.headers };
      delete headers['host'];
      fetch(upstream + req.url, { method: req.method!, headers: headers as Record<string, string>, body: body.length ? body : undefined })
        .then(async (r) => reply(r.status, await r.text(), r.headers.get('content-type') ?? 'application/json'))
        .catch((err) => reply(502, String(err), 'text/plain'));
    });
  });
  const proxyPort = await new Promise<number>((resolve) =>
    proxy.listen(0, '127.0.0.1', () => resolve((proxy.address() as { port: number }).port)),
  );
  return Object.assign(mock, {
    url: `http://127.0.0.1:${proxyPort}`,
    stop: async () => {
      await new Promise((r) => proxy.close(r));
      child.kill('SIGTERM');
    },
  });
}

/** The environment that turns buying credits on, against `mock`. */
export const stripeEnv = (mock: StripeMock): Record<string, string> => ({
  STRIPE_SECRET_KEY: 'sk_test_123',
  STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  STRIPE_API_BASE: mock.url,
});

/** A stripe-mock and a stack using it for the tests of a describe block: handed to `use` once started, stopped after. */
export function useStripeStack(use: (stack: Stack, mock: StripeMock) => void, opts: { worker?: boolean } = {}): void {
  let mock: StripeMock | undefined;
  let stack: Stack | undefined;
  before(async () => {
    mock = await startStripeMock();
    stack = await startStack({ env: stripeEnv(mock), ...opts });
    use(stack, mock);
  });
  after(async () => {
    await stack?.stop();
    await mock?.stop();
  });
}

const stripe = new Stripe('sk_test_unused');
export const stripeId = (prefix: string) => `${prefix}_test${randomBytes(9).toString('hex')}`;

/** A Stripe event of `type` about `object`, as JSON text, with its id. */
export function eventPayload(type: string, object: Record<string, unknown>, id = stripeId('evt')): string {
  return JSON.stringify({
    id,
    object: 'event',
    api_version: '2026-10-28.endive',
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object },
  });
}

/** Sends a payload to the webhook route signed (now, or at `timestamp`) with `secret`, as Stripe does. */
export async function deliver(
  baseUrl: string,
  payload: string,
  opts: { timestamp?: number; secret?: string; signature?: string | null } = {},
): Promise<{ status: number; body: any }> {
  const header =
    opts.signature === null
      ? undefined
      : (opts.signature ??
        stripe.webhooks.generateTestHeaderString({
          payload,
          secret: opts.secret ?? WEBHOOK_SECRET,
          ...(opts.timestamp !== undefined ? { timestamp: opts.timestamp } : {}),
        }));
  const res = await fetch(`${baseUrl}/v2/billing/stripe-webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(header ? { 'stripe-signature': header } : {}) },
    body: payload,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A paid Checkout Session of `eur` for the workspace (its amount_total in cents), as checkout.session.completed carries it. */
export function paidSession(workspaceId: string, eur: number, over: Record<string, unknown> = {}) {
  return {
    id: stripeId('cs'),
    object: 'checkout.session',
    mode: 'payment',
    currency: 'eur',
    amount_total: Math.round(eur * 100),
    payment_status: 'paid',
    status: 'complete',
    payment_intent: stripeId('pi'),
    customer: stripeId('cus'),
    client_reference_id: workspaceId,
    metadata: { workspace_id: workspaceId, purpose: 'checkout' },
    ...over,
  };
}

/** A charge of a PaymentIntent with `refunded_eur` refunded so far (cumulative), as charge.refunded carries it. */
export function refundedCharge(paymentIntent: string, eur: number, refunded_eur: number, refundId = stripeId('re')) {
  return {
    id: stripeId('ch'),
    object: 'charge',
    amount: Math.round(eur * 100),
    amount_refunded: Math.round(refunded_eur * 100),
    currency: 'eur',
    payment_intent: paymentIntent,
    refunded: refunded_eur >= eur,
    refunds: { object: 'list', data: [{ id: refundId, object: 'refund' }], has_more: false },
  };
}

/** A dispute of a PaymentIntent's charge, as charge.dispute.created / closed carry it. */
export function dispute(paymentIntent: string, eur: number, status: string, id = stripeId('du')) {
  return {
    id,
    object: 'dispute',
    amount: Math.round(eur * 100),
    currency: 'eur',
    charge: stripeId('ch'),
    payment_intent: paymentIntent,
    status,
  };
}

// Stripe's answer to an off-session PaymentIntent whose payment fails at once: "the request also fails with a
// 402 HTTP status code and the status of the PaymentIntent is requires_payment_method", the error's code
// card_declined, or authentication_required when the bank asks for the customer
// (https://docs.stripe.com/payments/save-and-reuse, charging the saved method off-session). The error
// object's fields (type card_error, code, decline_code, message, doc_url, the PaymentIntent and the
// PaymentMethod): https://docs.stripe.com/api/errors and https://docs.stripe.com/declines/codes.
export const DECLINES = {
  card_declined: { decline_code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
  authentication_required: {
    decline_code: 'authentication_required',
    message: 'Your card was declined. This transaction requires authentication.',
  },
} as const;
export type DeclineCode = keyof typeof DECLINES;
/** Stripe's 402 answer declining the off-session PaymentIntent `req` asked for, with `code`. */
export function declinedPaymentIntent(code: DeclineCode, req: RecordedRequest) {
  const { decline_code, message } = DECLINES[code];
  const metadata = Object.fromEntries([...req.form].flatMap(([k, v]) => (k.startsWith('metadata[') ? [[k.slice(9, -1), v]] : [])));
  const paymentMethod = { id: req.form.get('payment_method'), object: 'payment_method', type: 'card' };
  const lastPaymentError = {
    type: 'card_error',
    code,
    decline_code,
    message,
    doc_url: `https://docs.stripe.com/error-codes/${code.replace('_', '-')}`,
    payment_method: paymentMethod,
  };
  return {
    status: 402,
    body: {
      error: {
        ...lastPaymentError,
        charge: stripeId('ch'),
        payment_intent: {
          id: stripeId('pi'),
          object: 'payment_intent',
          amount: Number(req.form.get('amount')),
          amount_received: 0,
          currency: req.form.get('currency'),
          customer: req.form.get('customer'),
          status: 'requires_payment_method',
          last_payment_error: lastPaymentError,
          metadata,
        },
        request_log_url: 'https://dashboard.stripe.com/test/logs/req_declined',
      },
    },
  };
}

/** An answer declining, with `code`, every off-session PaymentIntent created for the workspace (other requests: stripe-mock's). */
export const declineTopUpsOf =
  (workspaceId: string, code: DeclineCode): StripeAnswer =>
  (req) =>
    req.method === 'POST' && req.path === '/v1/payment_intents' && req.form.get('metadata[workspace_id]') === workspaceId
      ? declinedPaymentIntent(code, req)
      : undefined;
