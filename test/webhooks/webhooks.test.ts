// Webhooks on the real stack (PostgreSQL, Temporal, worker, API): endpoint management, Standard
// Webhooks signatures (the spec's published test vector and an independent verifier), durable
// delivery with retries through failures, events recorded once with the settlement, deliveries
// started once, giving up after the retry window, and the limits of one HTTP attempt.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { inTransaction } from '../../src/db/pool.js';
import { settleVideoJob } from '../../src/video-jobs/billing.js';
import { UrlSigner } from '../../src/storage/signed-urls.js';
import { generateWebhookSecret, signWebhook } from '../../src/webhooks/signature.js';
import { recordJobEvent, type JobEventContext } from '../../src/webhooks/events.js';
import { dispatchUndispatched, dispatchWebhookDeliveries, webhookTaskQueue, type WebhookDispatch } from '../../src/webhooks/dispatch.js';
import { sendWebhook } from '../../src/webhooks/sender.js';
import { WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX } from '../../src/webhooks/service.js';
import { webhookDeliveryWorkflowId, type webhookDeliveryWorkflow } from '../../workflows/webhook-delivery.js';
import { assertAuditHolds, http as request, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { startReceiver, type ReceivedWebhook, type Receiver } from '../helpers/webhook-receiver.js';

const RETRY_INITIAL_MS = 200;
let stack: Stack;
let dispatch: WebhookDispatch;
let eventContext: JobEventContext;
const receivers: Receiver[] = [];

before(async () => {
  stack = await startStack({ env: { WEBHOOK_RETRY_INITIAL_MS: String(RETRY_INITIAL_MS), PUBLIC_BASE_URL: 'http://api.example.test' } });
  dispatch = { client: stack.api.temporal, db: stack.db, taskQueue: stack.config.temporal.taskQueue, retry_initial_ms: RETRY_INITIAL_MS };
  eventContext = { downloadUrls: new UrlSigner(stack.config.urlSigningSecret!, 3600), baseUrl: 'http://api.example.test' };
});
after(async () => {
  for (const r of receivers) await r.close();
  await stack.stop();
});

async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

async function register(key: string, url: string, events?: string[]) {
  const r = await request(stack.baseUrl, 'POST', '/v2/webhooks', { token: key, json: events ? { url, events } : { url } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as { id: string; secret: string; url: string; events: string[] };
}

async function runJob(key: string, simulate: Record<string, unknown> = {}) {
  const created = await request(stack.baseUrl, 'POST', '/v2/videos/generations', {
    token: key,
    json: simJob({ delay_ms: 0, ...simulate }),
  });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  return waitForJob(stack, key, created.body.id);
}

async function deliveries(key: string, endpointId: string, query = '') {
  const r = await request(stack.baseUrl, 'GET', `/v2/webhooks/${endpointId}/deliveries${query}`, { token: key });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { object: 'list'; data: any[]; has_more: boolean };
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeout_ms = 30_000): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const deliveryRow = async (eventId: string) =>
  (await stack.db.query('SELECT id, status, attempts, last_error, dispatched_at FROM webhook_deliveries WHERE event_id = $1', [eventId]))
    .rows;

/** Verifies a received request as a receiver would, with the Standard Webhooks reference library. */
function verify(secret: string, w: ReceivedWebhook): any {
  return new Webhook(secret).verify(w.body, {
    'webhook-id': w.headers['webhook-id']!,
    'webhook-timestamp': w.headers['webhook-timestamp']!,
    'webhook-signature': w.headers['webhook-signature']!,
  });
}

/** The job without what differs between two signings of its URLs (signature and expiry). */
const withoutUrlSignatures = (job: any) => ({
  ...job,
  videos: job.videos.map((v: any) => ({ ...v, url: v.url.split('?')[0], expires_at: 'x' })),
});

describe('signatures', () => {
  test('the Standard Webhooks test vector', () => {
    // libraries/javascript/src/webhook.test.ts of github.com/standard-webhooks/standard-webhooks ("sign function works")
    const sig = signWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    assert.equal(sig, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  test('a generated secret is whsec_ + base64 of 32 random bytes, and the reference library verifies our signatures', () => {
    const secret = generateWebhookSecret();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]+={0,2}$/);
    assert.equal(Buffer.from(secret.slice('whsec_'.length), 'base64').length, 32);
    assert.notEqual(generateWebhookSecret(), secret);
    const ts = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({ id: 'evt_1', type: 'video.generation.succeeded', data: { é: 'ü' } });
    const headers = { 'webhook-id': 'evt_1', 'webhook-timestamp': String(ts), 'webhook-signature': signWebhook(secret, 'evt_1', ts, body) };
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
    assert.throws(() => new Webhook(secret).verify(body.replace('ü', 'u'), headers), /signature/i);
    assert.throws(() => new Webhook(generateWebhookSecret()).verify(body, headers), /signature/i);
    assert.throws(() => signWebhook(secret, 'evt.1', ts, body), /never contains/);
  });
});

describe('endpoints', () => {
  test('create shows the secret once; list and get never; another workspace sees 404 everywhere', async () => {
    const a = await newCustomer(stack, 1);
    const b = await newCustomer(stack, 1);
    const created = await request(stack.baseUrl, 'POST', '/v2/webhooks', { token: a.key, json: { url: 'http://127.0.0.1:9/hook' } });
    assert.equal(created.status, 201);
    assert.equal(created.body.object, 'webhook_endpoint');
    assert.deepEqual(created.body.events, ['video.generation.succeeded', 'video.generation.failed', 'batch.completed']);
    assert.match(created.body.secret, /^whsec_/);
    assert.equal(typeof created.body.created, 'number');
    const id = created.body.id;

    const list = await request(stack.baseUrl, 'GET', '/v2/webhooks', { token: a.key });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body, {
      object: 'list',
      data: [
        { id, object: 'webhook_endpoint', url: 'http://127.0.0.1:9/hook', events: created.body.events, created: created.body.created },
      ],
    });
    const got = await request(stack.baseUrl, 'GET', `/v2/webhooks/${id}`, { token: a.key });
    assert.equal(got.status, 200);
    assert.equal(got.body.secret, undefined);
    assert.ok(!JSON.stringify(list.body).includes(created.body.secret));

    for (const [method, path] of [
      ['GET', `/v2/webhooks/${id}`],
      ['DELETE', `/v2/webhooks/${id}`],
      ['GET', `/v2/webhooks/${id}/deliveries`],
    ] as const) {
      const r = await request(stack.baseUrl, method, path, { token: b.key });
      assert.equal(r.status, 404, `${method} ${path} from another workspace`);
      assert.equal(r.body.error.code, 'webhook_endpoint_not_found');
    }
    assert.deepEqual((await request(stack.baseUrl, 'GET', '/v2/webhooks', { token: b.key })).body.data, []);
    assert.equal((await request(stack.baseUrl, 'GET', '/v2/webhooks/not-a-uuid', { token: a.key })).status, 404);

    const deleted = await request(stack.baseUrl, 'DELETE', `/v2/webhooks/${id}`, { token: a.key });
    assert.deepEqual(deleted.body, { id, object: 'webhook_endpoint', deleted: true });
    assert.equal((await request(stack.baseUrl, 'GET', `/v2/webhooks/${id}`, { token: a.key })).status, 404);
    assert.equal((await request(stack.baseUrl, 'DELETE', `/v2/webhooks/${id}`, { token: a.key })).status, 404);
    assert.deepEqual((await request(stack.baseUrl, 'GET', '/v2/webhooks', { token: a.key })).body.data, []);
    assert.equal((await request(stack.baseUrl, 'GET', '/v2/webhooks')).status, 401);
  });

  test('invalid requests are 400s naming the parameter', async () => {
    const c = await newCustomer(stack, 1);
    const cases: [unknown, string, string?][] = [
      [{}, 'url', 'missing_parameter'],
      [{ url: 'not a url' }, 'url', 'url_not_allowed'],
      [{ url: 'ftp://127.0.0.1/x' }, 'url', 'url_not_allowed'],
      [{ url: 'http://user:pw@127.0.0.1/x' }, 'url', 'url_not_allowed'],
      [{ url: 'http://127.0.0.1/x#frag' }, 'url', 'url_not_allowed'],
      [{ url: 'http://10.1.2.3/x' }, 'url', 'url_not_allowed'], // private, even in development
      [{ url: 'http://169.254.169.254/latest/meta-data' }, 'url', 'url_not_allowed'],
      [{ url: 'http://[fe80::1]/x' }, 'url', 'url_not_allowed'],
      [{ url: 'http://no-such-host.invalid/x' }, 'url', 'url_not_allowed'], // http only to loopback
      [{ url: 'https://xn--a.example/x' }, 'url', 'url_not_allowed'], // an IDN label (not checkable by a pattern)
      [{ url: `http://127.0.0.1/${'x'.repeat(2100)}` }, 'url'],
      [{ url: 'http://127.0.0.1/x', events: [] }, 'events'],
      [{ url: 'http://127.0.0.1/x', events: ['video.generation.started'] }, 'events.0'],
      [{ url: 'http://127.0.0.1/x', events: ['video.generation.failed', 'video.generation.failed'] }, 'events'],
      [{ url: 'http://127.0.0.1/x', secret: 'mine' }, 'secret'],
    ];
    for (const [json, param, code] of cases) {
      const r = await request(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json });
      assert.equal(r.status, 400, `${JSON.stringify(json).slice(0, 100)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, param, JSON.stringify(r.body));
      if (code) assert.equal(r.body.error.code, code, JSON.stringify(r.body));
    }
    assert.deepEqual((await request(stack.baseUrl, 'GET', '/v2/webhooks', { token: c.key })).body.data, [], 'nothing was registered');
    const lists = [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=abc', 'limit'],
      ['?after=le_1', 'after'],
      ['?after=whatt_', 'after'],
      ['?other=1', 'other'],
    ];
    const ep = await register(c.key, 'http://localhost:9/hook');
    for (const [q, param] of lists) {
      const r = await request(stack.baseUrl, 'GET', `/v2/webhooks/${ep.id}/deliveries${q}`, { token: c.key });
      assert.equal(r.status, 400, q);
      assert.equal(r.body.error.param, param, q);
    }
  });

  test(`at most ${WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX} endpoints per workspace, also when created concurrently`, async () => {
    const c = await newCustomer(stack, 1);
    const results = await Promise.all(
      Array.from({ length: WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX + 5 }, (_, i) =>
        request(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: `http://127.0.0.1:9/hook/${i}` } }),
      ),
    );
    assert.equal(results.filter((r) => r.status === 201).length, WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX);
    for (const r of results.filter((r) => r.status !== 201)) {
      assert.equal(r.status, 409);
      assert.equal(r.body.error.code, 'webhook_endpoint_limit_reached');
    }
    const list = await request(stack.baseUrl, 'GET', '/v2/webhooks', { token: c.key });
    assert.equal(list.body.data.length, WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX);
    await request(stack.baseUrl, 'DELETE', `/v2/webhooks/${list.body.data[0].id}`, { token: c.key });
    assert.equal(
      (await request(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: 'http://127.0.0.1:9/again' } })).status,
      201,
    );
  });
});

