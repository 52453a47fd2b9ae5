// Automatic top-up on the real stack, against a real stripe-mock process: set on the account once a Checkout
// saved a card; a charge crossing the threshold starts one off-session PaymentIntent (at stripe-mock, with
// the crossing's idempotency key: started again after a crash, it is the same payment), and further charges
// start none until a credit brought the balance back above it; payment_intent.succeeded credits it once; a
// failed one turns automatic top-up off, says so on the account, records billing.auto_top_up_failed, and
// no charge starts another. A payment Stripe declines at once (402 card_error to the PaymentIntent's create,
// answered by the proxy in front of stripe-mock as Stripe documents it) likewise: off, said, told once,
// nothing credited, never asked again. A recorded top-up wakes the starter (the database's notification):
// started well under its poll period, and started by the poll when nobody listens. The ledger audit holds
// after each.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { AutoTopUpStarter } from '../../src/payments/auto-top-up.js';
import { createStripeClient } from '../../src/payments/service.js';
import { assertAuditHolds, http, newCustomer, simJob, speakRequest, waitForJob, type Stack } from '../helpers/stack.js';
import {
  useStripeStack,
  deliver,
  eventPayload,
  paidSession,
  STRIPE_MOCK_MISSING,
  stripeId,
  DECLINES,
  declineTopUpsOf,
  type DeclineCode,
  type StripeMock,
} from './setup.js';

type Json = any;
let mock: StripeMock;
let stack: Stack;
const micro = (eur: number) => Math.round(eur * 1_000_000);

interface TopUpRow {
  id: string;
  status: string;
  payment_intent_id: string | null;
  amount_micro_eur: number;
}
const topUps = async (workspaceId: string) =>
  (
    await stack.db.query<TopUpRow>(
      'SELECT id, status, payment_intent_id, amount_micro_eur FROM auto_top_ups WHERE workspace_id = $1 ORDER BY created_at',
      [workspaceId],
    )
  ).rows;

async function untilStarted(workspaceId: string, count: number): Promise<TopUpRow[]> {
  for (let i = 0; ; i++) {
    const rows = await topUps(workspaceId);
    if (rows.length === count && rows.every((r) => r.status !== 'pending')) return rows;
    if (i >= 200) {
      const w = await stack.db.query('SELECT * FROM workspaces WHERE id = $1', [workspaceId]);
      const l = await stack.db.query(
        'SELECT kind, amount_micro_eur, balance_after_micro_eur FROM ledger_entries WHERE workspace_id = $1 ORDER BY id',
        [workspaceId],
      );
      assert.fail(`auto top-ups not started: ${JSON.stringify(rows)} ${JSON.stringify(w.rows)} ${JSON.stringify(l.rows)}`);
    }
    await sleep(50);
  }
}

/** A video job of `videos` videos of 8 s (sim-video-1: 0.05 EUR a second a video), charged when accepted. */
async function spend(key: string, videos: number): Promise<string> {
  const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
    token: key,
    json: simJob({ outcome: 'succeed' }, { n: videos, durationSeconds: 8 }),
  });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.id;
}

const paymentIntentEvent = (type: string, workspaceId: string, topUp: TopUpRow, over: Record<string, unknown> = {}) =>
  eventPayload(type, {
    id: stripeId('pi'),
    object: 'payment_intent',
    amount: topUp.amount_micro_eur / 10_000,
    amount_received: type === 'payment_intent.succeeded' ? topUp.amount_micro_eur / 10_000 : 0,
    currency: 'eur',
    status: type === 'payment_intent.succeeded' ? 'succeeded' : 'requires_payment_method',
    metadata: { workspace_id: workspaceId, purpose: 'auto_top_up', auto_top_up_id: topUp.id },
    ...over,
  });

