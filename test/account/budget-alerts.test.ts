// Budget alerts on the real stack (PostgreSQL, Temporal, worker, API): the account (GET/PATCH /v2/account
// and the operators' PATCH), the webhook event balance.low (once per crossing, armed again only by a
// credit), api_key.spend_threshold (50, 80 and 100 % of a key's spend limit, once each, two from one
// charge), charges of video jobs, of speech (HTTP and WebSocket) and of a batch's reservation, concurrent charges crossing together, each event
// recorded once with its ledger entry and delivered signed; the ledger audit after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { inTransaction, type Db } from '../../src/db/pool.js';
import { chargeVideoJob } from '../../src/video-jobs/billing.js';
import { adminCli } from '../helpers/admin-cli.js';
import { ADMIN_TOKEN, assertAuditHolds, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { startReceiver, type ReceivedWebhook, type Receiver } from '../helpers/webhook-receiver.js';
import { UNDISPATCHED_GRACE_MS } from '../../src/webhooks/dispatch.js';
import { connect, wsUrl } from '../voices/speech-ws-setup.js';

let stack: Stack;
const receivers: Receiver[] = [];

before(async () => {
  stack = await startStack({ env: { WEBHOOK_RETRY_INITIAL_MS: '200' } });
});
after(async () => {
  for (const r of receivers) await r.close();
  await stack.stop();
});

/** A customer with a webhook endpoint subscribed to `events`, and the receiver behind it. */
async function customerWithEndpoint(credits_in_euro: number, events: string[]) {
  const c = await newCustomer(stack, credits_in_euro);
  const receiver = await startReceiver();
  receivers.push(receiver);
  const r = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: receiver.url, events } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return { ...c, receiver, secret: r.body.secret as string };
}

async function setThreshold(key: string, low_balance_threshold_in_euro: number | null) {
  const r = await http(stack.baseUrl, 'PATCH', '/v2/account', { token: key, json: { low_balance_threshold_in_euro } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/** One video job of `n` 4-second 720p videos with audio (0.20 EUR each), run to its end. */
async function runJob(key: string, n = 1, simulate: Record<string, unknown> = {}) {
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
    token: key,
    json: simJob({ delay_ms: 0, ...simulate }, { n }),
  });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  return waitForJob(stack, key, created.body.id);
}

/** The events recorded for a workspace, oldest first, with their bodies. */
async function eventsOf(workspaceId: string, type: string): Promise<any[]> {
  const r = await stack.db.query<{ payload: string }>(
    'SELECT payload FROM webhook_events WHERE workspace_id = $1 AND type = $2 ORDER BY created_at, id',
    [workspaceId, type],
  );
  return r.rows.map((row) => JSON.parse(row.payload));
}

const balanceOf = async (key: string) => (await http(stack.baseUrl, 'GET', '/v2/account', { token: key })).body.balance_in_euro as number;

/** Verifies a delivery as a receiver would, with the Standard Webhooks reference library. */
const verified = (secret: string, w: ReceivedWebhook): any =>
  new Webhook(secret).verify(w.body, {
    'webhook-id': w.headers['webhook-id']!,
    'webhook-timestamp': w.headers['webhook-timestamp']!,
    'webhook-signature': w.headers['webhook-signature']!,
  });

describe('the account', () => {
  test('GET answers the balance, nothing owed, no alert, no automatic top-up; PATCH sets and clears the alert', async () => {
    const c = await newCustomer(stack, 12.5);
    const got = await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key });
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, {
      object: 'account',
      balance_in_euro: 12.5,
      owed_in_euro: 0,
      low_balance_threshold_in_euro: null,
      auto_top_up: null,
      // This stack has no Stripe: no Checkout, and automatic top-up never failed.
      credits_checkout: null,
      auto_top_up_error: null,
    });
    assert.equal((await setThreshold(c.key, 5.1234567)).low_balance_threshold_in_euro, 5.123457, 'rounded to the micro-euro');
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key })).body.low_balance_threshold_in_euro, 5.123457);
    const unchanged = await http(stack.baseUrl, 'PATCH', '/v2/account', { token: c.key, json: {} });
    assert.equal(unchanged.body.low_balance_threshold_in_euro, 5.123457, 'a field left out is unchanged');
    assert.equal((await setThreshold(c.key, null)).low_balance_threshold_in_euro, null);
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/account')).status, 401);
  });

  test('bad input: 400 naming the field, nothing changed', async () => {
    const c = await newCustomer(stack, 1);
    await setThreshold(c.key, 2);
    const cases: [unknown, string][] = [
      [{ low_balance_threshold_in_euro: -0.01 }, 'low_balance_threshold_in_euro'],
      [{ low_balance_threshold_in_euro: 1_000_000.01 }, 'low_balance_threshold_in_euro'],
      [{ low_balance_threshold_in_euro: '5' }, 'low_balance_threshold_in_euro'],
      [{ low_balance_threshold_in_euro: 5, owed_in_euro: 0 }, 'owed_in_euro'],
      [[5], ''],
    ];
    for (const [json, param] of cases) {
      const r = await http(stack.baseUrl, 'PATCH', '/v2/account', { token: c.key, json });
      assert.equal(r.status, 400, JSON.stringify(json));
      assert.equal(r.body.error.type, 'invalid_request_error');
      if (param) assert.equal(r.body.error.param, param, JSON.stringify(r.body));
    }
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key })).body.low_balance_threshold_in_euro, 2);
  });

  test("an operator sets a workspace's alert through the admin API; an unknown workspace is 404; the CLI's workspace alert", async () => {
    const c = await newCustomer(stack, 3);
    const r = await http(stack.baseUrl, 'PATCH', `/admin/v1/workspaces/${c.workspaceId}/account`, {
      token: ADMIN_TOKEN,
      json: { low_balance_threshold_in_euro: 1.5 },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.low_balance_threshold_in_euro, 1.5);
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key })).body.low_balance_threshold_in_euro, 1.5);
    const unknown = await http(stack.baseUrl, 'PATCH', '/admin/v1/workspaces/00000000-0000-4000-8000-000000000000/account', {
      token: ADMIN_TOKEN,
      json: { low_balance_threshold_in_euro: 1 },
    });
    assert.equal(unknown.status, 404);
    const bad = await http(stack.baseUrl, 'PATCH', `/admin/v1/workspaces/${c.workspaceId}/account`, {
      token: ADMIN_TOKEN,
      json: { low_balance_threshold_in_euro: -1 },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'low_balance_threshold_in_euro');
    assert.equal((await http(stack.baseUrl, 'PATCH', `/admin/v1/workspaces/${c.workspaceId}/account`, { json: {} })).status, 401);

    const cli = await adminCli(stack.baseUrl, ['workspace', 'alert', '--id', c.workspaceId, '--low-balance', '2.75']);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(JSON.parse(cli.stdout).low_balance_threshold_in_euro, 2.75);
    const off = await adminCli(stack.baseUrl, ['workspace', 'alert', '--id', c.workspaceId, '--low-balance', 'off']);
    assert.equal(off.code, 0, off.stderr);
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key })).body.low_balance_threshold_in_euro, null);
    const wrong = await adminCli(stack.baseUrl, ['workspace', 'alert', '--id', c.workspaceId, '--low-balance', 'lots']);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /--low-balance must be a number of euros/);
  });
});

