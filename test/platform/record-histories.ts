// Records the event history of every path of this release's workflows into test/histories/<version>/
// (test/helpers/histories.ts), for the replay test. Run with `npm run record-histories` once per release
// that changes workflow code (docs/architecture.md, "Changing a workflow"): a path already recorded for this version is
// never recorded again (MANIFEST).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { ADMIN_TOKEN, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { saveHistory } from '../helpers/histories.js';
import { imageField, jpegImage, pngImage } from '../helpers/images.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';
import { chargeDirect, directInput, startDirect } from '../helpers/direct-start.js';
import { jobIdForIdempotencyKey } from '../../src/video-jobs/service.js';
import { readVideoJob } from '../../src/video-jobs/records.js';
import { recoveryInput } from '../../src/video-jobs/recovery.js';
import { startWorker, type RunningWorker } from '../../src/runtime/worker.js';
import { createLogger } from '../../src/logger.js';

let stack: Stack;
let slow: Stack;
let idle: Stack;
let lateWorker: RunningWorker | null = null;

before(async () => {
  stack = await startStack();
  slow = await startStack({ env: { VIDEO_JOB_TIMEOUT_MS: '1500' } });
  idle = await startStack({ worker: false, env: { VIDEO_CREATE_TIMEOUT_MS: '3000' } });
});
after(async () => {
  await lateWorker?.shutdown();
  await Promise.all([stack.stop(), slow.stop(), idle.stop()]);
});

const create = (s: Stack, key: string, body: unknown, headers: Record<string, string> = {}) =>
  http(s.baseUrl, 'POST', '/v2/videos/generations', { token: key, json: body, headers });
const save = (s: Stack, name: string, jobId: string) => saveHistory(s, name, videoJobWorkflowId(jobId));

async function run(s: Stack, name: string, body: Record<string, unknown>, expectStatus: string, headers?: Record<string, string>) {
  const c = await newCustomer(s, 10);
  const created = await create(s, c.key, body, headers);
  assert.equal(created.status, 202, JSON.stringify(created.body));
  if (headers) {
    const again = await create(s, c.key, body, headers);
    assert.equal(again.body.id, created.body.id);
  }
  const job = await waitForJob(s, c.key, created.body.id, 60_000);
  assert.equal(job.status, expectStatus, JSON.stringify(job));
  await save(s, name, created.body.id);
  return created.body.id as string;
}

test('succeeded', async () => {
  await run(stack, 'video-job-succeeded', simJob({ delay_ms: 500 }), 'succeeded');
});
test('shortfall', async () => {
  await run(stack, 'video-job-shortfall', simJob({ delay_ms: 0, videos: 1 }), 'succeeded');
});
test('provider failure', async () => {
  await run(stack, 'video-job-provider-failed', simJob({ delay_ms: 0, outcome: 'fail', message: 'boom' }), 'failed');
});
test('no videos', async () => {
  await run(stack, 'video-job-no-videos', simJob({ delay_ms: 0, videos: 0 }), 'failed');
});
test('idempotent retry (second update on a running job)', async () => {
  await run(stack, 'video-job-idempotent-retry', simJob({ delay_ms: 500 }), 'succeeded', { 'Idempotency-Key': randomUUID() });
});
test('deadline while awaiting the operation', async () => {
  await run(slow, 'video-job-deadline', simJob({ delay_ms: 60_000 }), 'failed');
});
test('inputs: first and last frame, audio off, a negative prompt', async () => {
  const inputs = {
    image: imageField(pngImage(32, 18, 1), 'image/png'),
    lastFrame: imageField(jpegImage(2), 'image/jpeg'),
    generateAudio: false,
    negativePrompt: 'text',
  };
  await run(stack, 'video-job-inputs', simJob({ delay_ms: 0 }, inputs), 'succeeded');
});

