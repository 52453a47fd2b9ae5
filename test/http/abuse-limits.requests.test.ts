// Abuse through the request, against the real API, worker, PostgreSQL and Temporal: what a refused
// create leaves behind, an Idempotency-Key retried with other images (also right after a 503), large
// and compressed bodies held by one key, and nested or oversized `parameters`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import zlib from 'node:zlib';
import { MockActivityEnvironment } from '@temporalio/testing';
import * as messages from '../../workflows/messages.js';
import { PARAMETERS_BYTES_MAX, PARAMETERS_DEPTH_MAX } from '../../src/video-jobs/schemas.js';
import { LARGE_BODIES_PER_KEY_MAX } from '../../src/http/in-flight.js';
import { VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX } from '../../src/video-jobs/schemas.js';
import { jobIdForIdempotencyKey } from '../../src/video-jobs/service.js';
import { createReconcilerActivities, type ReconcileReport } from '../../activities/reconciler.js';
import { createLogger } from '../../src/logger.js';
import { startWorker, type RunningWorker } from '../../src/runtime/worker.js';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowsPath } from '../../src/temporal/worker.js';
import {
  ADMIN_TOKEN,
  assertAuditHolds,
  balanceMicro,
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
import { stack, sha256, create, withImage, inputsOf, useAbuseStack } from './abuse-limits.setup.js';

useAbuseStack();

describe('images of refused creates', () => {
  test("a create its charge would refuse (no credit, the key's spend limit, the pending cap) writes nothing: no image, no workflow", async () => {
    // Every row ever written to video_job_inputs, counted by a trigger of this file's database.
    await stack.db.query(`CREATE TABLE IF NOT EXISTS test_input_writes (workspace_id uuid NOT NULL)`);
    await stack.db.query(`CREATE OR REPLACE FUNCTION test_count_input_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO test_input_writes VALUES (NEW.workspace_id); RETURN NEW; END $$`);
    await stack.db.query('DROP TRIGGER IF EXISTS test_count_input_writes ON video_job_inputs');
    await stack.db.query(
      'CREATE TRIGGER test_count_input_writes AFTER INSERT ON video_job_inputs FOR EACH ROW EXECUTE FUNCTION test_count_input_write()',
    );
    const writes = async (workspaceId: string) =>
      (await stack.db.query('SELECT count(*)::int AS n FROM test_input_writes WHERE workspace_id = $1', [workspaceId])).rows[0].n;
    const large = {
      ...simJob(),
      image: imageField(pngOfSize(1_750_000), 'image/png'),
      lastFrame: imageField(pngOfSize(1_750_000), 'image/png'),
    };

    const broke = await newCustomer(stack, 0);
    for (let i = 0; i < 12; i++) {
      const r = await create(stack, broke.key, large, i % 2 ? { 'idempotency-key': `broke-${i}` } : undefined);
      assert.equal(r.status, 402, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'insufficient_credits');
    }
    assert.equal(await writes(broke.workspaceId), 0, 'no image of a refused create was written');
    const refusedJob = jobIdForIdempotencyKey(broke.workspaceId, 'broke-1');
    await assert.rejects(
      stack.api.temporal.workflow.getHandle(messages.videoJobWorkflowId(refusedJob)).describe(),
      /not found/i,
      'no workflow was started',
    );
    // Refused for good, as the charge refuses a key: after a top-up the same key is still a 402.
    await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${broke.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: 5 },
    });
    assert.equal((await create(stack, broke.key, large, { 'idempotency-key': 'broke-1' })).status, 402);
    assert.equal(await writes(broke.workspaceId), 0);

    const limited = await newCustomer(stack, 5);
    const key = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${limited.workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: { spend_limit_in_euro: 0.01 },
    });
    const over = await create(stack, key.body.key, large);
    assert.equal(over.status, 402);
    assert.equal(over.body.error.code, 'key_spend_limit_exceeded');
    await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${limited.workspaceId}/limits`, {
      token: ADMIN_TOKEN,
      json: { max_pending_jobs: 1 },
    });
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

  test("an Idempotency-Key retried with other images after an earlier attempt left its own: the provider gets the accepted attempt's images", async () => {
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
    const activities = createReconcilerActivities({
      db: stack.db,
      logger: createLogger('silent', 'test'),
      taskQueue: `nowhere-${randomUUID()}`,
      video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
    });
    const report = (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(
      activities.reconcileMoney,
    )) as ReconcileReport;
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
  const gzipped = () =>
    zlib.gzipSync(JSON.stringify({ ...simJob(), image: imageField(Buffer.concat([pngImage(), Buffer.alloc(150_000)]), 'image/png') }));

  test('one API key holds at most its share of the large-body slots, trickling or not: other tenants still get theirs', async () => {
    const hog = await newCustomer(stack, 10);
    const held = Array.from({ length: LARGE_BODIES_PER_KEY_MAX }, () => trickle(hog.key));
    try {
      await new Promise((r) => setTimeout(r, 300));
      const more = await create(stack, hog.key, {
        ...simJob(),
        image: imageField(Buffer.concat([pngImage(), Buffer.alloc(100_000)]), 'image/png'),
      });
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
      const fine = await create(stack, other.key, {
        ...simJob(),
        image: imageField(Buffer.concat([pngImage(), Buffer.alloc(100_000)]), 'image/png'),
      });
      assert.equal(fine.status, 202, JSON.stringify(fine.body));
      await waitForJob(stack, other.key, fine.body.id);
    } finally {
      for (const req of held) req.destroy();
    }
  });

  test('a small gzip body that inflates past the small-body limit takes a large-body slot (busy: 503), never parsed for free', async () => {
    const keys = await Promise.all(
      Array.from({ length: VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX / LARGE_BODIES_PER_KEY_MAX }, () => newCustomer(stack, 1)),
    );
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

describe('a create retried right after a 503', () => {
  let s7: Stack;
  let worker: RunningWorker | null = null;
  // Bundled ahead: the worker must start, and close the first attempt's run, while the retry waits (within its 30 s, also on a loaded machine).
  let workflowBundle: { code: string };
  before(async () => {
    s7 = await startStack({ worker: false, env: { VIDEO_CREATE_TIMEOUT_MS: '30000' } });
    workflowBundle = await bundleWorkflowCode({ workflowsPath: workflowsPath() });
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
    worker = await startWorker({
      config: s7.config,
      db: s7.db,
      temporalAddress: infra().temporalAddress,
      logger: createLogger('silent', 'test'),
      workflowBundle,
    });
    const second = await retry;
    assert.equal(second.status, 202, JSON.stringify(second.body));
    await waitForJob(s7, c.key, second.body.id);
    const seen = await s7.db.query('SELECT request FROM simulator.video_operations WHERE request_id = $1', [second.body.id]);
    assert.equal(seen.rows[0].request.image.sha256, sha256(mine));
    assert.equal(await inputsOf(s7.db, { workspace_id: c.workspaceId }), 1, "only the accepted attempt's images are kept");
    await assertAuditHolds(s7);
  });
});
