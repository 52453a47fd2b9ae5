// POST /v2/provider-callbacks/{backend}/{job_id}: a callback verified by its backend's adapter nudges the
// job (once per delivery; the poll that follows is the source of truth), one that fails verification is
// a 401 in the error shape and nudges nothing. First the route on its own with a recording nudge, then
// the service with fal and Replicate configured against their fakes: /v2/models names the backends, and
// the fakes' own signed deliveries reach the service's route; last a fal job whose callbacks bring its
// polls forward only as far as its pacing allows.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import express from 'express';
import pino from 'pino';
import { FAL_USER_ID } from '../fakes/fal-fake.js';
import { errorHandler } from '../../src/http/errors.js';
import { providerCallbackRoutes, type CallbackForJob } from '../../src/video-jobs/callback-routes.js';
import { FAL_CALLBACK_BODY_BYTES_MAX, falDescriptor } from '../../src/providers/video/fal.js';
import { replicateDescriptor } from '../../src/providers/video/replicate.js';
import type { VideoProvider } from '../../src/providers/video/types.js';
import { assertAuditHolds, http as api, newCustomer, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { readVideoJob } from '../../src/video-jobs/records.js';
import { CallbackAbuse, type CallbackAbuseFindings } from '../../soak/callback-abuse.js';
import { Client } from '../../soak/client.js';
import { RequestLog } from '../../soak/report.js';
import { Rng } from '../../soak/rng.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError, loadConfig } from '../../src/config.js';
import {
  JOB_ID,
  fal,
  replicate,
  falProvider,
  replicateProvider,
  falCallback,
  replicateCallback,
  useProviderFakes,
} from './provider-callbacks.setup.js';
import { settingsOf } from '../../src/providers/registry.js';

useProviderFakes();

describe('configuration', () => {
  test('FAL_KEY and REPLICATE_API_TOKEN enable them with the documented defaults; the secrets are never enumerable; credentials only over TLS (or to a local fake)', () => {
    const none = loadConfig({});
    assert.equal(settingsOf(none.providers, falDescriptor), null);
    assert.equal(settingsOf(none.providers, replicateDescriptor), null);
    const c = loadConfig({
      FAL_KEY: 'fal-secret-key',
      REPLICATE_API_TOKEN: 'r8_secret',
      REPLICATE_WEBHOOK_SECRET: `whsec_${Buffer.from('0123456789abcdef0123').toString('base64')}`,
    });
    const fal = settingsOf(c.providers, falDescriptor)!;
    const replicate = settingsOf(c.providers, replicateDescriptor)!;
    assert.deepEqual({ ...fal }, { queueUrl: 'https://queue.fal.run', jwksUrl: 'https://rest.fal.ai/.well-known/jwks.json' });
    assert.equal(fal.key, 'fal-secret-key');
    assert.deepEqual({ ...replicate }, { apiUrl: 'https://api.replicate.com' });
    assert.equal(replicate.token, 'r8_secret');
    assert.ok(!JSON.stringify(c).includes('secret'), 'no secret in the serialised config');
    assert.throws(
      () => loadConfig({ FAL_KEY: 'k', FAL_QUEUE_URL: 'http://queue.example' }),
      (e: Error) => e instanceof ConfigError && /FAL_QUEUE_URL: must be an https/.test(e.message),
    );
    assert.throws(() => loadConfig({ REPLICATE_API_TOKEN: 't', REPLICATE_API_URL: 'http://api.example' }), ConfigError);
    assert.throws(() => loadConfig({ REPLICATE_API_TOKEN: 't', REPLICATE_WEBHOOK_SECRET: 'not-a-secret' }), /REPLICATE_WEBHOOK_SECRET/);
    assert.throws(() => loadConfig({ FAL_KEY: 'a key with spaces' }), /FAL_KEY/);
    assert.equal(
      settingsOf(loadConfig({ FAL_KEY: 'k', FAL_QUEUE_URL: 'http://127.0.0.1:9999' }).providers, falDescriptor)!.queueUrl,
      'http://127.0.0.1:9999',
    );
  });
});

describe('the route on its own', () => {
  let server: http.Server;
  let base = '';
  const nudges: [string, string][] = [];
  const deliveries: CallbackForJob[] = [];
  before(async () => {
    const providers = new Map<string, VideoProvider>([
      ['fal', falProvider()],
      ['replicate', replicateProvider()],
      ['vertex', { name: 'vertex' } as VideoProvider],
    ]);
    const app = express();
    app.use(
      providerCallbackRoutes({
        providerFor: (b) => providers.get(b),
        nudgeJob: async (c) => {
          nudges.push([c.job_id, c.backend]);
          deliveries.push(c);
          return 'nudged';
        },
      }),
    );
    app.use(errorHandler(pino({ level: 'silent' })));
    server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  beforeEach(() => {
    nudges.length = 0;
    deliveries.length = 0;
  });

  test('fal and Replicate deliveries, signed as they sign them: 200 {"received": true}, the job nudged once per delivery', async () => {
    const f = await falCallback(base);
    assert.equal(f.answered, 200);
    const r = await replicateCallback(base);
    assert.equal(r.answered, 200);
    assert.deepEqual(nudges, [
      [JOB_ID, 'fal'],
      [JOB_ID, 'replicate'],
    ]);
    const res = await api(base, 'POST', `/v2/provider-callbacks/fal/${JOB_ID}`, { headers: f.headers, rawBody: f.body });
    assert.deepEqual([res.status, res.body], [200, { received: true }]);
  });

  test('a replay within the tolerance is acknowledged as the same delivery (the nudge keeps it from changing anything twice)', async () => {
    const f = await falCallback(base);
    assert.equal(await fal.redeliver(f.request_id), 200);
    assert.deepEqual(nudges, [
      [JOB_ID, 'fal'],
      [JOB_ID, 'fal'],
    ]);
    assert.equal(deliveries[0]!.delivery.delivery_id, deliveries[1]!.delivery.delivery_id);
    assert.equal(deliveries[0]!.delivery.request_ref, f.request_id);
    const r = await replicateCallback(base);
    assert.equal(await replicate.redeliver((JSON.parse(r.body.toString()) as { id: string }).id), 200);
    const [first, again] = deliveries.slice(-2);
    assert.equal(first!.delivery.delivery_id, again!.delivery.delivery_id);
    assert.equal(first!.delivery.delivery_id, `replicate:${r.headers['webhook-id']}`);
  });

  test('a callback concerns a job only through one of its recorded request ids (fal) or predictions (Replicate)', async () => {
    const f = await falCallback(base);
    const r = await replicateCallback(base);
    const [fd, rd] = deliveries;
    const falOp = JSON.stringify({
      fal: [...fal.submitted.keys()].map((id) => ({
        request_id: id,
        status_url: `${fal.url}/fal-ai/veo3.1/requests/${id}/status`,
        response_url: `${fal.url}/fal-ai/veo3.1/requests/${id}`,
        cancel_url: `${fal.url}/fal-ai/veo3.1/requests/${id}/cancel`,
      })),
    });
    assert.equal(fd!.concerns(falOp), true);
    assert.equal(fd!.concerns(falOp.replaceAll(f.request_id, '0c4d5e6f-0000-4000-8000-000000000000')), false);
    assert.equal(fd!.concerns('not an operation'), false);
    const prediction = (JSON.parse(r.body.toString()) as { id: string }).id;
    assert.equal(rd!.concerns(`${prediction}`), true);
    assert.equal(rd!.concerns('abcdefabcdef'), false);
  });

  test('forged or stale: 401 invalid_signature in the error shape, nothing nudged', async () => {
    const f = await falCallback(base);
    const r = await replicateCallback(base);
    nudges.length = 0;
    const forged = [
      { backend: 'fal', headers: { ...f.headers, 'x-fal-webhook-signature': 'ab'.repeat(64) }, body: f.body },
      { backend: 'fal', headers: f.headers, body: Buffer.from(f.body.toString().replace('OK', 'KO')) },
      {
        backend: 'fal',
        headers: fal.signCallback(f.request_id, f.body, { timestamp_s: Math.floor(Date.now() / 1000) - 600 }),
        body: f.body,
      },
      { backend: 'fal', headers: {}, body: f.body },
      { backend: 'replicate', headers: { ...r.headers, 'webhook-signature': 'v1,bm90IGEgc2lnbmF0dXJl' }, body: r.body },
      { backend: 'replicate', headers: r.headers, body: Buffer.from(r.body.toString().replace('succeeded', 'failed')) },
      { backend: 'replicate', headers: replicate.signCallback(r.body, { at: new Date(Date.now() - 600_000) }), body: r.body },
      { backend: 'fal', headers: r.headers, body: r.body },
    ];
    for (const c of forged) {
      const res = await api(base, 'POST', `/v2/provider-callbacks/${c.backend}/${JOB_ID}`, { headers: c.headers, rawBody: c.body });
      assert.equal(res.status, 401, JSON.stringify(res.body));
      assert.equal(res.body.error.type, 'authentication_error');
      assert.equal(res.body.error.code, 'invalid_signature');
      assert.equal(typeof res.body.error.message, 'string');
      assert.ok('param' in res.body.error);
    }
    assert.deepEqual(nudges, []);
  });

  test('a backend that is not here or never calls back: 404; a body above the limit: 413; keys unreachable: 503 (delivered again later)', async () => {
    for (const backend of ['runway', 'vertex']) {
      const res = await api(base, 'POST', `/v2/provider-callbacks/${backend}/${JOB_ID}`, { json: {} });
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'provider_not_found');
    }
    const f = await falCallback(base);
    const big = await api(base, 'POST', `/v2/provider-callbacks/fal/${JOB_ID}`, {
      headers: f.headers,
      rawBody: Buffer.alloc(FAL_CALLBACK_BODY_BYTES_MAX + 1, 0x20),
    });
    assert.equal(big.status, 413);
    fal.fault({ route: 'jwks', status: 500, body: {} });
    // a new adapter (nothing cached) behind a new router: the JWKS answers 500
    const app = express();
    app.use(providerCallbackRoutes({ providerFor: () => falProvider(), nudgeJob: async () => assert.fail('not nudged') }));
    app.use(errorHandler(pino({ level: 'silent' })));
    const s = http.createServer(app);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const res = await api(`http://127.0.0.1:${(s.address() as AddressInfo).port}`, 'POST', `/v2/provider-callbacks/fal/${JOB_ID}`, {
      headers: f.headers,
      rawBody: f.body,
    });
    s.closeAllConnections();
    s.close();
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, 'service_unavailable');
    assert.ok(res.headers.get('retry-after'));
  });

  test('a verified callback naming no job of ours (not a job id) is acknowledged and nudges nothing', async () => {
    const f = await falCallback(base, 'not-a-job');
    assert.equal(f.answered, 200);
    assert.deepEqual(nudges, []);
  });
});

describe('the service with fal and Replicate configured (against their fakes)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      worker: false,
      env: { ...fal.env(), ...replicate.env() },
    });
  });
  after(async () => {
    await stack?.stop();
  });

  test("/v2/models/all names each model's backends in order, their regions and which are configured; the first configured serves", async () => {
    const c = await newCustomer(stack, 1);
    const r = await api(stack.baseUrl, 'GET', '/v2/models/all', { token: c.key });
    assert.equal(r.status, 200);
    const byId = new Map<string, any>(r.body.data.map((m: any) => [m.id, m]));
    const fast = byId.get('veo-3.1-fast-generate-001');
    assert.equal(fast.backend, 'fal', 'Vertex AI is not configured: fal serves it');
    assert.equal(fast.region, 'global');
    assert.equal(fast.simulated, false);
    assert.deepEqual(fast.backends, [
      { backend: 'vertex', region: 'europe-west4', available: false },
      { backend: 'fal', region: 'global', available: true },
      { backend: 'replicate', region: 'global', available: true },
    ]);
    assert.equal(byId.get('veo-3.0-fast-generate-001').backend, 'fal', 'an alias as its replacement');
    assert.equal(byId.get('wan-2.5').backend, 'fal');
    assert.deepEqual(
      byId.get('kling-v2.5-turbo-pro').backends.map((b: any) => b.backend),
      ['fal', 'replicate'],
    );
    assert.equal(byId.get('sim-video-1').backend, 'simulator');
  });

  test("the fakes' signed deliveries reach the service: 200 (an unknown job changes nothing); forged: 401", async () => {
    const f = await falCallback(stack.baseUrl);
    assert.equal(f.answered, 200);
    const r = await replicateCallback(stack.baseUrl);
    assert.equal(r.answered, 200);
    const forged = await api(stack.baseUrl, 'POST', `/v2/provider-callbacks/replicate/${JOB_ID}`, {
      headers: { ...r.headers, 'webhook-id': 'msg_forged' },
      rawBody: r.body,
    });
    assert.equal(forged.status, 401);
    assert.equal(forged.body.error.code, 'invalid_signature');
    const none = await api(stack.baseUrl, 'POST', `/v2/provider-callbacks/vertex/${JOB_ID}`, { json: {} });
    assert.equal(none.status, 404);
  });
  test("the soak's callback abuse actor gets the answers it expects (415 for gzip bombs, 401 for unsigned floods, 200 for replays)", async () => {
    const requests = new RequestLog();
    const findings: CallbackAbuseFindings = { byKind: new RequestLog(), sent: 0, unexpected: [] };
    const abuser = new CallbackAbuse(new Client([stack.baseUrl], requests), new Rng(7), { fal, replicate }, () => [JOB_ID], findings);
    for (let i = 0; i < 12; i++) await abuser.step();
    assert.deepEqual(findings.unexpected, []);
    const rows = new Map(findings.byKind.rows().map((r) => [r.route, r]));
    assert.deepEqual([...rows.keys()].sort(), ['gzip bomb', 'replay', 'unsigned flood']);
    assert.ok(findings.sent > 12);
  });
});

