// Abuse and exhaustion, through the real API, worker, PostgreSQL and Temporal: what a refused create
// leaves behind, an Idempotency-Key retried with other images, large and compressed bodies held by one
// key, nested `parameters`, read rate limits, the per-workspace limit of pending jobs (enforced by the
// charge itself), database errors that are the server's state rather than the request's, and the
// reconciler and the audit past the counts they used to stop at.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import zlib from 'node:zlib';
import { MockActivityEnvironment } from '@temporalio/testing';
import * as messages from '../../workflows/messages.js';
import { PARAMETERS_BYTES_MAX, PARAMETERS_DEPTH_MAX } from '../../src/video-jobs/schemas.js';
import { LARGE_BODIES_PER_KEY_MAX } from '../../src/http/in-flight.js';
import { VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX } from '../../src/video-jobs/routes.js';
import { unreachableDependency } from '../../src/dependency-errors.js';
import { createPool, withClient, type Db } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { auditLedger, type WorkflowState } from '../../src/billing/audit.js';
import { chargeVideoJob, settleVideoJob, type VideoJobCharge } from '../../src/video-jobs/billing.js';
import { createWorkspace } from '../../src/account/workspaces.js';
import { jobIdForIdempotencyKey } from '../../src/video-jobs/service.js';
import { createReconcilerActivities, PENDING_PAGE_SIZE, type ReconcileReport } from '../../activities/reconciler.js';
import { runningVideoJobIds } from '../../src/temporal/workflow-states.js';
import { createLogger } from '../../src/logger.js';
import { startApi, type RunningApi } from '../../src/runtime/api.js';
import { startWorker, type RunningWorker } from '../../src/runtime/worker.js';
import {
  ADMIN_TOKEN,
  assertAuditHolds,
  balanceMicro,
  createTestDatabase,
  http as api,
  infra,
  newCustomer,
  simJob,
  startStack,
  waitForJob,
  type Stack,
} from '../helpers/stack.js';
import { imageField, pngImage, pngOfSize } from '../helpers/images.js';
import fs from 'node:fs';
import path from 'node:path';
import { LocalStorage } from '../../src/storage/local.js';
import { videoOutputKey } from '../../src/storage/retention.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const create = (s: { baseUrl: string }, key: string, json: unknown, headers?: Record<string, string>) =>
  api(s.baseUrl, 'POST', '/v2/videos/generations', { token: key, json, ...(headers ? { headers } : {}) });
const withImage = (seed: number) => ({ ...simJob(), image: imageField(pngImage(64, 36, seed), 'image/png') });

async function inputsOf(db: Db, where: { workspace_id?: string; job_id?: string }): Promise<number> {
  const [col, v] = where.workspace_id ? ['workspace_id', where.workspace_id] : ['job_id', where.job_id];
  const r = await db.query(`SELECT count(*)::int AS n FROM video_job_inputs WHERE ${col} = $1`, [v]);
  return r.rows[0].n;
}

/** A database of its own (migrated), for tests that fill it with jobs nobody runs. */
async function scratchDatabase(settings: Record<`video_api.${string}`, number> = {}): Promise<Db> {
  const db = createPool(await createTestDatabase(), 10, settings);
  await migrate(db);
  return db;
}

/** A charge of `n` = 1 video of sim-video-1 for `cost` micro-euros, as the workflow's charge step makes it. */
function chargeOf(workspaceId: string, cost = 100_000): VideoJobCharge {
  const jobId = randomUUID();
  return {
    jobId,
    attemptId: randomUUID(),
    workflowId: `video-job-${jobId}`,
    workspaceId,
    model: 'sim-video-1',
    prompt: 'p',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
    estimated_cost_micro_eur: cost,
    created_at_ms: Date.now(),
    request_fingerprint: `fp-${jobId}`,
    accept_by_ms: Date.now() + 60_000,
    backend: 'simulator',
    deadline_at_ms: Date.now() + 3_600_000,
  };
}

