// Buying credits with Stripe, on the real stack against a real stripe-mock process: the Checkout Session the
// stripe library sends (verified by stripe-mock against Stripe's OpenAPI specification, and its parameters
// read at a recording proxy), and the signed events of Stripe's webhook: bad, missing and stale signatures
// change nothing; a payment is credited once however many events name it, in any order; refunds take back
// only what was refunded since the last time; a refund and a dispute of credits already spent leave the
// rest owed (shown on the balance), and the workspace then gets 402 payment_required for every paid request
// until a credit pays it; a dispute won gives its amount back. The ledger audit holds after each.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeWav } from '../../src/media/wav.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { assertAuditHolds, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import {
  useStripeStack,
  deliver,
  dispute,
  eventPayload,
  paidSession,
  refundedCharge,
  STRIPE_MOCK_MISSING,
  WEBHOOK_SECRET,
  type StripeMock,
} from './setup.js';

type Json = any;
let mock: StripeMock;
let stack: Stack;
const micro = (eur: number) => Math.round(eur * 1_000_000);

async function balance(key: string): Promise<{ balance: number; owed: number }> {
  const r = await http(stack.baseUrl, 'GET', '/v2/balance', { token: key });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return { balance: micro(r.body.balance_in_euro), owed: micro(r.body.owed_in_euro) };
}

async function ledger(key: string): Promise<Json[]> {
  const r = await http(stack.baseUrl, 'GET', '/v2/ledger?limit=100', { token: key });
  assert.equal(r.status, 200);
  return r.body.data;
}

/** Credits `eur` to the workspace through a signed checkout.session.completed; returns the Session. */
async function buy(workspaceId: string, eur: number) {
  const session = paidSession(workspaceId, eur);
  const r = await deliver(stack.baseUrl, eventPayload('checkout.session.completed', session));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.outcome, 'credited');
  return session;
}