describe('automatic top-up', { skip: STRIPE_MOCK_MISSING }, () => {
  useStripeStack((s, m) => {
    stack = s;
    mock = m;
  });

  test('needs a card saved by a paid Checkout, and an amount within the bounds', async () => {
    const c = await newCustomer(stack, 10);
    const noCard = await http(stack.baseUrl, 'PATCH', '/v2/account', {
      token: c.key,
      json: { auto_top_up: { threshold_in_euro: 5, amount_in_euro: 20 } },
    });
    assert.equal(noCard.status, 400, JSON.stringify(noCard.body));
    assert.equal(noCard.body.error.code, 'payment_method_required');
    await deliver(stack.baseUrl, eventPayload('checkout.session.completed', paidSession(c.workspaceId, 5)));
    const tooMuch = await http(stack.baseUrl, 'PATCH', '/v2/account', {
      token: c.key,
      json: { auto_top_up: { threshold_in_euro: 5, amount_in_euro: 5000 } },
    });
    assert.equal(tooMuch.status, 400);
    assert.equal(tooMuch.body.error.param, 'auto_top_up.amount_in_euro');
    const ok = await http(stack.baseUrl, 'PATCH', '/v2/account', {
      token: c.key,
      json: { auto_top_up: { threshold_in_euro: 5, amount_in_euro: 20 } },
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.auto_top_up, { threshold_in_euro: 5, amount_in_euro: 20 });
    assert.equal(ok.body.auto_top_up_error, null);
    const off = await http(stack.baseUrl, 'PATCH', '/v2/account', { token: c.key, json: { auto_top_up: null } });
    assert.equal(off.body.auto_top_up, null);
  });

  test('one PaymentIntent per crossing, credited once; a failure turns it off and is told, and nothing loops', async () => {
    const c = await newCustomer(stack, 0);
    await deliver(stack.baseUrl, eventPayload('checkout.session.completed', paidSession(c.workspaceId, 10)));
    const endpoint = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: 'http://127.0.0.1:9/hooks' } });
    assert.equal(endpoint.status, 201);
    const set = await http(stack.baseUrl, 'PATCH', '/v2/account', {
      token: c.key,
      json: { auto_top_up: { threshold_in_euro: 7, amount_in_euro: 5 } },
    });
    assert.equal(set.status, 200);
    const jobs: string[] = [];

    // 10 - 1.6 = 8.4: above. - 1.6 = 6.8: the crossing. - 1.6 = 5.2: still below, no second top-up.
    jobs.push(await spend(c.key, 4));
    await sleep(300);
    assert.equal((await topUps(c.workspaceId)).length, 0);
    jobs.push(await spend(c.key, 4));
    jobs.push(await spend(c.key, 4));
    const [first] = await untilStarted(c.workspaceId, 1);
    assert.equal(first!.status, 'started');
    assert.equal(first!.amount_micro_eur, micro(5));
    const sent = mock.requests.filter((q) => q.method === 'POST' && q.path === '/v1/payment_intents');
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.headers['idempotency-key'], `auto-top-up-${first!.id}`);
    assert.equal(sent[0]!.form.get('amount'), '500');
    assert.equal(sent[0]!.form.get('currency'), 'eur');
    assert.equal(sent[0]!.form.get('off_session'), 'true');
    assert.equal(sent[0]!.form.get('confirm'), 'true');
    assert.equal(sent[0]!.form.get('metadata[workspace_id]'), c.workspaceId);
    assert.ok(sent[0]!.form.get('customer'));
    assert.ok(sent[0]!.form.get('payment_method'));

    // A starter that died after Stripe answered (the row still pending) starts it again: the same key, one payment.
    await stack.db.query("UPDATE auto_top_ups SET status = 'pending' WHERE id = $1", [first!.id]);
    const starter = new AutoTopUpStarter({
      db: stack.db,
      stripe: createStripeClient(stack.config.stripe!),
      logger: pino({ level: 'silent' }),
      interval_ms: 60_000,
    });
    await starter.sweep();
    // Counted once the top-up is started: until then the stack's own starter may send it again too (woken
    // by the notification, or its poll), with the same idempotency key.
    await untilStarted(c.workspaceId, 1);
    const again = mock.requests.filter((q) => q.method === 'POST' && q.path === '/v1/payment_intents');
    assert.ok(again.length >= 2);
    assert.ok(again.every((q) => q.headers['idempotency-key'] === `auto-top-up-${first!.id}`));

    // Stripe says it succeeded (twice): credited once; the balance above the threshold arms it again.
    const succeeded = paymentIntentEvent('payment_intent.succeeded', c.workspaceId, first!);
    assert.equal((await deliver(stack.baseUrl, succeeded)).body.outcome, 'credited');
    assert.equal((await deliver(stack.baseUrl, succeeded)).body.outcome, 'duplicate');
    const b = await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key });
    assert.equal(micro(b.body.balance_in_euro), micro(10 + 5 - 3 * 1.6));
    assert.equal((await topUps(c.workspaceId))[0]!.status, 'succeeded');
    await assertAuditHolds(stack);

    // 10.2 - 1.6 = 8.6, - 1.6 = 7.0 (not below), - 1.6 = 5.4: the second crossing.
    for (let i = 0; i < 3; i++) jobs.push(await spend(c.key, 4));
    const rows = await untilStarted(c.workspaceId, 2);
    const second = rows[1]!;
    assert.equal(second.status, 'started');

    // It fails: automatic top-up is off, the account says why, the event is recorded; no charge starts another.
    const failed = paymentIntentEvent('payment_intent.payment_failed', c.workspaceId, second, {
      last_payment_error: { type: 'card_error', code: 'card_declined', message: 'Your card was declined.' },
    });
    assert.equal((await deliver(stack.baseUrl, failed)).body.outcome, 'recorded');
    assert.equal((await deliver(stack.baseUrl, failed)).body.outcome, 'duplicate');
    const account = await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key });
    assert.equal(account.body.auto_top_up, null);
    assert.match(account.body.auto_top_up_error, /declined/);
    const events = await stack.db.query<{ payload: string }>(
      "SELECT payload FROM webhook_events WHERE workspace_id = $1 AND type = 'billing.auto_top_up_failed'",
      [c.workspaceId],
    );
    assert.equal(events.rows.length, 1);
    const event: Json = JSON.parse(events.rows[0]!.payload);
    assert.deepEqual(event.data, {
      object: 'auto_top_up',
      id: second.id,
      amount_in_euro: 5,
      payment_intent: second.payment_intent_id,
      message: 'Your card was declined. (card_declined)',
    });
    jobs.push(await spend(c.key, 4));
    await sleep(1_500);
    assert.equal((await topUps(c.workspaceId)).length, 2);
    // One request for the second top-up, none for anything after it (the first's may be sent again, same key).
    const keys = mock.requests.filter((q) => q.path === '/v1/payment_intents').map((q) => q.headers['idempotency-key']);
    assert.equal(keys.filter((k) => k === `auto-top-up-${second.id}`).length, 1);
    assert.deepEqual(new Set(keys), new Set([`auto-top-up-${first!.id}`, `auto-top-up-${second.id}`]));
    for (const id of jobs) await waitForJob(stack, c.key, id);
    await assertAuditHolds(stack);
  });

  for (const code of Object.keys(DECLINES) as DeclineCode[]) {
    test(`declined at once (402 ${code}): off, said, told once, nothing credited, never asked again`, async () => {
      const c = await newCustomer(stack, 0);
      await deliver(stack.baseUrl, eventPayload('checkout.session.completed', paidSession(c.workspaceId, 10)));
      assert.equal(
        (await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: 'http://127.0.0.1:9/h' } })).status,
        201,
      );
      const set = await http(stack.baseUrl, 'PATCH', '/v2/account', {
        token: c.key,
        json: { auto_top_up: { threshold_in_euro: 7, amount_in_euro: 5 } },
      });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      const creates = () =>
        mock.requests.filter(
          (q) => q.method === 'POST' && q.path === '/v1/payment_intents' && q.form.get('metadata[workspace_id]') === c.workspaceId,
        );
      mock.answer = declineTopUpsOf(c.workspaceId, code);
      try {
        const jobs = [await spend(c.key, 4), await spend(c.key, 4)]; // 10 - 3.2 = 6.8: below 7
        const [row] = await untilStarted(c.workspaceId, 1);
        assert.equal(row!.status, 'failed');
        assert.equal(creates().length, 1);
        const answered = creates()[0]!.response!;
        assert.equal(answered.status, 402);
        const declinedIntent = answered.body.error.payment_intent.id as string;
        assert.equal(row!.payment_intent_id, declinedIntent, 'the declined PaymentIntent is kept with the top-up');

        const account = await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key });
        assert.equal(account.body.auto_top_up, null);
        assert.match(account.body.auto_top_up_error, new RegExp(DECLINES[code].message.replace(/\./g, '\\.')));
        assert.match(account.body.auto_top_up_error, new RegExp(code));
        const events = async () =>
          (
            await stack.db.query<{ payload: string }>(
              "SELECT payload FROM webhook_events WHERE workspace_id = $1 AND type = 'billing.auto_top_up_failed'",
              [c.workspaceId],
            )
          ).rows;
        assert.equal((await events()).length, 1);
        const event: Json = JSON.parse((await events())[0]!.payload);
        assert.equal(event.data.id, row!.id);
        assert.equal(event.data.payment_intent, declinedIntent);
        assert.equal(event.data.amount_in_euro, 5);
        assert.match(event.data.message, new RegExp(code));

        // Stripe also sends payment_intent.payment_failed for it: already told, nothing more.
        const failedEvent = eventPayload('payment_intent.payment_failed', answered.body.error.payment_intent);
        assert.equal((await deliver(stack.baseUrl, failedEvent)).body.outcome, 'duplicate');
        assert.equal((await events()).length, 1);

        // Nothing credited; further charges and sweeps ask Stripe nothing more.
        jobs.push(await spend(c.key, 4));
        await sleep(1_500);
        const starter = new AutoTopUpStarter({
          db: stack.db,
          stripe: createStripeClient(stack.config.stripe!),
          logger: pino({ level: 'silent' }),
          interval_ms: 60_000,
        });
        assert.equal(await starter.sweep(), 0);
        assert.equal(creates().length, 1);
        assert.equal((await topUps(c.workspaceId)).length, 1);
        const b = await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key });
        assert.equal(micro(b.body.balance_in_euro), micro(10 - 3 * 1.6));
        const credits = await stack.db.query("SELECT 1 FROM ledger_entries WHERE workspace_id = $1 AND kind = 'credit'", [c.workspaceId]);
        assert.equal(credits.rowCount, 1, 'only the Checkout was credited');
        for (const id of jobs) await waitForJob(stack, c.key, id);
        await assertAuditHolds(stack);
      } finally {
        mock.answer = null;
      }
    });
  }
});