describe('delivery', () => {
  test('a receiver failing twice (500, then a redirect) gets the event a third time: same webhook-id, valid signatures, every attempt listed', async () => {
    const hook = await receiver({
      script: [{ status: 500 }, { status: 302, headers: { location: 'http://127.0.0.1:9/elsewhere' } }],
      fallback: { status: 200, body: 'ok' },
    });
    const c = await newCustomer(stack, 10);
    const endpoint = await register(c.key, hook.url);
    const job = await runJob(c.key);
    assert.equal(job.status, 'succeeded');

    const got = await hook.waitFor(3);
    assert.equal(got.length, 3);
    const ids = new Set(got.map((w) => w.headers['webhook-id']));
    assert.equal(ids.size, 1, 'the same webhook-id on every attempt');
    const [eventId] = [...ids] as [string];
    assert.match(eventId, /^evt_[0-9a-f]{32}$/);
    for (const w of got) {
      assert.equal(w.headers['content-type'], 'application/json');
      assert.deepEqual(verify(endpoint.secret, w), JSON.parse(got[0]!.body), 'the reference verifier accepts every attempt');
      assert.equal(w.body, got[0]!.body, 'the same body every time');
      assert.ok(Math.abs(Number(w.headers['webhook-timestamp']) - w.at_ms / 1000) < 5, 'the timestamp is the attempt time');
    }
    assert.ok(got[2]!.at_ms - got[1]!.at_ms >= RETRY_INITIAL_MS * 2 * 0.9, 'backoff doubles');
    assert.ok(got[1]!.at_ms - got[0]!.at_ms >= RETRY_INITIAL_MS * 0.9);

    const event = JSON.parse(got[0]!.body);
    assert.deepEqual(Object.keys(event).sort(), ['created', 'data', 'id', 'object', 'type']);
    assert.equal(event.id, eventId);
    assert.equal(event.object, 'event');
    assert.equal(event.type, 'video.generation.succeeded');
    const current = await request(stack.baseUrl, 'GET', `/v2/videos/generations/${job.id}`, { token: c.key });
    assert.deepEqual(withoutUrlSignatures(event.data), withoutUrlSignatures(current.body), 'data is the job as GET answers it');
    assert.ok(event.data.videos[0].url.startsWith('http://api.example.test/v2/files/'), 'URLs based on PUBLIC_BASE_URL');

    const delivery = await until('the delivery to succeed', async () => {
      const list = await deliveries(c.key, endpoint.id);
      return list.data[0]?.delivery_status === 'succeeded' && list.data.length === 3 && list;
    });
    assert.deepEqual(
      delivery.data.map((a) => [a.attempt, a.status, a.http_status, a.error]),
      [
        [3, 'succeeded', 200, null],
        [2, 'failed', 302, 'redirect (302) not followed'],
        [1, 'failed', 500, 'HTTP 500'],
      ],
    );
    for (const a of delivery.data) {
      assert.equal(a.object, 'webhook_delivery_attempt');
      assert.equal(a.event_id, eventId);
      assert.equal(a.event_type, 'video.generation.succeeded');
      assert.equal(a.delivery_id, delivery.data[0].delivery_id);
      assert.ok(Math.abs(a.created - Math.floor(got[a.attempt - 1]!.at_ms / 1000)) <= 1);
    }
    assert.equal(delivery.has_more, false);
    // Pagination: newest first, `after` = the last id of the previous page.
    const first = await deliveries(c.key, endpoint.id, '?limit=2');
    assert.deepEqual(
      first.data.map((a) => a.attempt),
      [3, 2],
    );
    assert.equal(first.has_more, true);
    const second = await deliveries(c.key, endpoint.id, `?limit=2&after=${first.data[1].id}`);
    assert.deepEqual(
      second.data.map((a) => a.attempt),
      [1],
    );
    assert.equal(second.has_more, false);
    assert.equal(hook.received.length, 3, 'nothing more after the 2xx');
    await assertAuditHolds(stack);
  });

  test('failed jobs send video.generation.failed; each endpoint gets only the types it subscribed to; other workspaces get nothing', async () => {
    const all = await receiver();
    const onlySucceeded = await receiver();
    const otherWorkspace = await receiver();
    const c = await newCustomer(stack, 10);
    const other = await newCustomer(stack, 10);
    const eAll = await register(c.key, all.url);
    await register(c.key, onlySucceeded.url, ['video.generation.succeeded']);
    await register(other.key, otherWorkspace.url);
    const job = await runJob(c.key, { outcome: 'fail', message: 'the provider refused' });
    assert.equal(job.status, 'failed');
    const [w] = await all.waitFor(1);
    const event = verify(eAll.secret, w!) as any;
    assert.equal(event.type, 'video.generation.failed');
    assert.equal(event.data.id, job.id);
    assert.equal(event.data.status, 'failed');
    assert.deepEqual(event.data.error, job.error);
    assert.equal(event.data.refunded_in_euro, job.estimated_cost_in_euro);
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(onlySucceeded.received.length, 0);
    assert.equal(otherWorkspace.received.length, 0);
    assert.equal(all.received.length, 1);
    await assertAuditHolds(stack);
  });

  test('an event is recorded once per job, and a delivery started twice runs once', async () => {
    const hook = await receiver();
    const c = await newCustomer(stack, 10);
    const job = await runJob(c.key); // no endpoint yet: no event
    assert.equal((await stack.db.query('SELECT 1 FROM webhook_events WHERE video_job_id = $1', [job.id])).rowCount, 0);
    await register(c.key, hook.url);

    // Recorded but never started, as after a crash between the settlement's commit and the start.
    const ids = await inTransaction(stack.db, (tx) => recordJobEvent(tx, job.id, eventContext));
    assert.equal(ids.length, 1);
    assert.deepEqual(await inTransaction(stack.db, (tx) => recordJobEvent(tx, job.id, eventContext)), [], 'recorded once');
    // A settlement retried later records nothing again either.
    const again = await settleVideoJob(
      stack.db,
      { jobId: job.id, outcome: 'succeeded', delivered: 2, videos: [], error: null, completed_at_ms: Date.now() },
      eventContext,
    );
    assert.equal(again.already_settled, true);
    assert.equal((await stack.db.query('SELECT count(*)::int AS n FROM webhook_events WHERE video_job_id = $1', [job.id])).rows[0].n, 1);
    // The reconciler leaves it to the settlement that recorded it for a grace period, then starts it.
    await dispatchUndispatched(dispatch, 100);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(hook.received.length, 0, 'not started by anyone yet');
    assert.equal(
      (await stack.db.query('SELECT dispatched_at FROM webhook_deliveries WHERE id = $1', [ids[0]])).rows[0].dispatched_at,
      null,
    );

    assert.ok((await dispatchUndispatched(dispatch, 100, 0)) >= 1, 'once the grace has passed');
    await hook.waitFor(1);
    const eventId = hook.received[0]!.headers['webhook-id']!;
    await until('the delivery to succeed', async () => (await deliveryRow(eventId))[0]?.status === 'succeeded');
    const described = await dispatch.client.workflow.getHandle(webhookDeliveryWorkflowId(ids[0]!)).describe();
    assert.equal(described.taskQueue, webhookTaskQueue(dispatch.taskQueue), "deliveries never share the jobs' task queue");
    assert.notEqual(described.taskQueue, dispatch.taskQueue);
    assert.equal(await dispatchWebhookDeliveries(dispatch, ids), 0, 'already started: nothing to do');
    // Even if the mark of the start was lost, the workflow of a delivery never runs twice.
    await stack.db.query('UPDATE webhook_deliveries SET dispatched_at = NULL WHERE id = $1', [ids[0]]);
    assert.equal(await dispatchWebhookDeliveries(dispatch, ids), 1);
    assert.notEqual((await deliveryRow(eventId))[0].dispatched_at, null);
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(hook.received.length, 1);
    await assertAuditHolds(stack);
  });

  test('deleting the endpoint stops the retries of its deliveries', async () => {
    const hook = await receiver({ fallback: { status: 503 } });
    const c = await newCustomer(stack, 10);
    const endpoint = await register(c.key, hook.url);
    await runJob(c.key);
    await hook.waitFor(2);
    assert.equal((await request(stack.baseUrl, 'DELETE', `/v2/webhooks/${endpoint.id}`, { token: c.key })).status, 200);
    const eventId = hook.received[0]!.headers['webhook-id']!;
    const [row] = await until('the delivery to be abandoned', async () => {
      const rows = await deliveryRow(eventId);
      return rows[0]?.status === 'failed' && rows;
    });
    assert.equal(row.last_error, 'the endpoint was deleted');
    const count = hook.received.length;
    await new Promise((r) => setTimeout(r, RETRY_INITIAL_MS * 8));
    assert.equal(hook.received.length, count, 'no attempt after the deletion was seen');
  });

  test('a delivery not accepted within its retry window is marked failed', async () => {
    const hook = await receiver({ fallback: { status: 500 } });
    const c = await newCustomer(stack, 10);
    const job = await runJob(c.key);
    const endpoint = await register(c.key, hook.url);
    const [id] = await inTransaction(stack.db, (tx) => recordJobEvent(tx, job.id, eventContext));
    // The delivery workflow with a 1.5 s window instead of 24 hours.
    const handle = await stack.api.temporal.workflow.start<typeof webhookDeliveryWorkflow>('webhookDeliveryWorkflow', {
      workflowId: webhookDeliveryWorkflowId(id!),
      taskQueue: stack.config.temporal.taskQueue,
      args: [{ delivery_id: id!, retry_initial_ms: RETRY_INITIAL_MS, give_up_after_ms: 1_500 }],
    });
    assert.deepEqual(await handle.result(), { delivery_id: id, status: 'failed' });
    const rows = (await stack.db.query('SELECT status, attempts, last_error FROM webhook_deliveries WHERE id = $1', [id])).rows;
    assert.equal(rows[0].status, 'failed');
    assert.match(rows[0].last_error, /^not accepted within 1.5 seconds; not retried any more$/);
    assert.ok(
      rows[0].attempts >= 2 && rows[0].attempts === hook.received.length,
      `attempts ${rows[0].attempts}, received ${hook.received.length}`,
    );
    const list = await deliveries(c.key, endpoint.id);
    assert.equal(list.data.length, hook.received.length);
    assert.ok(list.data.every((a) => a.delivery_status === 'failed' && a.status === 'failed' && a.http_status === 500));
    // Started again (by a reconciler that lost track), a closed delivery is not sent again.
    await stack.db.query('UPDATE webhook_deliveries SET dispatched_at = NULL WHERE id = $1', [id]);
    await dispatchWebhookDeliveries(dispatch, [id!]);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(list.data.length, hook.received.length);
  });
});

