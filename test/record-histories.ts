// Records the event history of every video-job workflow path into test/histories/, for the replay
// test. Run with `npm run record-histories` after a deliberate workflow change (with patching), and
// commit the new files beside the old ones: old histories must keep replaying.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { http, newCustomer, simJob, startStack, waitForJob, type Stack } from './helpers/stack.js';
import { HISTORIES_DIR as OUT, saveHistory } from './helpers/histories.js';
import { videoJobWorkflowId, type VideoJobInput } from '../workflows/messages.js';
import { voiceDeletionWorkflowId } from '../workflows/voice-deletion.js';
import { encodeWav, SimulatedVoiceProvider } from '../src/providers/voice/simulator.js';
import { imageField, jpegImage, pngImage } from './helpers/images.js';

let stack: Stack;
let slow: Stack;
let continued: Stack;

before(async () => {
  fs.mkdirSync(OUT, { recursive: true });
  stack = await startStack();
  continued = await startStack({ maxPollsPerRun: 1 });
  slow = await startStack({ env: { VIDEO_JOB_TIMEOUT_MS: '1500' } });
});
after(async () => {
  await stack.stop();
  await slow.stop();
  await continued.stop();
});

async function save(s: Stack, name: string, jobId: string, workflowId = videoJobWorkflowId(jobId)) {
  await saveHistory(s, name, workflowId);
}

async function run(s: Stack, name: string, body: Record<string, unknown>, expectStatus: string, headers?: Record<string, string>) {
  const c = await newCustomer(s, 10);
  const created = await http(s.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: body, ...(headers ? { headers } : {}) });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  if (headers) {
    const again = await http(s.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: body, headers });
    assert.equal(again.body.id, created.body.id);
  }
  const job = await waitForJob(s, c.key, created.body.id, 60_000);
  assert.equal(job.status, expectStatus);
  await save(s, name, created.body.id);
}

test('succeeded', () => run(stack, 'video-job-succeeded', simJob({ delay_ms: 0 }), 'succeeded'));
test('shortfall', () => run(stack, 'video-job-shortfall', simJob({ delay_ms: 0, videos: 1 }), 'succeeded'));
test('provider failure', () => run(stack, 'video-job-provider-failed', simJob({ delay_ms: 0, outcome: 'fail', message: 'boom' }), 'failed'));
test('no videos', () => run(stack, 'video-job-no-videos', simJob({ delay_ms: 0, videos: 0 }), 'failed'));
test('idempotent retry (second update on a running job)', () =>
  run(stack, 'video-job-idempotent-retry', simJob({ delay_ms: 0 }), 'succeeded', { 'Idempotency-Key': randomUUID() }));
test('inputs: first and last frame, audio off, a negative prompt (patch video-job-inputs)', () =>
  run(
    stack,
    'video-job-inputs',
    simJob(
      { delay_ms: 0 },
      { image: imageField(pngImage(32, 18, 1), 'image/png'), lastFrame: imageField(jpegImage(2), 'image/jpeg'), generateAudio: false, negativePrompt: 'text' },
    ),
    'succeeded',
  ));
test('continue-as-new', async () => {
  await run(continued, 'video-job-continued', simJob({ delay_ms: 3_000 }), 'succeeded');
  assert.ok(fs.existsSync(path.join(OUT, 'video-job-continued.run1.json')), 'the job continued as new at least once');
});
test('deadline', () => run(slow, 'video-job-deadline', simJob({ delay_ms: 60_000 }), 'failed'));

test('cancelled', async () => {
  const c = await newCustomer(stack, 10);
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 60_000 }) });
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).cancel();
  assert.equal((await waitForJob(stack, c.key, created.body.id)).status, 'failed');
  await save(stack, 'video-job-cancelled', created.body.id);
});

test('insufficient credits', async () => {
  const c = await newCustomer(stack, 0.1);
  const id = 'b0b0b0b0-0000-4000-8000-' + randomUUID().slice(-12);
  // Through the API the id is random; use a known one by retrying with an Idempotency-Key.
  const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers: { 'Idempotency-Key': id } });
  assert.equal(r.status, 402);
  const { jobIdForIdempotencyKey } = await import('../src/services/video-jobs.js');
  const jobId = jobIdForIdempotencyKey(c.workspaceId, id);
  await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId)).result();
  await save(stack, 'video-job-insufficient-credits', jobId);
});

test('submit rejected by the provider', async () => {
  // Bypass API validation to reach the provider's own rejection (non-retryable submit failure).
  const c = await newCustomer(stack, 10);
  const job_id = randomUUID();
  const now = Date.now();
  const input: VideoJobInput = {
    job_id,
    workspace_id: c.workspaceId,
    model: 'sim-video-1',
    backend: 'simulator',
    prompt: 'p',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
    parameters: { simulate: { outcome: 'nonsense' } },
    estimated_cost_micro_eur: 200_000,
    created_at_ms: now,
    request_fingerprint: 'x',
    poll_interval_ms: 100,
    poll_max_interval_ms: 100,
    deadline_at_ms: now + 60_000,
    max_polls_per_run: 200,
  };
  const handle = await stack.api.temporal.workflow.start('videoJobWorkflow', {
    workflowId: videoJobWorkflowId(job_id),
    taskQueue: stack.config.temporal.taskQueue,
    args: [input],
  });
  const result = (await handle.result()) as { status: string; error: { code: string } };
  assert.equal(result.status, 'failed');
  assert.equal(result.error.code, 'invalid_request');
  await save(stack, 'video-job-submit-rejected', job_id);
});

async function cloneAndDelete(name: string, providerFailures: number) {
  const c = await newCustomer(stack, 10);
  const samples = new Int16Array(11_025);
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 22_050));
  const form = new FormData();
  form.append('name', 'recorded voice');
  form.append('file', new Blob([new Uint8Array(encodeWav(samples, 22_050))], { type: 'audio/wav' }), 'sample.wav');
  const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${c.key}` }, body: form });
  assert.equal(res.status, 200);
  const voice = (await res.json()) as { id: string };
  if (providerFailures > 0) await new SimulatedVoiceProvider(stack.db).injectFaults('delete', { kind: 'unavailable', count: providerFailures });
  const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: c.key });
  assert.equal(del.status, 200, JSON.stringify(del.body));
  await stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(voice.id)).result();
  await save(stack, name, voice.id, voiceDeletionWorkflowId(voice.id));
}

test('voice deleted at the provider', () => cloneAndDelete('voice-delete-succeeded', 0));
test('voice deletion retried through a provider outage', () => cloneAndDelete('voice-delete-after-retries', 2));