// A recorded top-up wakes the starter at once (the database's notification from the charge's transaction):
// with its poll set to a minute, a crossing's PaymentIntent is still asked of Stripe within a fraction of a
// second; a starter that does not listen leaves it pending until its poll. No worker runs here (its starter
// would start them too): the charges are speech, which the API process makes itself.
describe('automatic top-up: woken by the database', { skip: STRIPE_MOCK_MISSING }, () => {
  useStripeStack(
    (s, m) => {
      stack = s;
      mock = m;
    },
    { worker: false },
  );
  const POLL_MS = 60_000;
  const newStarter = (opts: { listen: boolean; interval_ms?: number }) =>
    new AutoTopUpStarter({
      db: stack.db,
      stripe: createStripeClient(stack.config.stripe!),
      logger: pino({ level: 'silent' }),
      interval_ms: opts.interval_ms ?? POLL_MS,
      listen: opts.listen,
    });
  /** A customer with a saved card, a balance of 7 EUR and automatic top-up below 7: any charge crosses. */
  async function armed(): Promise<{ key: string; workspaceId: string }> {
    const c = await newCustomer(stack, 0);
    await deliver(stack.baseUrl, eventPayload('checkout.session.completed', paidSession(c.workspaceId, 7)));
    const set = await http(stack.baseUrl, 'PATCH', '/v2/account', {
      token: c.key,
      json: { auto_top_up: { threshold_in_euro: 7, amount_in_euro: 5 } },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    return c;
  }
  async function speak(key: string): Promise<void> {
    const r = await speakRequest(stack.baseUrl, key, { model: 'sim-speech-1', voice: 'sim-narrator', input: 'Top me up, please.' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  const createdFor = (workspaceId: string) =>
    mock.requests.find(
      (q) => q.method === 'POST' && q.path === '/v1/payment_intents' && q.form.get('metadata[workspace_id]') === workspaceId,
    );
  async function untilListening(starter: AutoTopUpStarter) {
    for (let i = 0; !starter.listening; i++) {
      assert.ok(i < 100, 'the starter listens');
      await sleep(20);
    }
    await sleep(100); // its first sweep (at start) is over
  }

  test('a crossing starts its payment well under the poll period', async () => {
    const starter = newStarter({ listen: true });
    starter.start();
    try {
      await untilListening(starter);
      const latencies: number[] = [];
      for (let round = 0; round < 3; round++) {
        const c = await armed();
        await speak(c.key);
        for (let i = 0; !createdFor(c.workspaceId); i++) {
          assert.ok(i < 500, 'the top-up was not started within 5 s (its poll is a minute)');
          await sleep(10);
        }
        // From the charge's transaction (the top-up row's time) to Stripe's receipt of the PaymentIntent's create.
        const recorded = await stack.db.query<{ at: Date }>('SELECT created_at AS at FROM auto_top_ups WHERE workspace_id = $1', [
          c.workspaceId,
        ]);
        latencies.push(createdFor(c.workspaceId)!.at - recorded.rows[0]!.at.getTime());
        const [row] = await untilStarted(c.workspaceId, 1);
        assert.equal(row!.status, 'started');
      }
      process.stdout.write(
        `# auto top-up asked of Stripe ${latencies.join(', ')} ms after its charge's transaction (poll ${POLL_MS} ms)\n`,
      );
      // A twentieth of the poll period at most, loaded machines included (unloaded: about 100 ms).
      assert.ok(Math.max(...latencies) < POLL_MS / 20, `started within ${POLL_MS / 20} ms of the charge: ${latencies.join(', ')} ms`);
    } finally {
      await starter.shutdown();
    }
    assert.equal(starter.listening, false);
    await assertAuditHolds(stack);
  });

  test('without listening it waits for the poll, which still starts it', async () => {
    const deaf = newStarter({ listen: false });
    deaf.start();
    const c = await armed();
    try {
      await sleep(100);
      await speak(c.key);
      await sleep(1_500);
      assert.deepEqual(
        (await topUps(c.workspaceId)).map((r) => r.status),
        ['pending'],
        'not started before its poll',
      );
      assert.equal(createdFor(c.workspaceId), undefined);
    } finally {
      await deaf.shutdown();
    }
    const polling = newStarter({ listen: false, interval_ms: 200 });
    polling.start();
    try {
      const [row] = await untilStarted(c.workspaceId, 1);
      assert.equal(row!.status, 'started');
    } finally {
      await polling.shutdown();
    }
    await assertAuditHolds(stack);
  });
});
