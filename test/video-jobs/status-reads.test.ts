// Status reads: a job is read from its record, which the workflow's activities write before the
// workflow's own state changes, so a GET is never staler than a query of the workflow, and costs no
// workflow task. Conditional reads (ETag, If-None-Match) on /v2 and /v1, and the list of pending jobs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ADMIN_TOKEN, assertAuditHolds, http, newCustomer, simJob, startStack, type Stack } from '../helpers/stack.js';
import { jobStateQuery, videoJobWorkflowId, type VideoJobState } from '../../workflows/messages.js';
import express from 'express';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { jobReadGate, jobReadsInFlightMax } from '../../src/http/read-gate.js';
import { errorHandler } from '../../src/http/errors.js';
import { requireApiKey } from '../../src/http/auth.js';
import type { Db } from '../../src/db/pool.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

const jobPath = (id: string) => `/v2/videos/generations/${id}`;
const query = (id: string): Promise<VideoJobState> => stack.api.temporal.workflow.getHandle(videoJobWorkflowId(id)).query(jobStateQuery);

/** How far a job has got, as a query or a GET shows it: accepted, submitted (a backend took it), settled. */
function progressOf(j: { status: string; backend: string | null }): number {
  if (j.status === 'succeeded' || j.status === 'failed') return 2;
  return j.backend === null ? 0 : 1;
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeout_ms = 20_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('status reads', () => {
  test('a GET right after each query of the workflow is never staler than the query, and a settled job reads settled at once', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ delay_ms: 400, videos: 1 }, { n: 2 }),
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const id = created.body.id as string;
    let compared = 0;
    for (const deadline = Date.now() + 30_000; ;) {
      assert.ok(Date.now() < deadline, 'the job settles within 30 s');
      const live = await query(id);
      const read = await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key });
      assert.equal(read.status, 200);
      compared++;
      assert.ok(progressOf(read.body) >= progressOf(live), `GET ${JSON.stringify(read.body)} is behind the query ${JSON.stringify(live)}`);
      if (live.backend !== null) assert.equal(read.body.backend, live.backend);
      if (live.status === 'succeeded' || live.status === 'failed') {
        // The workflow has settled: the very next GET says exactly what it says.
        assert.equal(read.body.status, live.status);
        assert.equal(Math.round(read.body.cost_in_euro * 1_000_000), live.cost_micro_eur);
        assert.equal(Math.round(read.body.refunded_in_euro * 1_000_000), live.refunded_micro_eur);
        assert.equal(read.body.videos.length, live.videos.length);
        assert.deepEqual(read.body.error, live.error);
        assert.notEqual(read.body.completed, null);
        break;
      }
    }
    assert.ok(compared > 1, 'the job was compared while pending too');
    assert.equal((await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key })).body.status, 'succeeded');
    await assertAuditHolds(stack);
  });

  test('a cancelled job reads cancelled and refunded the moment the cancel answers, as its workflow says', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 600_000 }) });
    assert.equal(created.status, 202);
    const id = created.body.id as string;
    const cancelled = await http(stack.baseUrl, 'POST', `${jobPath(id)}/cancel`, { token: c.key });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    const read = await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key });
    assert.equal(read.status, 200);
    // The cancel's answer is the workflow's settled state (the update's result); the GET reads the record.
    for (const field of ['status', 'error', 'cost_in_euro', 'refunded_in_euro', 'videos', 'backend'] as const) {
      assert.deepEqual(read.body[field], cancelled.body[field], field);
    }
    assert.equal(read.body.error.code, 'cancelled');
    const inspected = await http(stack.baseUrl, 'GET', `/admin/v1/video-jobs/${id}`, { token: ADMIN_TOKEN });
    assert.equal(inspected.status, 200, JSON.stringify(inspected.body));
    assert.equal(inspected.body.workflow.status, 'failed');
    assert.deepEqual(inspected.body.workflow.state.error, inspected.body.record.error);
    assert.equal(inspected.body.workflow.state.refunded_in_euro, inspected.body.record.refunded_in_euro);
    await assertAuditHolds(stack);
  });

  test('ETag and If-None-Match on /v2 and /v1 job reads and on the list: 304 while nothing changed, a new tag when anything does', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 600_000 }) });
    assert.equal(created.status, 202);
    const id = created.body.id as string;
    await waitUntil('the submission', async () => (await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key })).body.backend !== null);

    for (const path of [jobPath(id), `/v1/videos/${id}`, '/v2/videos/generations?status=pending', '/v1/videos']) {
      const first = await http(stack.baseUrl, 'GET', path, { token: c.key });
      assert.equal(first.status, 200, path);
      const etag = first.headers.get('etag');
      assert.match(etag ?? '', /^"[A-Za-z0-9_-]{32}"$/, `${path}: a strong tag`);
      assert.equal(first.headers.get('cache-control'), 'private, no-cache', path);
      const again = await http(stack.baseUrl, 'GET', path, { token: c.key });
      assert.equal(again.headers.get('etag'), etag, `${path}: the same answer, the same tag`);
      for (const inm of [etag!, `W/${etag}`, `"other", ${etag}`, '*']) {
        const notModified = await http(stack.baseUrl, 'GET', path, { token: c.key, headers: { 'if-none-match': inm } });
        assert.equal(notModified.status, 304, `${path} If-None-Match: ${inm}`);
        assert.equal(notModified.body, '');
        assert.equal(notModified.headers.get('etag'), etag);
      }
      const other = await http(stack.baseUrl, 'GET', path, { token: c.key, headers: { 'if-none-match': '"something-else"' } });
      assert.equal(other.status, 200, path);
      assert.equal(other.headers.get('content-type'), 'application/json; charset=utf-8', path);
      // HEAD: the GET's headers, its length and tag included, and no body.
      const head = await fetch(`${stack.baseUrl}${path}`, { method: 'HEAD', headers: { authorization: `Bearer ${c.key}` } });
      assert.equal(head.status, 200, `HEAD ${path}`);
      assert.equal(head.headers.get('etag'), etag, `HEAD ${path}`);
      assert.equal(head.headers.get('content-length'), String(Buffer.byteLength(JSON.stringify(first.body))), `HEAD ${path}`);
      assert.equal(await head.text(), '', `HEAD ${path}`);
    }

    // Anything in the answer changes: the provider's progress moves.
    const before = await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key });
    const beforeV1 = await http(stack.baseUrl, 'GET', `/v1/videos/${id}`, { token: c.key });
    await stack.db.query('UPDATE video_jobs SET progress = 37 WHERE id = $1', [id]);
    const moved = await http(stack.baseUrl, 'GET', jobPath(id), {
      token: c.key,
      headers: { 'if-none-match': before.headers.get('etag')! },
    });
    assert.equal(moved.status, 200);
    assert.equal(moved.body.progress, 37);
    assert.notEqual(moved.headers.get('etag'), before.headers.get('etag'));
    const movedV1 = await http(stack.baseUrl, 'GET', `/v1/videos/${id}`, {
      token: c.key,
      headers: { 'if-none-match': beforeV1.headers.get('etag')! },
    });
    assert.equal(movedV1.status, 200);
    assert.equal(movedV1.body.progress, 37);

    // The job settles: the tag of the pending job no longer matches.
    const cancelled = await http(stack.baseUrl, 'POST', `${jobPath(id)}/cancel`, { token: c.key });
    assert.equal(cancelled.status, 200);
    const settled = await http(stack.baseUrl, 'GET', jobPath(id), {
      token: c.key,
      headers: { 'if-none-match': moved.headers.get('etag')! },
    });
    assert.equal(settled.status, 200);
    assert.equal(settled.body.status, 'failed');
    // Another workspace's job is a 404 whatever the tag.
    const stranger = await newCustomer(stack, 1);
    const foreign = await http(stack.baseUrl, 'GET', jobPath(id), { token: stranger.key, headers: { 'if-none-match': '*' } });
    assert.equal(foreign.status, 404);
    await assertAuditHolds(stack);
  });

  test("a succeeded job's answer, signed URLs included, is the same from one second to the next: same ETag, and a 304", async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) });
    assert.equal(created.status, 202);
    const id = created.body.id as string;
    await waitUntil(
      'the job to succeed',
      async () => (await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key })).body.status === 'succeeded',
    );
    // Not across the turn of a step of the URLs' validity (an hour): the URLs are then re-signed, on purpose.
    while (3600 - ((Date.now() / 1000) % 3600) < 5) await new Promise((r) => setTimeout(r, 500));
    for (const path of [jobPath(id), `/v1/videos/${id}`]) {
      const first = await http(stack.baseUrl, 'GET', path, { token: c.key });
      await new Promise((r) => setTimeout(r, 2_100));
      const second = await http(stack.baseUrl, 'GET', path, { token: c.key });
      assert.equal(second.headers.get('etag'), first.headers.get('etag'), path);
      assert.deepEqual(second.body, first.body, path);
      const again = await http(stack.baseUrl, 'GET', path, { token: c.key, headers: { 'if-none-match': first.headers.get('etag')! } });
      assert.equal(again.status, 304, path);
    }
    const v = (await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key })).body.videos[0];
    assert.ok(v.expires_at >= Date.now() / 1000 + stack.config.signedUrlTtlS - 5, 'valid at least SIGNED_URL_TTL_S from now');
    assert.equal((await fetch(v.url)).status, 200);
  });

  test('an If-None-Match longer than the document allows is a 400 naming it', async () => {
    const c = await newCustomer(stack, 10);
    for (const path of ['/v2/videos/generations', '/v1/videos']) {
      const r = await http(stack.baseUrl, 'GET', path, { token: c.key, headers: { 'if-none-match': `"${'a'.repeat(2_100)}"` } });
      assert.equal(r.status, 400, path);
      assert.equal(r.body.error.param, 'If-None-Match', path);
      const ok = await http(stack.baseUrl, 'GET', path, { token: c.key, headers: { 'if-none-match': `"${'a'.repeat(2_000)}"` } });
      assert.equal(ok.status, 200, path);
    }
  });

  test("the gate's permits are the pool's connections less the two left to writes and the worker, never fewer than one", () => {
    assert.equal(jobReadsInFlightMax(10), 8);
    assert.equal(jobReadsInFlightMax(40), 38);
    assert.equal(jobReadsInFlightMax(3), 1);
    assert.equal(jobReadsInFlightMax(1), 1);
  });

  test('job reads pass a gate: beyond its permits they wait their turn without holding anything, beyond its queue they are a 503', async () => {
    // A gate of 2 permits and 1 waiting place in front of a read that holds until released; a write beside it.
    const releases: (() => void)[] = [];
    let running = 0;
    const app = express();
    app.get('/read', jobReadGate({ permits: 2, waiting_max: 1 }).reads, async (_req, res) => {
      running++;
      await new Promise<void>((r) => releases.push(r));
      running--;
      res.json({ ok: true });
    });
    app.post('/write', (_req, res) => {
      res.json({ running });
    });
    app.use(errorHandler(pino({ level: 'silent' })));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const reads = [fetch(`${base}/read`), fetch(`${base}/read`), fetch(`${base}/read`)];
      await waitUntil('two reads admitted', async () => running === 2);
      // The third waits for a permit; a fourth finds the waiting place taken.
      const refused = await fetch(`${base}/read`);
      assert.equal(refused.status, 503);
      assert.equal((await refused.json()).error.code, 'server_busy');
      assert.ok(refused.headers.get('retry-after'));
      // What is not a read is not held back by them.
      assert.deepEqual(await (await fetch(`${base}/write`, { method: 'POST' })).json(), { running: 2 });
      releases.shift()!();
      await waitUntil('the waiting read admitted', async () => running === 2 && releases.length === 2);
      for (const release of releases.splice(0)) release();
      for (const r of await Promise.all(reads)) assert.equal(r.status, 200);
    } finally {
      server.close();
    }
  });

  test('job reads are paced while a write is in flight: a free permit waits out the spacing, and the write ending lifts it', async () => {
    // Two permits in either case, so only the pacing (here a minute, far beyond the test) holds read 2 back.
    const gate = jobReadGate({ permits: 2, permits_under_writes: 2, spacing_under_writes_ms: 60_000 });
    const releases = new Map<string, () => void>();
    const app = express();
    app.use(gate.writes);
    app.get('/read', gate.reads, async (req, res) => {
      await new Promise<void>((r) => releases.set(`read ${String(req.query['n'])}`, r));
      res.json({ ok: true });
    });
    app.post('/write', async (_req, res) => {
      await new Promise<void>((r) => releases.set('write', r));
      res.json({ ok: true });
    });
    app.use(errorHandler(pino({ level: 'silent' })));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const write = fetch(`${base}/write`, { method: 'POST' });
      await waitUntil('the write started', async () => releases.has('write'));
      const r1 = fetch(`${base}/read?n=1`);
      await waitUntil('read 1 admitted', async () => releases.has('read 1'));
      const r2 = fetch(`${base}/read?n=2`);
      await waitUntil('read 2 waiting', async () => gate.state().reads_waiting === 1);
      assert.deepEqual(gate.state(), { writes_in_flight: 1, reads_in_flight: 1, reads_waiting: 1 });
      releases.get('write')!();
      assert.equal((await write).status, 200);
      await waitUntil('read 2 admitted once the write ended', async () => releases.has('read 2'));
      releases.get('read 1')!();
      releases.get('read 2')!();
      for (const r of await Promise.all([r1, r2])) assert.equal(r.status, 200);
    } finally {
      server.close();
    }
  });

  test('job reads yield to writes: while a write is in flight one read runs at a time and the queued reads wait; when it ends the gate opens again', async () => {
    // A gate of 2 permits (1 while a write is in flight) in front of reads that hold until released, and
    // a write that holds until released. Each admission is logged with the reads then running.
    const gate = jobReadGate({ permits: 2, permits_under_writes: 1 });
    const log: string[] = [];
    const releases = new Map<string, () => void>();
    // Reads whose answer the server has closed (after the gate took back their permit: it listens first).
    const closed = new Set<string>();
    let running = 0;
    const app = express();
    app.use(gate.writes);
    app.get('/read', gate.reads, async (req, res) => {
      running++;
      log.push(`read ${String(req.query['n'])} (${running} running)`);
      res.once('close', () => closed.add(`read ${String(req.query['n'])}`));
      await new Promise<void>((r) => releases.set(`read ${String(req.query['n'])}`, r));
      running--;
      res.json({ ok: true });
    });
    app.post('/write', async (_req, res) => {
      log.push(`write (${running} reads running)`);
      await new Promise<void>((r) => releases.set('write', r));
      log.push('write ends');
      res.json({ ok: true });
    });
    app.use(errorHandler(pino({ level: 'silent' })));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const read = (n: number) => fetch(`${base}/read?n=${n}`);
    const release = (what: string) => {
      const r = releases.get(what)!;
      releases.delete(what);
      r();
    };
    try {
      const r1 = read(1);
      const r2 = read(2);
      await waitUntil('reads 1 and 2 admitted', async () => releases.size === 2);
      const r3 = read(3);
      await waitUntil('read 3 waiting', async () => gate.state().reads_waiting === 1);
      // The write is not held back by the reads, nor by read 3 waiting.
      const write = fetch(`${base}/write`, { method: 'POST' });
      await waitUntil('the write started', async () => releases.has('write'));
      // Read 1 ends: under the write the gate holds one read, and read 2 still runs, so read 3 waits.
      release('read 1');
      assert.equal((await r1).status, 200);
      await waitUntil('read 1 closed', async () => closed.has('read 1'));
      assert.deepEqual(gate.state(), { writes_in_flight: 1, reads_in_flight: 1, reads_waiting: 1 });
      // Read 2 ends: read 3 runs, alone; read 4 waits.
      release('read 2');
      assert.equal((await r2).status, 200);
      await waitUntil('read 3 admitted', async () => releases.has('read 3'));
      const r4 = read(4);
      await waitUntil('read 4 waiting', async () => gate.state().reads_waiting === 1);
      // The write ends: the gate opens to 2 and read 4 joins read 3.
      release('write');
      assert.equal((await write).status, 200);
      await waitUntil('read 4 admitted', async () => releases.has('read 4'));
      release('read 3');
      release('read 4');
      for (const r of await Promise.all([r3, r4])) assert.equal(r.status, 200);
      assert.deepEqual(log, [
        'read 1 (1 running)',
        'read 2 (2 running)',
        'write (2 reads running)',
        'read 3 (1 running)',
        'write ends',
        'read 4 (2 running)',
      ]);
      assert.deepEqual(gate.state(), { writes_in_flight: 0, reads_in_flight: 0, reads_waiting: 0 });
    } finally {
      server.close();
    }
  });

  test("each API key holds a bounded share of the gate's waiting places: beyond it its reads are a 429, another key's still queue", async () => {
    const gate = jobReadGate({ permits: 1, waiting_max: 10, waiting_per_key_max: 2 });
    const releases: (() => void)[] = [];
    const app = express();
    app.get(
      '/read',
      (req, res, next) => {
        res.locals['principal'] = { key_id: String(req.query['key']) };
        next();
      },
      gate.reads,
      async (_req, res) => {
        await new Promise<void>((r) => releases.push(r));
        res.json({ ok: true });
      },
    );
    app.use(errorHandler(pino({ level: 'silent' })));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const held = [fetch(`${base}/read?key=a`)];
      await waitUntil('the first read admitted', async () => releases.length === 1);
      held.push(fetch(`${base}/read?key=a`), fetch(`${base}/read?key=a`));
      await waitUntil('two reads of key a waiting', async () => gate.state().reads_waiting === 2);
      const over = await fetch(`${base}/read?key=a`);
      assert.equal(over.status, 429);
      assert.equal((await over.json()).error.type, 'rate_limit_error');
      held.push(fetch(`${base}/read?key=b`));
      await waitUntil('key b still queues', async () => gate.state().reads_waiting === 3);
      while (held.length > releases.length + gate.state().reads_waiting) await new Promise((r) => setTimeout(r, 10));
      for (let done = 0; done < 4; done++) {
        await waitUntil('a read admitted', async () => releases.length > 0);
        releases.shift()!();
      }
      for (const r of await Promise.all(held)) assert.equal(r.status, 200);
    } finally {
      server.close();
    }
  });

  test('reads without a valid key are refused before the gate: while every permit is held, they answer 401 at once', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) });
    assert.equal(created.status, 202);
    // Every job read of the API waits in PostgreSQL until released: the gate's permits are all held.
    const held: (() => void)[] = [];
    const query = stack.db.query.bind(stack.db);
    (stack.db as { query: unknown }).query = async (config: unknown, ...rest: unknown[]) => {
      const name = (config as { name?: string } | null)?.name ?? '';
      if (name.startsWith('video-job-read')) await new Promise<void>((r) => held.push(r));
      return (query as (...a: unknown[]) => unknown)(config, ...rest);
    };
    const permits = jobReadsInFlightMax(stack.config.databasePoolMax);
    const reads = Array.from({ length: permits + 3 }, () => http(stack.baseUrl, 'GET', jobPath(created.body.id), { token: c.key }));
    try {
      await waitUntil('every permit held', async () => held.length === permits);
      const started = performance.now();
      for (const token of [undefined, 'vva_sk_not-a-key']) {
        const refused = await http(stack.baseUrl, 'GET', jobPath(created.body.id), token === undefined ? {} : { token });
        assert.equal(refused.status, 401);
        const list = await http(stack.baseUrl, 'GET', '/v2/videos/generations', token === undefined ? {} : { token });
        assert.equal(list.status, 401);
      }
      assert.ok(performance.now() - started < 2_000, 'not queued behind the held reads');
    } finally {
      (stack.db as { query: unknown }).query = query;
      while (
        held.length > 0 ||
        (await Promise.race([Promise.all(reads).then(() => true), new Promise((r) => setTimeout(() => r(false), 50))])) === false
      )
        held.shift()?.();
    }
    for (const r of await Promise.all(reads)) assert.equal(r.status, 200);
  });

  test('failed key lookups are limited per client address, checked before the lookup', async () => {
    let lookups = 0;
    const db = { query: async () => (lookups++, { rows: [] }) } as unknown as Db;
    const app = express();
    app.get('/x', requireApiKey(db, { failuresPerMinute: 3 }), (_req, res) => res.json({ ok: true }));
    app.use(errorHandler(pino({ level: 'silent' })));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const statuses = [];
      for (let i = 0; i < 5; i++)
        statuses.push((await fetch(`${base}/x`, { headers: { authorization: `Bearer vva_sk_wrong-${i}` } })).status);
      assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
      assert.equal(lookups, 3);
      // No key at all costs no lookup and is no failure of a lookup.
      assert.equal((await fetch(`${base}/x`)).status, 401);
      assert.equal(lookups, 3);
    } finally {
      server.close();
    }
  });

  // Last: it stops this stack's worker.
  test("a status read is one query, its job's, once its key is known (a key is looked up once per few seconds); the key's refusals and another workspace's 404 are as before", async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 600_000 }) });
    assert.equal(created.status, 202);
    const id = created.body.id as string;
    // The statements that look a key or a job up, by name, while one read runs (the worker's own, on the
    // same pool, have other names).
    const lookups = new Set(['api-key-principal', 'video-job-read', 'video-job-read-with-key']);
    // A key of its own, not yet used: its first read looks it up, the next ones only read the job.
    const reader = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
    const seen: string[] = [];
    const query = stack.db.query.bind(stack.db);
    (stack.db as { query: unknown }).query = (config: unknown, ...rest: unknown[]) => {
      const name = (config as { name?: string } | null)?.name;
      if (name && lookups.has(name)) seen.push(name);
      return (query as (...a: unknown[]) => unknown)(config, ...rest);
    };
    try {
      const first = await http(stack.baseUrl, 'GET', jobPath(id), { token: reader.body.key });
      assert.equal(first.status, 200);
      assert.deepEqual(seen, ['api-key-principal', 'video-job-read'], 'a key not seen lately is looked up first');
      for (const path of [jobPath(id), `/v1/videos/${id}`]) {
        seen.length = 0;
        const read = await http(stack.baseUrl, 'GET', path, { token: reader.body.key });
        assert.equal(read.status, 200, path);
        assert.equal(read.body.id, id);
        assert.deepEqual(seen, ['video-job-read'], `${path}: one query`);
      }
      // An id that names no job of this workspace: its read; no id at all: nothing read.
      seen.length = 0;
      assert.equal((await http(stack.baseUrl, 'GET', jobPath(randomUUID()), { token: reader.body.key })).status, 404);
      assert.equal((await http(stack.baseUrl, 'GET', '/v1/videos/not-an-id', { token: reader.body.key })).status, 404);
      assert.deepEqual(seen, ['video-job-read']);
    } finally {
      (stack.db as { query: unknown }).query = query;
    }
    const stranger = await newCustomer(stack, 1);
    const foreign = await http(stack.baseUrl, 'GET', jobPath(id), { token: stranger.key });
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error.code, 'job_not_found');
    for (const token of [undefined, 'vva_sk_not-a-key', 'x'.repeat(201)]) {
      const refused = await http(stack.baseUrl, 'GET', jobPath(id), token === undefined ? {} : { token });
      assert.equal(refused.status, 401, String(token));
      assert.equal(refused.body.error.code, 'invalid_api_key');
    }
    // A key revoked a moment ago is refused by the next read.
    const second = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
    assert.equal((await http(stack.baseUrl, 'GET', jobPath(id), { token: second.body.key })).status, 200);
    assert.equal((await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${second.body.id}`, { token: ADMIN_TOKEN })).status, 200);
    assert.equal((await http(stack.baseUrl, 'GET', jobPath(id), { token: second.body.key })).status, 401);
    // A deleted job is a 404 to its own workspace.
    assert.equal((await http(stack.baseUrl, 'POST', `${jobPath(id)}/cancel`, { token: c.key })).status, 200);
    assert.equal((await http(stack.baseUrl, 'DELETE', jobPath(id), { token: c.key })).status, 200);
    const deleted = await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key });
    assert.equal(deleted.status, 404);
    await assertAuditHolds(stack);
  });

  test('a GET and the list of pending jobs never ask the workflow: with no worker running they answer at once', async () => {
    const c = await newCustomer(stack, 10);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 600_000 }) });
      assert.equal(created.status, 202);
      ids.push(created.body.id);
    }
    for (const id of ids) await waitUntil('the submissions', async () => (await query(id)).backend !== null);
    await stack.worker!.shutdown();
    // A query now waits for a worker that never comes.
    for (const id of ids) {
      const t0 = performance.now();
      const read = await http(stack.baseUrl, 'GET', jobPath(id), { token: c.key });
      const elapsed_ms = performance.now() - t0;
      assert.equal(read.status, 200);
      assert.equal(read.body.status, 'pending');
      assert.equal(read.body.backend, 'simulator');
      assert.ok(elapsed_ms < 1_500, `GET took ${elapsed_ms.toFixed(0)} ms`);
      const v1 = await http(stack.baseUrl, 'GET', `/v1/videos/${id}`, { token: c.key });
      assert.equal(v1.body.status, 'in_progress');
    }
    const t0 = performance.now();
    const list = await http(stack.baseUrl, 'GET', '/v2/videos/generations?status=pending&limit=100', { token: c.key });
    assert.ok(performance.now() - t0 < 1_500);
    assert.equal(list.status, 200);
    assert.deepEqual(new Set(list.body.data.map((j: { id: string }) => j.id)), new Set(ids));
    assert.ok(list.body.data.every((j: { status: string; backend: string }) => j.status === 'pending' && j.backend === 'simulator'));
    // The operator's inspection asks the workflow, and says that it did not answer.
    const inspected = await http(stack.baseUrl, 'GET', `/admin/v1/video-jobs/${ids[0]}`, { token: ADMIN_TOKEN });
    assert.equal(inspected.status, 200);
    assert.equal(inspected.body.record.status, 'pending');
    assert.equal(inspected.body.workflow.state, null);
    assert.equal(typeof inspected.body.workflow.failure, 'string');
  });
});