describe('images of refused creates', () => {
  test('a create its charge would refuse (no credit, the key\'s spend limit, the pending cap) writes nothing: no image, no workflow', async () => {
    // Every row ever written to video_job_inputs, counted by a trigger of this file's database.
    await stack.db.query(`CREATE TABLE IF NOT EXISTS test_input_writes (workspace_id uuid NOT NULL)`);
    await stack.db.query(`CREATE OR REPLACE FUNCTION test_count_input_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO test_input_writes VALUES (NEW.workspace_id); RETURN NEW; END $$`);
    await stack.db.query('DROP TRIGGER IF EXISTS test_count_input_writes ON video_job_inputs');
    await stack.db.query('CREATE TRIGGER test_count_input_writes AFTER INSERT ON video_job_inputs FOR EACH ROW EXECUTE FUNCTION test_count_input_write()');
    const writes = async (workspaceId: string) => (await stack.db.query('SELECT count(*)::int AS n FROM test_input_writes WHERE workspace_id = $1', [workspaceId])).rows[0].n;
    const large = { ...simJob(), image: imageField(pngOfSize(1_750_000), 'image/png'), lastFrame: imageField(pngOfSize(1_750_000), 'image/png') };

    const broke = await newCustomer(stack, 0);
    for (let i = 0; i < 12; i++) {
      const r = await create(stack, broke.key, large, i % 2 ? { 'idempotency-key': `broke-${i}` } : undefined);
      assert.equal(r.status, 402, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'insufficient_credits');
    }
    assert.equal(await writes(broke.workspaceId), 0, 'no image of a refused create was written');
    const refusedJob = jobIdForIdempotencyKey(broke.workspaceId, 'broke-1');
    await assert.rejects(stack.api.temporal.workflow.getHandle(messages.videoJobWorkflowId(refusedJob)).describe(), /not found/i, 'no workflow was started');
    // Refused for good, as the charge refuses a key: after a top-up the same key is still a 402.
    await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${broke.workspaceId}/credits`, { token: ADMIN_TOKEN, json: { amount_in_euro: 5 } });
    assert.equal((await create(stack, broke.key, large, { 'idempotency-key': 'broke-1' })).status, 402);
    assert.equal(await writes(broke.workspaceId), 0);

    const limited = await newCustomer(stack, 5);
    const key = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${limited.workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: { spend_limit_in_euro: 0.01 } });
    const over = await create(stack, key.body.key, large);
    assert.equal(over.status, 402);
    assert.equal(over.body.error.code, 'key_spend_limit_exceeded');
    await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${limited.workspaceId}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: 1 } });
    const pending = await create(stack, limited.key, simJob({ delay_ms: 3_000 }));
    assert.equal(pending.status, 202);
    const capped = await create(stack, limited.key, large);
    assert.equal(capped.status, 429, JSON.stringify(capped.body));
    assert.equal(capped.body.error.code, 'too_many_pending_jobs');
    assert.equal(await writes(limited.workspaceId), 0);
    await waitForJob(stack, limited.key, pending.body.id);
    assert.equal(await balanceMicro(stack, broke.workspaceId), 5_000_000);
    await assertAuditHolds(stack);
  });

  test('images storage cannot keep: 503 storage_unavailable, nothing charged or left; the same key retried is accepted', async () => {
    const c = await newCustomer(stack, 5);
    const jobId = jobIdForIdempotencyKey(c.workspaceId, 'storage-down');
    // A file where the attempt's folder goes: the write of its images fails.
    const blocker = path.join(stack.env['DATA_DIR']!, 'storage', 'inputs', jobId);
    fs.mkdirSync(path.dirname(blocker), { recursive: true });
    fs.writeFileSync(blocker, '');
    const refused = await create(stack, c.key, withImage(404), { 'idempotency-key': 'storage-down' });
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'storage_unavailable');
    assert.equal(await inputsOf(stack.db, { job_id: jobId }), 0);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    fs.rmSync(blocker);
    const retried = await create(stack, c.key, withImage(404), { 'idempotency-key': 'storage-down' });
    assert.equal(retried.status, 202, JSON.stringify(retried.body));
    await waitForJob(stack, c.key, jobId);
    await assertAuditHolds(stack);
  });

  test("an accepted create's images live in storage, not in the row; deleting the job removes them", async () => {
    const c = await newCustomer(stack, 5);
    const first = pngImage(64, 36, 303);
    const r = await create(stack, c.key, { ...simJob({ delay_ms: 0 }), image: imageField(first, 'image/png') });
    assert.equal(r.status, 202);
    await waitForJob(stack, c.key, r.body.id);
    const row = (await stack.db.query('SELECT image, image_key FROM video_job_inputs WHERE job_id = $1', [r.body.id])).rows[0];
    assert.equal(row.image, null, 'no image bytes in PostgreSQL');
    const file = path.join(stack.env['DATA_DIR']!, 'storage', ...String(row.image_key).split('/'));
    assert.deepEqual(fs.readFileSync(file), first);
    const seen = await stack.db.query('SELECT request FROM simulator.video_operations WHERE request_id = $1', [r.body.id]);
    assert.equal(seen.rows[0].request.image.sha256, sha256(first), 'the provider got the stored image');
    assert.equal((await api(stack.baseUrl, 'DELETE', `/v2/videos/generations/${r.body.id}`, { token: c.key })).status, 200);
    assert.equal(await inputsOf(stack.db, { job_id: r.body.id }), 0);
    assert.equal(fs.existsSync(file), false, 'the image file is gone with the job');
  });

  test('a refused create (402) keeps none of its images: a workspace without credit cannot fill the database', async () => {
    const c = await newCustomer(stack, 0);
    for (let i = 0; i < 5; i++) {
      const r = await create(stack, c.key, withImage(i));
      assert.equal(r.status, 402, JSON.stringify(r.body));
    }
    const keyed = await create(stack, c.key, withImage(9), { 'idempotency-key': 'refused-402' });
    assert.equal(keyed.status, 402);
    assert.equal(await inputsOf(stack.db, { workspace_id: c.workspaceId }), 0, 'no image of a refused create is kept');
    await assertAuditHolds(stack);
  });

  test('an Idempotency-Key retried with other images after an earlier attempt left its own: the provider gets the accepted attempt\'s images', async () => {
    const c = await newCustomer(stack, 10);
    const key = `images-${randomUUID()}`;
    const jobId = jobIdForIdempotencyKey(c.workspaceId, key);
    // What an earlier attempt with this key left before it was refused (a 503, a crash before its answer).
    const earlier = pngImage(64, 36, 101);
    await stack.db.query('INSERT INTO video_job_inputs (job_id, workspace_id, image, image_mime_type) VALUES ($1, $2, $3, $4)', [
      jobId,
      c.workspaceId,
      earlier,
      'image/png',
    ]);
    const mine = pngImage(64, 36, 202);
    const r = await create(stack, c.key, { ...simJob(), image: imageField(mine, 'image/png') }, { 'idempotency-key': key });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal(r.body.id, jobId);
    await waitForJob(stack, c.key, jobId);
    const seen = await stack.db.query('SELECT request FROM simulator.video_operations WHERE request_id = $1', [jobId]);
    assert.equal(seen.rows[0].request.image.sha256, sha256(mine), 'the provider got the images of the request that was charged');
    await assertAuditHolds(stack);
  });

  test("the reconciler's sweep deletes images of attempts that never charged their job, and keeps a job's", async () => {
    const c = await newCustomer(stack, 10);
    const accepted = await create(stack, c.key, withImage(7));
    assert.equal(accepted.status, 202);
    await waitForJob(stack, c.key, accepted.body.id);
    const orphan = randomUUID();
    await stack.db.query(
      `INSERT INTO video_job_inputs (job_id, attempt_id, workspace_id, image, image_mime_type, created_at)
       VALUES ($1, $2, $3, $4, 'image/png', now() - interval '2 hours')`,
      [orphan, randomUUID(), c.workspaceId, pngImage()],
    );
    await stack.db.query("UPDATE video_job_inputs SET created_at = now() - interval '2 hours' WHERE job_id = $1", [accepted.body.id]);
    const activities = createReconcilerActivities({ db: stack.db, logger: createLogger('silent', 'test'), taskQueue: `nowhere-${randomUUID()}`, video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 } });
    const report = (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(activities.reconcileMoney)) as ReconcileReport;
    assert.ok(report.orphan_inputs_deleted >= 1);
    assert.equal(await inputsOf(stack.db, { job_id: orphan }), 0);
    assert.equal(await inputsOf(stack.db, { job_id: accepted.body.id }), 1, "the accepted job's images stay");
  });
});

describe('large and compressed bodies', () => {
  /** A create that declares a large body and sends only its start: it holds a large-body slot. */
  function trickle(key: string): http.ClientRequest {
    const req = http.request(new URL(`${stack.baseUrl}/v2/videos/generations`), {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': String(1024 * 1024) },
    });
    req.on('error', () => {});
    req.write('{"prompt": "p", "image": {"bytesBase64Encoded": "');
    return req;
  }
  /** A JSON body of ~200 KiB (a large image) gzip-compressed to a few KiB. */
  const gzipped = () => zlib.gzipSync(JSON.stringify({ ...simJob(), image: imageField(Buffer.concat([pngImage(), Buffer.alloc(150_000)]), 'image/png') }));

  test('one API key holds at most its share of the large-body slots, trickling or not: other tenants still get theirs', async () => {
    const hog = await newCustomer(stack, 10);
    const held = Array.from({ length: LARGE_BODIES_PER_KEY_MAX }, () => trickle(hog.key));
    try {
      await new Promise((r) => setTimeout(r, 300));
      const more = await create(stack, hog.key, { ...simJob(), image: imageField(Buffer.concat([pngImage(), Buffer.alloc(100_000)]), 'image/png') });
      assert.equal(more.status, 429, JSON.stringify(more.body));
      assert.equal(more.body.error.code, 'too_many_concurrent_uploads');
      assert.ok(Number(more.headers.get('retry-after')) >= 1);
      // A compressed body is a large body, whatever length it declares.
      const compressed = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: hog.key,
        rawBody: gzipped(),
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      });
      assert.equal(compressed.status, 429, JSON.stringify(compressed.body));
      const other = await newCustomer(stack, 10);
      const fine = await create(stack, other.key, { ...simJob(), image: imageField(Buffer.concat([pngImage(), Buffer.alloc(100_000)]), 'image/png') });
      assert.equal(fine.status, 202, JSON.stringify(fine.body));
      await waitForJob(stack, other.key, fine.body.id);
    } finally {
      for (const req of held) req.destroy();
    }
  });

  test('a small gzip body that inflates past the small-body limit takes a large-body slot (busy: 503), never parsed for free', async () => {
    const keys = await Promise.all(Array.from({ length: VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX / LARGE_BODIES_PER_KEY_MAX }, () => newCustomer(stack, 1)));
    const held = keys.flatMap((c) => Array.from({ length: LARGE_BODIES_PER_KEY_MAX }, () => trickle(c.key)));
    try {
      await new Promise((r) => setTimeout(r, 300));
      const c = await newCustomer(stack, 10);
      const body = gzipped();
      assert.ok(body.length < 64 * 1024, 'declared small');
      const r = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: c.key,
        rawBody: body,
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      });
      assert.equal(r.status, 503, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'server_busy');
    } finally {
      for (const req of held) req.destroy();
    }
  });
});

describe('parameters', () => {
  test(`nested parameters beyond the depth bound (${PARAMETERS_DEPTH_MAX}) answer 400 naming parameters, never 500`, async () => {
    const c = await newCustomer(stack, 10);
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 2_000; i++) deep = { a: deep };
    const raw = JSON.stringify({ ...simJob(), parameters: deep });
    assert.ok(raw.length < 64 * 1024);
    for (const parameters of [deep, JSON.parse(`{"x":${'['.repeat(PARAMETERS_DEPTH_MAX)}${']'.repeat(PARAMETERS_DEPTH_MAX)}}`)]) {
      const r = await create(stack, c.key, { ...simJob(), parameters });
      assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300));
      assert.equal(r.body.error.param, 'parameters');
      assert.match(r.body.error.message, /levels deep/);
    }
    let ok: Record<string, unknown> = { v: 1 };
    for (let i = 1; i < PARAMETERS_DEPTH_MAX - 1; i++) ok = { a: ok };
    const fine = await create(stack, c.key, { ...simJob(), parameters: ok });
    assert.equal(fine.status, 202, JSON.stringify(fine.body));
    await waitForJob(stack, c.key, fine.body.id);
    await assertAuditHolds(stack);
  });

  test(`parameters larger than ${PARAMETERS_BYTES_MAX} bytes answer 400 naming parameters`, async () => {
    const c = await newCustomer(stack, 10);
    const r = await create(stack, c.key, { ...simJob(), parameters: { blob: 'x'.repeat(PARAMETERS_BYTES_MAX) } });
    assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300));
    assert.equal(r.body.error.param, 'parameters');
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
  });
});

describe('reads', () => {
  let limited: RunningApi;
  before(async () => {
    // A second API process on the same database and Temporal, with a small read budget.
    limited = await startApi({
      config: { ...stack.config, port: 0, rateLimitReadsPerMinute: 5 },
      db: stack.db,
      temporalAddress: infra().temporalAddress,
      secrets: { adminToken: ADMIN_TOKEN, urlSigningSecret: stack.config.urlSigningSecret!, adminTokenGenerated: false },
      logger: createLogger('silent', 'test'),
    });
  });
  after(async () => {
    await limited.close();
  });

  test('reads are rate limited per key (429 with Retry-After), apart from writes and other keys', async () => {
    const a = await newCustomer(stack, 10);
    const b = await newCustomer(stack, 10);
    const created = await create({ baseUrl: limited.url }, a.key, simJob());
    assert.equal(created.status, 202);
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 7; i++) {
      last = await api(limited.url, 'GET', `/v2/videos/generations/${created.body.id}`, { token: a.key });
      statuses.push(last.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert.equal(last!.body.error.code, 'rate_limited');
    assert.ok(Number(last!.headers.get('retry-after')) >= 1, 'Retry-After');
    const list = await api(limited.url, 'GET', '/v2/videos/generations', { token: a.key });
    assert.equal(list.status, 429, 'every read of the key shares its budget');
    assert.equal((await api(limited.url, 'GET', '/v2/videos/generations', { token: b.key })).status, 200, 'another key is not limited');
    const write = await create({ baseUrl: limited.url }, a.key, simJob());
    assert.equal(write.status, 202, 'writes have their own budget');
    await waitForJob(stack, a.key, created.body.id);
    await waitForJob(stack, a.key, write.body.id);
  });
});

describe('pending jobs per workspace', () => {
  test('the charge refuses a job beyond the workspace limit, charging and recording nothing; exact under concurrency', async () => {
    const db = await scratchDatabase({ 'video_api.max_pending_jobs': 4 });
    try {
      const ws = await createWorkspace(db, { name: 'limits', credits_micro_eur: 10_000_000 });
      // The session's default (the worker's MAX_PENDING_JOBS_PER_WORKSPACE) applies: 4.
      const results = await Promise.all(Array.from({ length: 10 }, () => chargeVideoJob(db, chargeOf(ws.id))));
      assert.equal(results.filter((r) => r.ok).length, 4);
      assert.deepEqual([...new Set(results.filter((r) => !r.ok).map((r) => !r.ok && r.reason))], ['too_many_pending_jobs']);
      const balance = await db.query('SELECT balance_micro_eur FROM workspaces WHERE id = $1', [ws.id]);
      assert.equal(balance.rows[0].balance_micro_eur, 10_000_000 - 4 * 100_000, 'only the accepted jobs are charged');
      assert.equal((await db.query('SELECT count(*)::int AS n FROM video_jobs')).rows[0].n, 4);
      // The workspace's own figure wins over the default; a finished job frees its place.
      await db.query('UPDATE workspaces SET max_pending_jobs = 5 WHERE id = $1', [ws.id]);
      assert.equal((await chargeVideoJob(db, chargeOf(ws.id))).ok, true);
      assert.deepEqual(await chargeVideoJob(db, chargeOf(ws.id)), { ok: false, reason: 'too_many_pending_jobs' });
      await db.query(
        "UPDATE video_jobs SET status = 'failed', cost_micro_eur = 0, refunded_micro_eur = estimated_cost_micro_eur, completed_at = now() WHERE id = (SELECT id FROM video_jobs LIMIT 1)",
      );
      assert.equal((await chargeVideoJob(db, chargeOf(ws.id))).ok, true);
    } finally {
      await db.end();
    }
  });

  test('the admin API sets and shows a workspace limit (null = the default); bad values are 400', async () => {
    const c = await newCustomer(stack, 1);
    const shown = await api(stack.baseUrl, 'GET', `/admin/v1/workspaces/${c.workspaceId}`, { token: ADMIN_TOKEN });
    assert.equal(shown.body.max_pending_jobs, null);
    const set = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: 3 } });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.max_pending_jobs, 3);
    for (const bad of [0, -1, 1.5, 'x']) {
      const r = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: bad } });
      assert.equal(r.status, 400, String(bad));
      assert.equal(r.body.error.param, 'max_pending_jobs');
    }
    const reset = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: null } });
    assert.equal(reset.body.max_pending_jobs, null);
    const missing = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${randomUUID()}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: 3 } });
    assert.equal(missing.status, 404);
  });

  test('a create beyond the workspace limit answers 429 too_many_pending_jobs and charges nothing', async () => {
    const c = await newCustomer(stack, 10);
    await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: 1 } });
    const first = await create(stack, c.key, simJob({ delay_ms: 3_000 }));
    assert.equal(first.status, 202, JSON.stringify(first.body));
    const before = await balanceMicro(stack, c.workspaceId);
    const second = await create(stack, c.key, withImage(3), { 'idempotency-key': `pending-${randomUUID()}` });
    assert.equal(second.status, 429, JSON.stringify(second.body));
    assert.equal(second.body.error.code, 'too_many_pending_jobs');
    assert.equal(await balanceMicro(stack, c.workspaceId), before, 'nothing charged');
    assert.equal(await inputsOf(stack.db, { workspace_id: c.workspaceId }), 0, 'nothing kept');
    await waitForJob(stack, c.key, first.body.id);
    await assertAuditHolds(stack);
  });
});

describe('database errors that are the server\'s state', () => {
  test('statement timeout, lock timeout and read-only errors (57014, 55P03, 25006) are a dependency unavailable (503), not a 500', async () => {
    const codes: Record<string, string> = {};
    const collect = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
        assert.fail('expected an error');
      } catch (err) {
        const code = (err as { code?: string }).code!;
        codes[code] = unreachableDependency(err) ?? 'none';
      }
    };
    await withClient(stack.db, async (c) => {
      await c.query("SET statement_timeout = '20ms'");
      await collect(() => c.query('SELECT pg_sleep(1)'));
      await c.query('RESET statement_timeout');
      await c.query('BEGIN READ ONLY');
      await collect(() => c.query('CREATE TEMP TABLE x (y int)'));
      await c.query('ROLLBACK');
    });
    await withClient(stack.db, async (holder) => {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM workspaces FOR UPDATE');
      await withClient(stack.db, async (c) => {
        await c.query("SET lock_timeout = '20ms'");
        await collect(() => c.query('SELECT 1 FROM workspaces FOR UPDATE'));
        await c.query('RESET lock_timeout');
      });
      await holder.query('ROLLBACK');
    });
    assert.deepEqual(codes, { '57014': 'postgres', '25006': 'postgres', '55P03': 'postgres' });
  });
});

describe('storage retention', () => {
  const reconcile = async () => {
    const activities = createReconcilerActivities({
      db: stack.db,
      logger: createLogger('silent', 'test'),
      taskQueue: `nowhere-${randomUUID()}`,
      video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
      storage: new LocalStorage(path.join(stack.config.dataDir, 'storage')),
      retention: { speech_audio_ms: stack.config.speechAudioRetentionMs },
    });
    return (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(activities.reconcileMoney)) as ReconcileReport;
  };
  const storage = () => new LocalStorage(path.join(stack.config.dataDir, 'storage'));

  test("a copy that finishes after its job was settled without it (a cancel's clean-up ran first) leaves no file behind", async () => {
    const c = await newCustomer(stack, 10);
    const created = await create(stack, c.key, simJob({ videos: 1 }));
    assert.equal(created.status, 202);
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.videos.length, 1);
    // The late copy of the video the job does not list, and of a cancelled job's video.
    await storage().put(videoOutputKey(created.body.id, 1), Buffer.from('late copy'));
    const cancelled = await create(stack, c.key, simJob({ delay_ms: 10_000 }));
    const cancel = await api(stack.baseUrl, 'POST', `/v2/videos/generations/${cancelled.body.id}/cancel`, { token: c.key });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    await storage().put(videoOutputKey(cancelled.body.id, 0), Buffer.from('late copy'));
    await stack.db.query("UPDATE video_jobs SET completed_at = now() - interval '1 hour' WHERE id = ANY($1::uuid[])", [[created.body.id, cancelled.body.id]]);
    const report = await reconcile();
    assert.ok(report.orphan_files_deleted >= 2, JSON.stringify(report));
    assert.equal(await storage().open(videoOutputKey(created.body.id, 1)), null);
    assert.equal(await storage().open(videoOutputKey(cancelled.body.id, 0)), null);
    const kept = await storage().open(videoOutputKey(created.body.id, 0));
    assert.ok(kept, 'the delivered video stays');
    kept.stream.destroy();
    await assertAuditHolds(stack);
  });

  test('speech audio is kept for replays only for SPEECH_AUDIO_RETENTION_MS; a replay after that answers 410', async () => {
    const c = await newCustomer(stack, 1);
    const headers = { 'idempotency-key': `speech-${randomUUID()}` };
    const first = await api(stack.baseUrl, 'POST', '/v2/audio/speech', { token: c.key, json: { input: 'hello there', voice: 'sim-narrator' }, headers });
    assert.equal(first.status, 200);
    const replay = await api(stack.baseUrl, 'POST', '/v2/audio/speech', { token: c.key, json: { input: 'hello there', voice: 'sim-narrator' }, headers });
    assert.equal(replay.status, 200);
    const row = await stack.db.query('SELECT id, audio_storage_key FROM speech_requests WHERE workspace_id = $1', [c.workspaceId]);
    const key = row.rows[0].audio_storage_key as string;
    assert.ok(key);
    await stack.db.query("UPDATE speech_requests SET created_at = now() - interval '2 days' WHERE id = $1", [row.rows[0].id]);
    const report = await reconcile();
    assert.ok(report.speech_audio_expired >= 1, JSON.stringify(report));
    assert.equal(await storage().open(key), null, 'the audio is deleted');
    const late = await api(stack.baseUrl, 'POST', '/v2/audio/speech', { token: c.key, json: { input: 'hello there', voice: 'sim-narrator' }, headers });
    assert.equal(late.status, 410, JSON.stringify(late.body));
    assert.equal(late.body.error.code, 'speech_no_longer_available');
    await assertAuditHolds(stack);
  });
});

describe('no network call under the workspace lock', () => {
  test("settlement signs the webhook event's download URLs before it locks the workspace: a slow signer holds no workspace lock", async () => {
    const db = await scratchDatabase();
    try {
      const ws = await createWorkspace(db, { name: 'settle', credits_micro_eur: 1_000_000 });
      const charge = chargeOf(ws.id);
      assert.equal((await chargeVideoJob(db, charge)).ok, true);
      await db.query(
        "INSERT INTO webhook_endpoints (id, workspace_id, url, events, secret) VALUES (gen_random_uuid(), $1, 'https://hooks.example.com/x', ARRAY['video.generation.succeeded'], 'whsec_test')",
        [ws.id],
      );
      // A signer that takes as long as the test says (an S3 credential refresh, say).
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let signing = false;
      const downloadUrls = {
        async downloadUrl(key: string) {
          signing = true;
          await gate;
          return { url: `https://files.example.com/${key}`, expires_at: 2_000_000_000 };
        },
      };
      const settling = settleVideoJob(
        db,
        { jobId: charge.jobId, outcome: 'succeeded', delivered: 1, videos: [{ storage_key: 'videos/x/0.mp4', content_type: 'video/mp4', bytes: 10 }], error: null, completed_at_ms: Date.now() },
        { downloadUrls, baseUrl: 'https://api.example.com' },
      );
      for (let i = 0; !signing; i++) {
        assert.ok(i < 100, 'the signer was called');
        await new Promise((r) => setTimeout(r, 20));
      }
      // While a URL is being signed, the workspace row is free: another charge or top-up is not kept waiting.
      try {
        await withClient(db, async (c) => {
          await c.query('BEGIN');
          try {
            await c.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE NOWAIT', [ws.id]);
          } finally {
            await c.query('ROLLBACK');
          }
        });
      } finally {
        release();
      }
      const settled = await settling;
      assert.equal(settled.status, 'succeeded');
      const event = await db.query('SELECT payload FROM webhook_events WHERE video_job_id = $1', [charge.jobId]);
      const data = JSON.parse(event.rows[0].payload).data;
      assert.equal(data.status, 'succeeded');
      assert.equal(data.videos[0].url, 'https://files.example.com/videos/x/0.mp4');
      assert.equal((await db.query('SELECT count(*)::int AS n FROM webhook_deliveries')).rows[0].n, 1);
      assert.equal((await auditLedger(db)).ok, true);
    } finally {
      await db.end();
    }
  });
});