test('one of n videos cannot be stored: a shortfall', async () => {
  const c = await newCustomer(stack, 10);
  const jobId = jobIdForIdempotencyKey(c.workspaceId, 'partial');
  fs.mkdirSync(path.join(stack.config.dataDir, 'storage', 'videos', jobId, '1.mp4'), { recursive: true });
  const created = await create(stack, c.key, simJob({ delay_ms: 0 }, { n: 3 }), { 'Idempotency-Key': 'partial' });
  assert.equal(created.status, 202);
  const job = await waitForJob(stack, c.key, jobId, 60_000);
  assert.equal(job.videos.length, 2);
  await save(stack, 'video-job-partial-storage', jobId);
});

test('insufficient credits', async () => {
  const c = await newCustomer(stack, 0.1);
  const r = await create(stack, c.key, simJob(), { 'Idempotency-Key': 'poor' });
  assert.equal(r.status, 402);
  const jobId = jobIdForIdempotencyKey(c.workspaceId, 'poor');
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId)).result();
  await save(stack, 'video-job-insufficient-credits', jobId);
});

test("the workspace's limit of pending jobs", async () => {
  const c = await newCustomer(stack, 10);
  await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: 1 } });
  const first = await create(stack, c.key, simJob({ delay_ms: 2_000 }));
  assert.equal(first.status, 202);
  const r = await create(stack, c.key, simJob(), { 'Idempotency-Key': 'over-the-limit' });
  assert.equal(r.status, 429, JSON.stringify(r.body));
  const jobId = jobIdForIdempotencyKey(c.workspaceId, 'over-the-limit');
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId)).result();
  await save(stack, 'video-job-too-many-pending', jobId);
  await waitForJob(stack, c.key, first.body.id);
});

test("the API key's spend limit", async () => {
  const c = await newCustomer(stack, 10);
  const key = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, {
    token: ADMIN_TOKEN,
    json: { spend_limit_in_euro: 0.1 },
  });
  const r = await create(stack, key.body.key, simJob(), { 'Idempotency-Key': 'limited' });
  assert.equal(r.status, 402);
  assert.equal(r.body.error.code, 'key_spend_limit_exceeded');
  const jobId = jobIdForIdempotencyKey(c.workspaceId, 'limited');
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId)).result();
  await save(stack, 'video-job-key-spend-limit', jobId);
});

test('not accepted in time: its run starts after the API stopped waiting and refuses to charge', async () => {
  const c = await newCustomer(idle, 10);
  const r = await create(idle, c.key, simJob(), { 'Idempotency-Key': 'late' });
  assert.equal(r.status, 503);
  lateWorker = await startWorker({
    config: idle.config,
    db: idle.db,
    temporalAddress: idle.config.temporal.address!,
    logger: createLogger('silent', 'rec'),
  });
  const jobId = jobIdForIdempotencyKey(c.workspaceId, 'late');
  assert.equal(
    ((await idle.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId)).result()) as { status: string }).status,
    'not_accepted',
  );
  await save(idle, 'video-job-not-accepted', jobId);
});

test('a run whose charge step starts late finds its attempt charged and goes on (a worker froze past its task timeout)', async () => {
  const c = await newCustomer(stack, 10);
  const input = directInput(c.workspaceId, randomUUID(), { accept_by_ms: Date.now() + 60_000 });
  const charged = await chargeDirect(stack.db, input);
  assert.ok(charged.ok);
  const handle = await startDirect(stack, { ...input, accept_by_ms: Date.now() - 1 });
  assert.equal(((await handle.result()) as { status: string }).status, 'succeeded');
  await saveHistory(stack, 'video-job-late-run-charged', handle.workflowId);
});

test('a second attempt of a job another attempt created ends without charging (duplicate)', async () => {
  const c = await newCustomer(stack, 10);
  const jobId = await run(stack, 'video-job-first-attempt', simJob({ delay_ms: 0 }, { n: 1 }), 'succeeded');
  const handle = await startDirect(stack, directInput(c.workspaceId, jobId));
  assert.equal(((await handle.result()) as { status: string }).status, 'duplicate');
  await saveHistory(stack, 'video-job-duplicate-attempt', videoJobWorkflowId(jobId));
});