describe('balance.low', () => {
  test('once per crossing; a refund does not arm it again, a top-up does; delivered signed', async () => {
    const c = await customerWithEndpoint(1, ['balance.low']);
    await setThreshold(c.key, 0.7);
    await runJob(c.key); // 0.80: above
    assert.equal((await eventsOf(c.workspaceId, 'balance.low')).length, 0);
    await runJob(c.key); // 0.60: crossed
    const [first] = await c.receiver.waitFor(1);
    const body = verified(c.secret, first!);
    assert.equal(body.type, 'balance.low');
    assert.equal(body.object, 'event');
    assert.equal(first!.headers['webhook-id'], body.id);
    assert.deepEqual(body.data, { object: 'balance', balance_in_euro: 0.6, low_balance_threshold_in_euro: 0.7 });

    await runJob(c.key); // 0.40: still below, no new event
    // A job that fails is refunded: the balance goes back above the alert, which a refund does not arm.
    await runJob(c.key, 2, { outcome: 'fail' }); // -0.40 then +0.40
    await runJob(c.key); // 0.20
    assert.equal((await eventsOf(c.workspaceId, 'balance.low')).length, 1);

    await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: 0.7 },
    }); // 0.90: armed
    await runJob(c.key); // 0.70: not below
    assert.equal((await eventsOf(c.workspaceId, 'balance.low')).length, 1);
    await runJob(c.key); // 0.50: crossed again
    const events = await eventsOf(c.workspaceId, 'balance.low');
    assert.equal(events.length, 2);
    assert.equal(events[1].data.balance_in_euro, 0.5);
    const received = await c.receiver.waitFor(2);
    assert.equal(verified(c.secret, received[1]!).id, events[1].id);
    assert.equal(await balanceOf(c.key), 0.5);
    await assertAuditHolds(stack);
  });

  test('a speech charge crosses it too; a new threshold arms it; no event without a subscribed endpoint', async () => {
    const c = await customerWithEndpoint(1, ['balance.low']);
    await setThreshold(c.key, 0.9);
    const speak = async () => {
      const r = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
        token: c.key,
        json: { model: 'sim-speech-1', voice: 'sim-narrator', input: 'x'.repeat(1000), response_format: 'wav' },
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    };
    await speak(); // 0.85 (0.15 per 1000 characters)
    const [received] = await c.receiver.waitFor(1);
    assert.deepEqual(verified(c.secret, received!).data, { object: 'balance', balance_in_euro: 0.85, low_balance_threshold_in_euro: 0.9 });
    await setThreshold(c.key, 0.9); // the same threshold: still disarmed
    await speak(); // 0.70
    assert.equal((await eventsOf(c.workspaceId, 'balance.low')).length, 1);
    await setThreshold(c.key, 0.6); // a new threshold arms it
    await speak(); // 0.55
    assert.equal((await eventsOf(c.workspaceId, 'balance.low')).length, 2);

    const quiet = await customerWithEndpoint(1, ['video.generation.succeeded']);
    await setThreshold(quiet.key, 0.9);
    await runJob(quiet.key);
    assert.equal((await eventsOf(quiet.workspaceId, 'balance.low')).length, 0);
    const armed = await stack.db.query('SELECT low_balance_armed FROM workspaces WHERE id = $1', [quiet.workspaceId]);
    assert.equal(armed.rows[0].low_balance_armed, false, 'crossed all the same: a subscription later does not send the old crossing');
    await assertAuditHolds(stack);
  });

  test('a speech over the WebSocket crossing it sends the alert as the context settles, not when the reconciler comes by', async () => {
    const c = await customerWithEndpoint(1, ['balance.low']);
    await setThreshold(c.key, 0.9);
    const client = await connect(wsUrl(stack), c.key);
    try {
      client.send({ context_id: 'low', voice: 'sim-narrator', model: 'sim-speech-1', text: 'x'.repeat(1000) });
      const done = await client.done('low');
      assert.equal(done.cost_in_euro, 0.15, JSON.stringify(done));
    } finally {
      client.close();
    }
    // The reconciler starts a delivery left unstarted only after UNDISPATCHED_GRACE_MS: well after this.
    const [received] = await c.receiver.waitFor(1, UNDISPATCHED_GRACE_MS / 3);
    assert.deepEqual(verified(c.secret, received!).data, { object: 'balance', balance_in_euro: 0.85, low_balance_threshold_in_euro: 0.9 });
    await assertAuditHolds(stack);
  });

  test('a charge whose transaction rolls back leaves no event and the alert armed; the one that commits sends one', async () => {
    const c = await customerWithEndpoint(1, ['balance.low']);
    await setThreshold(c.key, 0.9);
    const jobId = randomUUID();
    const crash = inTransaction(stack.db, async (tx) => {
      // The charge's own statement (video_job_charge) on this transaction's connection.
      const charged = await chargeVideoJob(tx as unknown as Db, {
        jobId,
        workflowId: `rolled-back-${jobId}`,
        workspaceId: c.workspaceId,
        model: 'sim-video-1',
        prompt: 'p',
        params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
        estimated_cost_micro_eur: 200_000,
        created_at_ms: Date.now(),
        request_fingerprint: 'f',
      });
      assert.equal(charged.ok, true);
      const inside = await tx.query("SELECT count(*)::int AS n FROM webhook_events WHERE workspace_id = $1 AND type = 'balance.low'", [
        c.workspaceId,
      ]);
      assert.equal(inside.rows[0].n, 1, "recorded in the charge's transaction");
      throw new Error('the process died before the commit');
    });
    await assert.rejects(crash, /died before the commit/);
    assert.equal((await eventsOf(c.workspaceId, 'balance.low')).length, 0);
    const row = await stack.db.query('SELECT low_balance_armed, balance_micro_eur FROM workspaces WHERE id = $1', [c.workspaceId]);
    assert.deepEqual(row.rows[0], { low_balance_armed: true, balance_micro_eur: 1_000_000 });
    await runJob(c.key); // 0.80
    assert.equal((await eventsOf(c.workspaceId, 'balance.low')).length, 1);
    await c.receiver.waitFor(1);
    await assertAuditHolds(stack);
  });

  test('concurrent charges crossing together: exactly one event', async () => {
    const c = await customerWithEndpoint(10, ['balance.low']);
    await setThreshold(c.key, 9.5);
    const jobs = await Promise.all(Array.from({ length: 10 }, () => runJob(c.key)));
    assert.ok(jobs.every((j) => j.status === 'succeeded'));
    assert.equal(await balanceOf(c.key), 8);
    const events = await eventsOf(c.workspaceId, 'balance.low');
    assert.equal(events.length, 1);
    assert.ok(events[0].data.balance_in_euro < 9.5 && events[0].data.balance_in_euro >= 9.3 - 1e-9, JSON.stringify(events[0].data));
    await c.receiver.waitFor(1);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(c.receiver.received.length, 1);
    await assertAuditHolds(stack);
  });
});