describe('the reconciler and the audit see every pending job', () => {
  test(`the reconciler pages through every pending job (more than ${PENDING_PAGE_SIZE}) in one run, and recovery runs carry the job's search attributes`, async () => {
    const db = await scratchDatabase({ 'video_api.max_pending_jobs': 100_000 });
    try {
      const ws = await createWorkspace(db, { name: 'many', credits_micro_eur: 1_000_000_000 });
      const count = PENDING_PAGE_SIZE + 3;
      for (let i = 0; i < count; i++) assert.equal((await chargeVideoJob(db, chargeOf(ws.id, 1_000))).ok, true);
      // Their workflows never existed: each is restarted as a recovery run, on a task queue no worker polls.
      const taskQueue = `nowhere-${randomUUID()}`;
      const activities = createReconcilerActivities({ db, logger: createLogger('silent', 'test'), taskQueue, video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 } });
      const report = (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(activities.reconcileMoney)) as ReconcileReport;
      assert.equal(report.pending_checked, count);
      assert.equal(report.jobs_restarted.length, count);
      const described = await stack.api.temporal.workflow.getHandle(`video-job-${report.jobs_restarted.at(-1)}`).describe();
      assert.equal(described.typedSearchAttributes.get(messages.WORKSPACE_ID_SA), ws.id);
      for (const id of report.jobs_restarted) await stack.api.temporal.workflow.getHandle(`video-job-${id}`).terminate('test over').catch(() => {});
    } finally {
      await db.end();
    }
  });

  test('the reconciler asks Temporal nothing per running job: one listing, and a look of its own only for a job it does not list (every job when the listing fails)', async () => {
    // The stack's own scheduled reconcile would restart the terminated job first: it runs only by hand here.
    const s = await startStack({ env: { RECONCILE_INTERVAL_MS: String(24 * 3_600_000) } });
    try {
      const c = await newCustomer(s, 10);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await api(s.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 600_000 }, { n: 1 }) });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        ids.push(r.body.id);
      }
      const taskQueue = s.config.temporal.taskQueue;
      const reconcile = async (client = s.api.temporal) => {
        const activities = createReconcilerActivities({ db: s.db, logger: createLogger('silent', 'test'), taskQueue, video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 } });
        return (await new MockActivityEnvironment(undefined, { client }).run(activities.reconcileMoney)) as ReconcileReport;
      };
      const listed = async (want: (running: Set<string>) => boolean) => {
        for (let i = 0; i < 100; i++) {
          if (want(await runningVideoJobIds(s.api.temporal, taskQueue))) return;
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.fail('visibility never caught up');
      };
      await listed((running) => ids.every((id) => running.has(id)));
      const quiet = await reconcile();
      assert.equal(quiet.pending_checked, 3);
      assert.equal(quiet.jobs_looked_up, 0, 'running jobs are not looked up one by one');
      assert.deepEqual(quiet.jobs_restarted, []);
      // A visibility store that cannot list: the run goes on, looking up every pending job on its own.
      const workflow = Object.create(s.api.temporal.workflow, { list: { value: () => { throw new Error('visibility is down'); } } });
      const unlisted = await reconcile(Object.create(s.api.temporal, { workflow: { value: workflow } }));
      assert.equal(unlisted.jobs_looked_up, 3);
      assert.deepEqual(unlisted.jobs_restarted, [], 'each looked up, found running');

      await s.api.temporal.workflow.getHandle(messages.videoJobWorkflowId(ids[0]!)).terminate('operator mistake');
      await listed((running) => !running.has(ids[0]!));
      const resumed = await reconcile();
      assert.equal(resumed.pending_checked, 3);
      assert.equal(resumed.jobs_looked_up, 1);
      assert.deepEqual(resumed.jobs_restarted, [ids[0]]);

      for (const id of ids) assert.equal((await api(s.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key })).status, 200);
      for (const id of ids) assert.equal((await waitForJob(s, c.key, id)).status, 'failed');
      await assertAuditHolds(s);
    } finally {
      await s.stop();
    }
  });

  test('the audit looks up every pending job (not the oldest 2,000), stale speech holds and top-ups without their entry', async () => {
    const db = await scratchDatabase({ 'video_api.max_pending_jobs': 100_000 });
    try {
      const ws = await createWorkspace(db, { name: 'audit', credits_micro_eur: 1_000_000_000 });
      await db.query(
        `SELECT video_job_charge(gen_random_uuid()::text, gen_random_uuid(), $1, 'wf-' || g, 'sim-video-1', 'p', 'fp', '{"n": 1}', 1000,
                                 extract(epoch FROM now()) * 1000 + g, NULL, false, NULL, 'simulator', extract(epoch FROM now()) * 1000 + 3600000)
           FROM generate_series(1, 2001) g`,
        [ws.id],
      );
      const newest = (await db.query("SELECT id FROM video_jobs ORDER BY created_at DESC LIMIT 1")).rows[0].id as string;
      // Temporal as the audit sees it: every workflow running but the newest job's, which is gone.
      const workflowStates = async (ids: string[]) => new Map<string, WorkflowState>(ids.map((id) => [id, id === newest ? 'not_found' : 'running']));
      const report = await auditLedger(db, { workflowStates });
      assert.equal(report.pending_jobs_checked, 2001);
      assert.deepEqual(report.unaccounted_jobs.map((j) => [j.job_id, j.reason]), [[newest, 'workflow_not_running']]);
      assert.equal(report.ok, false);

      const clean = await scratchDatabase();
      try {
        const w = await createWorkspace(clean, { name: 'holds', credits_micro_eur: 1_000_000 });
        assert.equal((await auditLedger(clean)).ok, true);
        // A top-up without its ledger entry.
        const topup = randomUUID();
        await clean.query('INSERT INTO topups (id, workspace_id, amount_micro_eur) VALUES ($1, $2, 5000)', [topup, w.id]);
        const t = await auditLedger(clean);
        assert.equal(t.ok, false);
        assert.deepEqual(t.topup_mismatches.map((m) => m.topup_id), [topup]);
        await clean.query('DELETE FROM topups WHERE id = $1', [topup]);
        // A speech hold that outlived its request by an hour (the reconciler did not release it).
        const held = randomUUID();
        await clean.query(
          `INSERT INTO speech_requests (id, workspace_id, idempotency_key, request_fingerprint, model, voice, characters, response_format, cost_micro_eur, status, held_at)
           VALUES ($1, $2, 'k', 'fp', 'sim-tts-1', 'v', 10, 'mp3', 100, 'held', now() - interval '2 hours')`,
          [held, w.id],
        );
        await clean.query('UPDATE workspaces SET held_micro_eur = held_micro_eur + 100 WHERE id = $1', [w.id]);
        const h = await auditLedger(clean);
        assert.equal(h.ok, false);
        assert.deepEqual(h.stale_speech_holds.map((s) => s.speech_request_id), [held]);
      } finally {
        await clean.end();
      }
    } finally {
      await db.end();
    }
  });
});