describe('buying credits with Stripe', { skip: STRIPE_MOCK_MISSING }, () => {
  useStripeStack((s, m) => {
    stack = s;
    mock = m;
  });

  test('a Checkout Session in payment mode, in EUR, naming the workspace, with the card saved for later', async () => {
    const c = await newCustomer(stack, 0);
    const r = await http(stack.baseUrl, 'POST', '/v2/billing/checkout', {
      token: c.key,
      json: { amount_in_euro: 20.5, success_url: 'https://example.com/paid', cancel_url: 'https://example.com/back' },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.object, 'checkout_session');
    assert.match(r.body.id, /^cs_/);
    assert.equal(typeof r.body.url, 'string');
    const sent = mock.requests.filter((q) => q.method === 'POST' && q.path === '/v1/checkout/sessions').at(-1)!;
    assert.ok(sent, 'the stripe library created the Session at stripe-mock');
    const f = sent.form;
    assert.equal(f.get('mode'), 'payment');
    assert.equal(f.get('line_items[0][price_data][currency]'), 'eur');
    assert.equal(f.get('line_items[0][price_data][unit_amount]'), '2050');
    assert.equal(f.get('line_items[0][quantity]'), '1');
    assert.equal(f.get('metadata[workspace_id]'), c.workspaceId);
    assert.equal(f.get('payment_intent_data[metadata][workspace_id]'), c.workspaceId);
    assert.equal(f.get('payment_intent_data[setup_future_usage]'), 'off_session');
    assert.equal(f.get('success_url'), 'https://example.com/paid');
    assert.equal(f.get('cancel_url'), 'https://example.com/back');
    assert.equal(sent.headers['authorization'], 'Bearer sk_test_123');
  });

  test('amounts outside the bounds or with more than two decimals: 400 naming amount_in_euro, nothing sent to Stripe', async () => {
    const c = await newCustomer(stack, 0);
    const before = mock.requests.length;
    for (const amount_in_euro of [4.99, 1000.01, 10.001, -5, 0]) {
      const r = await http(stack.baseUrl, 'POST', '/v2/billing/checkout', {
        token: c.key,
        json: { amount_in_euro, success_url: 'https://example.com/a', cancel_url: 'https://example.com/b' },
      });
      assert.equal(r.status, 400, `${amount_in_euro}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, 'amount_in_euro');
    }
    const bad = await http(stack.baseUrl, 'POST', '/v2/billing/checkout', {
      token: c.key,
      json: { amount_in_euro: 10, success_url: 'javascript:alert(1)', cancel_url: 'https://example.com/b' },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'success_url');
    const noKey = await http(stack.baseUrl, 'POST', '/v2/billing/checkout', { json: { amount_in_euro: 10 } });
    assert.equal(noKey.status, 401);
    assert.equal(mock.requests.length, before);
  });

  test('bad, missing and stale signatures: 400, nothing credited', async () => {
    const c = await newCustomer(stack, 0);
    const payload = eventPayload('checkout.session.completed', paidSession(c.workspaceId, 50));
    const wrongSecret = await deliver(stack.baseUrl, payload, { secret: 'whsec_c29tZW9uZS1lbHNlcy1zZWNyZXQtMDEyMzQ1Njc4OQ' });
    assert.equal(wrongSecret.status, 400);
    assert.equal(wrongSecret.body.error.code, 'invalid_signature');
    assert.equal((await deliver(stack.baseUrl, payload, { signature: null })).status, 400);
    assert.equal((await deliver(stack.baseUrl, payload, { signature: 't=1,v1=00' })).status, 400);
    // Signed ten minutes ago: outside the library's five-minute tolerance.
    const stale = await deliver(stack.baseUrl, payload, { timestamp: Math.floor(Date.now() / 1000) - 600 });
    assert.equal(stale.status, 400);
    assert.match(stale.body.error.message, /tolerance/i);
    // The body changed after signing.
    const tampered = await fetch(`${stack.baseUrl}/v2/billing/stripe-webhook`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'stripe-signature': (await import('stripe')).default.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET }),
      },
      body: payload.replace('"amount_total":5000', '"amount_total":500000'),
    });
    assert.equal(tampered.status, 400);
    assert.deepEqual(await balance(c.key), { balance: 0, owed: 0 });
    assert.equal((await ledger(c.key)).length, 0);
    await assertAuditHolds(stack);
  });

  test('a payment is credited once per Session however many events name it, and a delayed one when it succeeds', async () => {
    const c = await newCustomer(stack, 0);
    const session = paidSession(c.workspaceId, 25);
    const completed = eventPayload('checkout.session.completed', session);
    const results = await Promise.all([1, 2, 3, 4].map(() => deliver(stack.baseUrl, completed)));
    assert.ok(results.every((r) => r.status === 200));
    assert.deepEqual(results.map((r) => r.body.outcome).sort(), ['credited', 'duplicate', 'duplicate', 'duplicate']);
    // Another event of the same Session (its own event id): nothing more.
    const again = await deliver(stack.baseUrl, eventPayload('checkout.session.async_payment_succeeded', session));
    assert.equal(again.body.outcome, 'duplicate');
    assert.deepEqual(await balance(c.key), { balance: micro(25), owed: 0 });
    const entries = await ledger(c.key);
    assert.equal(entries.length, 1);
    assert.equal(entries[0].type, 'credit');
    assert.equal(entries[0].amount_in_euro, 25);
    assert.equal(entries[0].stripe_id, session.payment_intent);

    // A delayed payment method: completed unpaid (nothing yet), then async_payment_succeeded credits it.
    const delayed = paidSession(c.workspaceId, 7.5, { payment_status: 'unpaid' });
    assert.equal((await deliver(stack.baseUrl, eventPayload('checkout.session.completed', delayed))).body.outcome, 'ignored');
    assert.equal((await balance(c.key)).balance, micro(25));
    const paid = { ...delayed, payment_status: 'paid' };
    assert.equal((await deliver(stack.baseUrl, eventPayload('checkout.session.async_payment_succeeded', paid))).body.outcome, 'credited');
    assert.equal((await balance(c.key)).balance, micro(32.5));
    // Not ours: another currency, no workspace, an unknown workspace, an event type we do not handle.
    for (const other of [
      paidSession(c.workspaceId, 10, { currency: 'usd' }),
      paidSession(c.workspaceId, 10, { metadata: {} }),
      paidSession('6f1c1d0e-0000-4000-8000-000000000000', 10),
    ]) {
      assert.equal((await deliver(stack.baseUrl, eventPayload('checkout.session.completed', other))).body.outcome, 'ignored');
    }
    assert.equal((await deliver(stack.baseUrl, eventPayload('customer.created', { id: 'cus_x', object: 'customer' }))).status, 200);
    assert.equal((await balance(c.key)).balance, micro(32.5));
    await assertAuditHolds(stack);
  });

  test('refunds take back only what was refunded since the last time, whatever the order their events arrive in', async () => {
    const c = await newCustomer(stack, 0);
    const session = await buy(c.workspaceId, 40);
    const pi = session.payment_intent;
    // Refunded 10, then 25 in all; the later event arrives first, the earlier one after it, then a duplicate.
    const first = refundedCharge(pi, 40, 10);
    const second = { ...refundedCharge(pi, 40, 25), id: first.id };
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.refunded', second))).body.outcome, 'debited');
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.refunded', first))).body.outcome, 'duplicate');
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.refunded', second))).body.outcome, 'duplicate');
    assert.deepEqual(await balance(c.key), { balance: micro(15), owed: 0 });
    const debit = (await ledger(c.key))[0];
    assert.equal(debit.type, 'debit');
    assert.equal(debit.amount_in_euro, 25);
    assert.equal(debit.stripe_id, second.refunds.data[0]!.id);
    // A charge of a PaymentIntent this service never credited: not ours.
    assert.equal(
      (await deliver(stack.baseUrl, eventPayload('charge.refunded', refundedCharge('pi_unknown', 40, 40)))).body.outcome,
      'ignored',
    );
    await assertAuditHolds(stack);
  });

  test('a refund and a dispute of credits already spent: the rest is owed, paid requests get 402, a credit pays it first', async () => {
    const c = await newCustomer(stack, 0);
    const session = await buy(c.workspaceId, 10);
    // Spend: a voice clone (needs credit) and a video job.
    const voiceId = await cloneVoice(c.key);
    const job = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ outcome: 'succeed' }) });
    assert.equal(job.status, 202, JSON.stringify(job.body));
    const done = await waitForJob(stack, c.key, job.body.id);
    const cost = micro(done.cost_in_euro);
    assert.ok(cost > 0 && cost < micro(10));
    assert.equal((await balance(c.key)).balance, micro(10) - cost);

    // The whole payment refunded: the balance goes to zero, the rest (what was spent) is owed.
    const refund = refundedCharge(session.payment_intent, 10, 10);
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.refunded', refund))).body.outcome, 'debited');
    assert.deepEqual(await balance(c.key), { balance: 0, owed: cost });
    await assertAuditHolds(stack);

    // Every paid request: 402 payment_required, before any other money check; nothing charged or created.
    const refused = [
      await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ outcome: 'succeed' }) }),
      await http(stack.baseUrl, 'POST', '/v2/audio/speech', { token: c.key, json: { input: 'Pay first.', voice: voiceId } }),
      await cloneVoiceRaw(c.key),
    ];
    for (const r of refused) {
      assert.equal(r.status, 402, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'payment_required');
    }
    // The /v1 surface takes the same services: the same refusal.
    const v1 = await http(stack.baseUrl, 'POST', '/v1/audio/speech', {
      token: c.key,
      json: { model: 'sim-speech-1', input: 'x', voice: voiceId },
    });
    assert.equal(v1.status, 402, JSON.stringify(v1.body));

    // A dispute of a second payment, once that payment is spent too, adds to what is owed.
    const second = await buy(c.workspaceId, 5);
    // That credit paid what was owed first.
    assert.deepEqual(await balance(c.key), { balance: micro(5) - cost, owed: 0 });
    const d = dispute(second.payment_intent, 5, 'needs_response');
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.dispute.created', d))).body.outcome, 'debited');
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.dispute.created', d))).body.outcome, 'duplicate');
    assert.deepEqual(await balance(c.key), { balance: 0, owed: cost });
    const entries = await ledger(c.key);
    assert.equal(entries[0].type, 'debit');
    assert.equal(entries[0].amount_in_euro, 5);
    assert.equal(entries[0].stripe_id, d.id);
    assert.equal(entries[0].balance_after_in_euro, 0);
    await assertAuditHolds(stack);

    // Won: the disputed amount comes back, paying what is owed first.
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.dispute.closed', { ...d, status: 'won' }))).body.outcome, 'credited');
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.dispute.closed', { ...d, status: 'won' }))).body.outcome, 'duplicate');
    assert.deepEqual(await balance(c.key), { balance: micro(5) - cost, owed: 0 });
    const after = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ outcome: 'succeed' }, { n: 1 }),
    });
    assert.ok(after.status === 202 || after.status === 402, JSON.stringify(after.body));
    assert.notEqual(after.body?.error?.code, 'payment_required');
    if (after.status === 202) await waitForJob(stack, c.key, after.body.id);
    await assertAuditHolds(stack);
  });

  test('a dispute won before its opening was handled: neither moves money; a lost dispute keeps the debit', async () => {
    const c = await newCustomer(stack, 0);
    const session = await buy(c.workspaceId, 20);
    const d = dispute(session.payment_intent, 20, 'won');
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.dispute.closed', d))).body.outcome, 'recorded');
    assert.equal(
      (await deliver(stack.baseUrl, eventPayload('charge.dispute.created', { ...d, status: 'needs_response' }))).body.outcome,
      'recorded',
    );
    assert.deepEqual(await balance(c.key), { balance: micro(20), owed: 0 });
    const lost = dispute(session.payment_intent, 8, 'needs_response');
    assert.equal((await deliver(stack.baseUrl, eventPayload('charge.dispute.created', lost))).body.outcome, 'debited');
    assert.equal(
      (await deliver(stack.baseUrl, eventPayload('charge.dispute.closed', { ...lost, status: 'lost' }))).body.outcome,
      'ignored',
    );
    assert.deepEqual(await balance(c.key), { balance: micro(12), owed: 0 });
    await assertAuditHolds(stack);
  });
});

async function cloneVoiceRaw(key: string): Promise<{ status: number; body: Json }> {
  const form = new FormData();
  form.append('name', 'payer');
  form.append('file', new Blob([new Uint8Array(encodeWav(new Int16Array(8000), 8000))], { type: 'audio/wav' }), 'a.wav');
  const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  return { status: res.status, body: await res.json() };
}

async function cloneVoice(key: string): Promise<string> {
  const r = await cloneVoiceRaw(key);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.voice_id as string;
}

describe('without Stripe configured', () => {
  test('the billing routes answer 503 billing_not_configured', async () => {
    const plain = await startStack();
    try {
      const c = await newCustomer(plain, 1);
      const checkout = await http(plain.baseUrl, 'POST', '/v2/billing/checkout', {
        token: c.key,
        json: { amount_in_euro: 10, success_url: 'https://example.com/a', cancel_url: 'https://example.com/b' },
      });
      assert.equal(checkout.status, 503);
      assert.equal(checkout.body.error.code, 'billing_not_configured');
      const hook = await fetch(`${plain.baseUrl}/v2/billing/stripe-webhook`, { method: 'POST', body: '{}' });
      assert.equal(hook.status, 503);
      assert.equal(((await hook.json()) as Json).error.code, 'billing_not_configured');
      const b = await http(plain.baseUrl, 'GET', '/v2/balance', { token: c.key });
      assert.deepEqual(b.body, { object: 'balance', balance_in_euro: 1, owed_in_euro: 0 });
    } finally {
      await plain.stop();
    }
  });

  test('a secret key without the webhook secret refuses to start, in one line', () => {
    assert.throws(
      () => loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123' }),
      (err: unknown) => err instanceof ConfigError && /STRIPE_WEBHOOK_SECRET/.test(err.message) && !err.message.includes('\n'),
    );
    assert.throws(() => loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123', STRIPE_WEBHOOK_SECRET: 'nope' }), ConfigError);
    assert.throws(
      () =>
        loadConfig({
          STRIPE_SECRET_KEY: 'sk_test_1',
          STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
          STRIPE_TOPUP_MIN_EUR: '50',
          STRIPE_TOPUP_MAX_EUR: '10',
        }),
      ConfigError,
    );
    const ok = loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123', STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET });
    assert.equal(ok.stripe?.topupMicroEurMin, 5_000_000);
    assert.equal(ok.stripe?.topupMicroEurMax, 1_000_000_000);
    assert.ok(!JSON.stringify(ok).includes('sk_test_123'), 'the key is never serialised');
  });
});