describe('api_key.spend_threshold', () => {
  async function keyWithLimit(workspaceId: string, spend_limit_in_euro: number) {
    const r = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: { spend_limit_in_euro },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body as { id: string; key: string };
  }

  test('50, 80 and 100 % once each; one charge crossing two sends two; delivered signed', async () => {
    const c = await customerWithEndpoint(10, ['api_key.spend_threshold']);
    const key = await keyWithLimit(c.workspaceId, 1);
    await runJob(key.key); // 0.20
    await runJob(key.key); // 0.40
    assert.equal((await eventsOf(c.workspaceId, 'api_key.spend_threshold')).length, 0);
    await runJob(key.key, 2); // 0.80: 50 and 80 % at once
    let events = await eventsOf(c.workspaceId, 'api_key.spend_threshold');
    assert.deepEqual(events.map((e) => e.data.threshold_percent).sort(), [50, 80]);
    for (const e of events)
      assert.deepEqual(e.data, {
        object: 'api_key',
        id: key.id,
        spend_in_euro: 0.8,
        spend_limit_in_euro: 1,
        threshold_percent: e.data.threshold_percent,
      });
    // A refund brings the spend back under 80 %: the thresholds already sent are not sent again.
    await runJob(key.key, 1, { outcome: 'fail' });
    await runJob(key.key); // 1.00: 100 %
    events = await eventsOf(c.workspaceId, 'api_key.spend_threshold');
    assert.deepEqual(events.map((e) => e.data.threshold_percent).sort(), [100, 50, 80]);
    const received = await c.receiver.waitFor(3);
    const bodies = received.map((w) => verified(c.secret, w));
    assert.deepEqual(new Set(bodies.map((b) => b.id)), new Set(events.map((e) => e.id)));
    // The limit is reached: the next create is refused, and nothing more is sent.
    const refused = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: key.key,
      json: simJob({ delay_ms: 0 }, { n: 1 }),
    });
    assert.equal(refused.status, 402);
    assert.equal((await eventsOf(c.workspaceId, 'api_key.spend_threshold')).length, 3);
    // The workspace's other key (no limit) sends none.
    await runJob(c.key);
    assert.equal((await eventsOf(c.workspaceId, 'api_key.spend_threshold')).length, 3);
    await assertAuditHolds(stack);
  });

  test('concurrent charges: each threshold exactly once; speech counts too', async () => {
    const c = await customerWithEndpoint(10, ['api_key.spend_threshold']);
    const key = await keyWithLimit(c.workspaceId, 2);
    await Promise.all(Array.from({ length: 9 }, () => runJob(key.key))); // 1.80
    const speech = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: key.key,
      json: { model: 'sim-speech-1', voice: 'sim-narrator', input: 'y'.repeat(1000), response_format: 'wav' },
    }); // 1.95
    assert.equal(speech.status, 200);
    assert.deepEqual((await eventsOf(c.workspaceId, 'api_key.spend_threshold')).map((e) => e.data.threshold_percent).sort(), [50, 80]);
    const last = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: key.key,
      json: { model: 'sim-speech-1', voice: 'sim-narrator', input: 'z'.repeat(333), response_format: 'wav' },
    }); // 0.04995 more: 1.99995
    assert.equal(last.status, 200);
    assert.equal((await eventsOf(c.workspaceId, 'api_key.spend_threshold')).length, 2, 'below 100 % still');
    await c.receiver.waitFor(2);
    await assertAuditHolds(stack);
  });

  test("a batch's reservation is the key's spend: it crosses the thresholds when the batch is created", async () => {
    const c = await customerWithEndpoint(10, ['api_key.spend_threshold']);
    const key = await keyWithLimit(c.workspaceId, 1);
    // Four videos of 0.20: a reservation of 0.80, 50 and 80 % at once, before any of them runs.
    const requests = Array.from({ length: 4 }, (_, i) => ({
      custom_id: `v-${i}`,
      method: 'POST',
      url: '/v2/videos/generations',
      body: simJob({ delay_ms: 0 }, { n: 1 }),
    }));
    const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: key.key, json: { requests } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const events = await eventsOf(c.workspaceId, 'api_key.spend_threshold');
    assert.deepEqual(events.map((e) => [e.data.id, e.data.spend_in_euro, e.data.threshold_percent]).sort(), [
      [key.id, 0.8, 50],
      [key.id, 0.8, 80],
    ]);
    for (;;) {
      const b = await http(stack.baseUrl, 'GET', `/v2/batches/${created.body.id}`, { token: key.key });
      if (b.body.status === 'completed') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(
      (await eventsOf(c.workspaceId, 'api_key.spend_threshold')).length,
      2,
      'its jobs, drawn from the reservation, send no more',
    );
    await c.receiver.waitFor(2);
    await assertAuditHolds(stack);
  });
});