test('submit rejected by the provider', async () => {
  const c = await newCustomer(stack, 10);
  const handle = await startDirect(stack, directInput(c.workspaceId, randomUUID(), { parameters: { simulate: { outcome: 'nonsense' } } }));
  const result = (await handle.result()) as { status: string; error: { code: string } };
  assert.equal(result.error.code, 'invalid_request');
  await saveHistory(stack, 'video-job-submit-rejected', handle.workflowId);
});

test('cancelled by the cancelJob update', async () => {
  const c = await newCustomer(stack, 10);
  const created = await create(stack, c.key, simJob({ delay_ms: 60_000 }));
  for (let t = 0; !(await readVideoJob(stack.db, created.body.id))?.operation_id; t++) {
    assert.ok(t < 200);
    await new Promise((r) => setTimeout(r, 25));
  }
  const r = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${created.body.id}/cancel`, { token: c.key });
  assert.equal(r.status, 200);
  await save(stack, 'video-job-cancelled', created.body.id);
});

test('cancelled after the provider started it, which bills the operation: charged', async () => {
  const c = await newCustomer(stack, 10);
  const created = await create(stack, c.key, simJob({ delay_ms: 60_000, billed_on_cancel: true }));
  for (let t = 0; !(await readVideoJob(stack.db, created.body.id))?.operation_id; t++) {
    assert.ok(t < 200);
    await new Promise((r) => setTimeout(r, 25));
  }
  const r = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${created.body.id}/cancel`, { token: c.key });
  assert.equal(r.status, 200);
  assert.equal(r.body.refunded_in_euro, 0);
  await save(stack, 'video-job-cancelled-billed', created.body.id);
});

test('cancelled as a workflow (an operator cancels it in Temporal)', async () => {
  const c = await newCustomer(stack, 10);
  const created = await create(stack, c.key, simJob({ delay_ms: 60_000 }));
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).cancel();
  assert.equal((await waitForJob(stack, c.key, created.body.id)).error.code, 'cancelled');
  await save(stack, 'video-job-workflow-cancelled', created.body.id);
});

test('recovery: a terminated job resumes its provider operation', async () => {
  const c = await newCustomer(stack, 10);
  const created = await create(stack, c.key, simJob({ delay_ms: 1_000 }));
  for (let t = 0; !(await readVideoJob(stack.db, created.body.id))?.operation_id; t++) {
    assert.ok(t < 200);
    await new Promise((r) => setTimeout(r, 25));
  }
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).terminate('recording');
  const job = (await readVideoJob(stack.db, created.body.id))!;
  const settings = { job_timeout_ms: 60_000 };
  await (await startDirect(stack, recoveryInput(job, settings))).result();
  assert.equal((await waitForJob(stack, c.key, created.body.id)).status, 'succeeded');
  await save(stack, 'video-job-recovered', created.body.id);
});

test('recovery: a terminated job with no known operation is refunded in full', async () => {
  const c = await newCustomer(stack, 10);
  const created = await create(stack, c.key, simJob({ delay_ms: 60_000 }));
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).terminate('recording');
  const job = { ...(await readVideoJob(stack.db, created.body.id))!, operation_id: null };
  const settings = { job_timeout_ms: 60_000 };
  await (await startDirect(stack, recoveryInput(job, settings))).result();
  assert.equal((await waitForJob(stack, c.key, created.body.id)).error.code, 'job_interrupted');
  await save(stack, 'video-job-recovered-refunded', created.body.id);
});

test('a reconciler run', async () => {
  const handle = await stack.api.temporal.workflow.start('reconcileWorkflow', {
    workflowId: `money-reconciler-recording-${randomUUID()}`,
    taskQueue: stack.config.temporal.taskQueue,
    args: [],
  });
  await handle.result();
  await saveHistory(stack, 'reconcile-run', handle.workflowId);
});