describe('a create retried right after a 503', () => {
  let s7: Stack;
  let worker: RunningWorker | null = null;
  before(async () => {
    s7 = await startStack({ worker: false, env: { VIDEO_CREATE_TIMEOUT_MS: '15000' } });
  });
  after(async () => {
    await worker?.shutdown();
    await s7.stop();
  });

  test('a retry with the same Idempotency-Key (and other images) after a 503 is accepted, not answered a second 503; the provider gets its images', async () => {
    const c = await newCustomer(s7, 10);
    const key = `retry-${randomUUID()}`;
    const first = await create(s7, c.key, withImage(1), { 'idempotency-key': key });
    assert.equal(first.status, 503, JSON.stringify(first.body));
    // The retry joins the first attempt's run (still open: no worker yet), which refuses it as the
    // earlier attempt's; once that run closes, the retry starts a run of its own.
    const mine = pngImage(64, 36, 2);
    const retry = create(s7, c.key, { ...simJob(), image: imageField(mine, 'image/png') }, { 'idempotency-key': key });
    await new Promise((r) => setTimeout(r, 300));
    worker = await startWorker({ config: s7.config, db: s7.db, temporalAddress: infra().temporalAddress, logger: createLogger('silent', 'test') });
    const second = await retry;
    assert.equal(second.status, 202, JSON.stringify(second.body));
    await waitForJob(s7, c.key, second.body.id);
    const seen = await s7.db.query('SELECT request FROM simulator.video_operations WHERE request_id = $1', [second.body.id]);
    assert.equal(seen.rows[0].request.image.sha256, sha256(mine));
    assert.equal(await inputsOf(s7.db, { workspace_id: c.workspaceId }), 1, "only the accepted attempt's images are kept");
    await assertAuditHolds(s7);
  });
});