describe('one HTTP attempt', () => {
  const dev = { production: false };
  const signed = { 'webhook-id': 'evt_x', 'webhook-timestamp': '1', 'webhook-signature': 'v1,x' };

  test('times out, reads at most 4 KiB of the answer, and never follows a redirect', async () => {
    const hang = await receiver({ fallback: 'hang' });
    const t = await sendWebhook({ url: hang.url, headers: signed, body: '{}', policy: dev, timeout_ms: 300 });
    assert.equal(t.succeeded, false);
    assert.equal(t.http_status, null);
    assert.match(t.error!, /^timeout/);
    assert.ok(t.duration_ms >= 290 && t.duration_ms < 2_000, String(t.duration_ms));

    // An endless answer: the attempt ends once 4 KiB are read.
    const endless = http.createServer((_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(1024, 'a');
      const timer = setInterval(() => res.write(chunk), 5);
      res.on('close', () => clearInterval(timer));
    });
    await new Promise<void>((r) => endless.listen(0, '127.0.0.1', r));
    try {
      const big = await sendWebhook({
        url: `http://127.0.0.1:${(endless.address() as AddressInfo).port}/`,
        headers: signed,
        body: '{}',
        policy: dev,
        timeout_ms: 5_000,
      });
      assert.deepEqual([big.succeeded, big.http_status, big.error], [true, 200, null]);
      assert.ok(big.duration_ms < 2_000);
    } finally {
      endless.closeAllConnections();
      endless.close();
    }

    const moved = await receiver({ fallback: { status: 301, headers: { location: hang.url } } });
    const r = await sendWebhook({ url: moved.url, headers: signed, body: '{"a":1}', policy: dev });
    assert.deepEqual([r.succeeded, r.http_status, r.error], [false, 301, 'redirect (301) not followed']);
    assert.equal(hang.received.length, 1, 'the redirect target was never called');
    assert.equal(moved.received[0]!.body, '{"a":1}');
    assert.equal(moved.received[0]!.headers['webhook-id'], 'evt_x');

    const closed = await sendWebhook({ url: 'http://127.0.0.1:9/', headers: signed, body: '{}', policy: dev });
    assert.match(closed.error!, /^connection failed: ECONNREFUSED/);
  });
});