describe('a fal job and its callbacks: only its own requests count, a delivery counts once, a nudge keeps the pacing', () => {
  let stack: Stack;
  before(async () => {
    // Polls every 3 s at first: within a few seconds, any other poll is a nudged one.
    stack = await startStack({ env: { ...fal.env(), FAL_USER_ID, VIDEO_POLL_INTERVAL_MS: '3000', VIDEO_POLL_MAX_INTERVAL_MS: '3000' } });
  });
  after(async () => {
    await stack?.stop();
  });

  /** A fal job that stays in fal's queue, once its operation is recorded; the body of its request's callback. */
  async function queuedFalJob() {
    fal.defaultPlan = { queue_polls: 100_000 };
    const c = await newCustomer(stack, 10);
    const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'a lighthouse', model: 'veo-3.1-fast-generate-001', durationSeconds: 4 },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const id: string = created.body.id;
    for (let i = 0; !(await readVideoJob(stack.db, id))?.operation_id; i++) {
      assert.ok(i < 400, 'the job never recorded its operation');
      await sleep(25);
    }
    const request_id = [...fal.submitted.keys()][0]!;
    return { c, id, request_id, body: fal.callbackBody(request_id) };
  }

  test('another request id or another fal account: 401; a replayed delivery polls nothing more; after a 429 with Retry-After no callback brings the next poll forward', async () => {
    const { c, id, request_id, body } = await queuedFalJob();
    const path = `/v2/provider-callbacks/fal/${id}`;
    const post = (headers: Record<string, string>) => api(stack.baseUrl, 'POST', path, { headers, rawBody: body });
    const polls = () => fal.requestsTo('status').length;
    const deliveries = async () =>
      (await stack.db.query<{ n: number }>('SELECT cardinality(callback_deliveries) AS n FROM video_job_polls WHERE job_id = $1', [id]))
        .rows[0]?.n;

    // fal signs every account's callbacks alike: a genuine delivery for a request that is not this job's changes nothing.
    const foreign = await post(fal.signCallback(randomUUID(), body));
    assert.equal(foreign.status, 401);
    assert.equal(foreign.body.error.code, 'invalid_signature');
    assert.equal((await post(fal.signCallback(request_id, body, { user_id: 'another-fal-user' }))).status, 401);
    assert.equal(await deliveries(), 0);

    // One genuine delivery, replayed 30 times over 3 s: one nudge; at most the nudged poll and the paced one.
    const genuine = fal.signCallback(request_id, body);
    const before = polls();
    for (let i = 0; i < 30; i++) {
      assert.equal((await post(genuine)).status, 200);
      await sleep(100);
    }
    const polled = polls() - before;
    assert.ok(polled <= 3, `${polled} status polls during the replays`);
    assert.equal(await deliveries(), 1, 'the delivery is kept once');

    // fal answers a poll 429 with Retry-After: 8; fresh deliveries during that wait poll nothing.
    fal.fault({ route: 'status', status: 429, headers: { 'retry-after': '8' }, body: { detail: 'rate limited' } });
    const atFault = polls();
    for (let i = 0; polls() === atFault; i++) {
      assert.ok(i < 400, 'never polled');
      await sleep(25);
    }
    const refused = polls();
    const refusedAt = Date.now();
    for (let k = 1; Date.now() - refusedAt < 6_000; k++) {
      assert.equal((await post(fal.signCallback(request_id, body, { timestamp_s: Math.floor(Date.now() / 1000) - k }))).status, 200);
      await sleep(300);
    }
    assert.equal(polls(), refused, 'no poll within the Retry-After');
    assert.ok((await deliveries())! > 5);
    for (let i = 0; polls() === refused; i++) {
      assert.ok(i < 400, 'not polled again after the Retry-After');
      await sleep(25);
    }
    assert.ok(Date.now() - refusedAt >= 7_500, `polled again ${Date.now() - refusedAt} ms after the 429`);

    const cancelled = await api(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
    assert.ok([200, 202].includes(cancelled.status), JSON.stringify(cancelled.body));
    await waitForJob(stack, c.key, id);
    await assertAuditHolds(stack);
  });

  test('a callback arriving while a poll is in progress is not undone by that poll: the next poll comes a second after it started, not a poll interval after it ended', async () => {
    const { c, id, request_id, body } = await queuedFalJob();
    const polls = () => fal.requestsTo('status').length;
    // The next poll takes 600 ms (still in the queue); the callback arrives 200 ms into it.
    fal.fault({ route: 'status', delay_ms: 600, body: { status: 'IN_QUEUE', queue_position: 5 } });
    const before = polls();
    for (let i = 0; polls() === before; i++) {
      assert.ok(i < 400, 'never polled');
      await sleep(10);
    }
    const startedAt = Date.now();
    await sleep(200);
    assert.equal(
      (await api(stack.baseUrl, 'POST', `/v2/provider-callbacks/fal/${id}`, { headers: fal.signCallback(request_id, body), rawBody: body }))
        .status,
      200,
    );
    for (let i = 0; polls() === before + 1; i++) {
      assert.ok(i < 800, 'not polled again');
      await sleep(10);
    }
    const after_ms = Date.now() - startedAt;
    // The poll interval is 3 s: polled again after it, the callback would have been lost to the slow poll.
    assert.ok(after_ms >= 900 && after_ms < 2_500, `polled again ${after_ms} ms after the slow poll started`);

    const cancelled = await api(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
    assert.ok([200, 202].includes(cancelled.status), JSON.stringify(cancelled.body));
    await waitForJob(stack, c.key, id);
    await assertAuditHolds(stack);
  });
});