describe('webhook deliveries are fair per workspace', () => {
  let sw: Stack;
  before(async () => {
    // Four delivery slots per worker, two per workspace.
    sw = await startStack({ env: { WEBHOOK_MAX_CONCURRENT_ATTEMPTS: '4', WEBHOOK_MAX_CONCURRENT_ATTEMPTS_PER_WORKSPACE: '2', WEBHOOK_RETRY_INITIAL_MS: '60000' } });
  });
  after(async () => {
    await sw.stop();
  });

  test("one workspace's dead endpoints never delay another workspace's deliveries: it holds at most its share of the attempts", async () => {
    const dead = await startReceiver({ fallback: 'hang' });
    const alive = await startReceiver();
    try {
      const a = await newCustomer(sw, 10);
      const b = await newCustomer(sw, 10);
      // A: three endpoints that hang (one attempt at a time each); B: one that answers.
      for (const [c, r] of [[a, dead], [a, dead], [a, dead], [b, alive]] as const) {
        const hook = await api(sw.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: r.url } });
        assert.equal(hook.status, 201, JSON.stringify(hook.body));
      }
      // Eight jobs of A whose 24 deliveries hang (each attempt waits out the sender's 10 s timeout).
      const jobs = await Promise.all(Array.from({ length: 8 }, () => create(sw, a.key, simJob({ delay_ms: 0 }))));
      for (const j of jobs) await waitForJob(sw, a.key, j.body.id);
      await dead.waitFor(2, 10_000);
      await new Promise((r) => setTimeout(r, 1_000));
      assert.equal(dead.received.length, 2, "A's attempts in progress at once: its share, not every slot");
      const bJob = await create(sw, b.key, simJob({ delay_ms: 0 }));
      const done = await waitForJob(sw, b.key, bJob.body.id);
      const finished_ms = done.completed * 1000;
      const [got] = await alive.waitFor(1, 8_000);
      assert.ok(got!.at_ms - finished_ms < 5_000, `B's delivery waited ${got!.at_ms - finished_ms} ms behind A's`);
    } finally {
      await dead.close();
      await alive.close();
    }
  });

  test("a workspace's hanging endpoint never delays its other endpoints: an endpoint holds one of its slots at a time", async () => {
    const dead = await startReceiver({ fallback: 'hang' });
    const alive = await startReceiver();
    try {
      const c = await newCustomer(sw, 10);
      for (const r of [dead, alive]) {
        const hook = await api(sw.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: r.url } });
        assert.equal(hook.status, 201, JSON.stringify(hook.body));
      }
      const jobs = await Promise.all(Array.from({ length: 4 }, () => create(sw, c.key, simJob({ delay_ms: 0 }))));
      const finished = await Promise.all(jobs.map((j) => waitForJob(sw, c.key, j.body.id)));
      const received = await alive.waitFor(4, 12_000);
      const last_ms = Math.max(...received.map((r) => r.at_ms));
      const first_done_ms = Math.min(...finished.map((j) => j.completed * 1000));
      assert.ok(last_ms - first_done_ms < 8_000, `the healthy endpoint got its 4 events ${last_ms - first_done_ms} ms after the first job finished`);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(dead.received.length, 1, 'the hanging endpoint holds one attempt at a time');
    } finally {
      await dead.close();
      await alive.close();
    }
  });
});
