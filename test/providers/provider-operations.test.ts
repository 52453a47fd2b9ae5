// A provider operation that may have been created is never left running with nobody waiting for it:
// a job past its deadline asks the provider to cancel (fal has no deadline of its own), and a job whose
// workflow was lost and restarted (a recovery run, which starts with the operation but not its backend)
// is cancelled at the provider like any other; a Replicate job whose frames make its answers large
// records every prediction it made. Only the provider ends an operation: a poll refused for our
// credentials, or failing in passing, is retried with backoff while the job waits (Vertex and fal); a
// poll error that does end a job cancels its operation first; an output whose copy is refused is copied
// again. Against the fal, Replicate and Vertex AI fakes, with real PostgreSQL and Temporal; the
// provider's requests are counted against the job's charge, and the ledger audit holds after each.
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FalFake } from '../fakes/fal-fake.js';
import { ReplicateFake } from '../fakes/replicate-fake.js';
import { googleError, VertexVeoFake } from '../fakes/vertex-veo-fake.js';
import { videoProviderPollRetries } from '../../src/metrics.js';
import { imageField, pngOfSize } from '../helpers/images.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, type Stack } from '../helpers/stack.js';
import {
  createJob,
  KLING_VIDEO_MICRO_EUR,
  klingJob,
  ledgerOf,
  providerStack,
  sleep,
  waitSubmitted,
  watchJob,
} from '../helpers/provider-jobs.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';

const NEVER = 1_000_000;
const POLLED_MS = 200;
const JOB_TIMEOUT_MS = 6_000;

const fal = new FalFake();
let stack: Stack;

before(async () => {
  await fal.start();
  stack = await providerStack({ ...fal.env(), VIDEO_JOB_TIMEOUT_MS: String(JOB_TIMEOUT_MS) }, POLLED_MS);
});
after(async () => {
  await stack?.stop();
  await fal.stop();
});
beforeEach(() => fal.reset());
afterEach(async () => {
  await assertAuditHolds(stack);
});

async function until<T>(what: string, timeout_ms: number, probe: () => Promise<T | null | undefined>): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const v = await probe();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout_ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The fal requests of a job's operation that were asked to cancel. */
const cancelledAtFal = (operation_id: string) => {
  const ids = (JSON.parse(operation_id) as { fal: { request_id: string }[] }).fal.map((r) => r.request_id);
  return fal.requestsTo('cancel').filter((r) => ids.some((id) => r.path.includes(id))).length;
};

describe('a job past its deadline', () => {
  test('is refunded in full and its fal requests, queued forever, are cancelled at fal', async () => {
    const c = await newCustomer(stack, 5);
    fal.plans = [{ queue_polls: NEVER }, { queue_polls: NEVER }];
    const id = await createJob(stack, c.key, klingJob({ n: 2 }));
    const op = await waitSubmitted(stack, id);
    assert.equal(op.backend, 'fal');
    assert.equal(fal.requestsTo('submit').length, 2);
    const { job } = await watchJob(stack, c.key, id, JOB_TIMEOUT_MS + 15_000, 200);
    assert.equal(job.status, 'failed', JSON.stringify(job));
    assert.equal(job.error.code, 'deadline_exceeded');
    assert.equal(job.refunded_in_euro, 1);
    // The settlement asks fal once the refund is committed: its answer is recorded a moment later.
    const answer = await until(
      'the cancel answer',
      10_000,
      async () => (await stack.db.query('SELECT cancel_answer FROM video_jobs WHERE id = $1', [id])).rows[0].cancel_answer,
    );
    assert.match(answer, /^fal: /);
    assert.equal(cancelledAtFal(op.operation_id), 2, 'both requests asked to cancel');
    assert.deepEqual(await ledgerOf(stack, id), [
      ['charge', -2 * KLING_VIDEO_MICRO_EUR],
      ['refund', 2 * KLING_VIDEO_MICRO_EUR],
    ]);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
  });
});

describe('a job whose workflow was terminated', () => {
  test("cancelled by its customer: the recovery run's cancel reaches fal, and the job is refunded", async () => {
    const c = await newCustomer(stack, 5);
    fal.plans = [{ queue_polls: NEVER }];
    const id = await createJob(stack, c.key, klingJob());
    const op = await waitSubmitted(stack, id);
    await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(id)).terminate('operator mistake');
    const r = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'cancelled');
    assert.equal(r.body.refunded_in_euro, 0.5);
    assert.equal(fal.requestsTo('submit').length, 1, 'the recovery run did not submit again');
    assert.equal(cancelledAtFal(op.operation_id), 1, "the cancel reached fal's request");
    const rec = await stack.db.query('SELECT cancel_answer FROM video_jobs WHERE id = $1', [id]);
    assert.match(rec.rows[0].cancel_answer, /^fal: cancelled while in the queue/);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
  });
});

describe('Replicate', () => {
  const replicate = new ReplicateFake();
  let rstack: Stack;
  before(async () => {
    await replicate.start();
    rstack = await providerStack(replicate.env(), POLLED_MS);
  });
  after(async () => {
    await rstack?.stop();
    await replicate.stop();
  });

  test('a job with a first and a last frame of 7.5 MB each, two videos: the frames are uploaded once each, both predictions are recorded and delivered, charged once; none runs unrecorded', async () => {
    const c = await newCustomer(rstack, 10);
    replicate.dropCallbacks = true;
    replicate.defaultPlan = { starting_polls: 1, processing_polls: 1 };
    const first = pngOfSize(7_500_000);
    const last = pngOfSize(7_400_000);
    const id = await createJob(rstack, c.key, {
      prompt: 'the lighthouse lights up as night falls',
      model: 'veo-3.1-fast-generate-001',
      durationSeconds: 4,
      resolution: '720p',
      n: 2,
      generateAudio: false,
      image: imageField(first, 'image/png'),
      lastFrame: imageField(last, 'image/png'),
    });
    const op = await waitSubmitted(rstack, id);
    assert.equal(op.backend, 'replicate');
    const { job } = await watchJob(rstack, c.key, id, 30_000, 200);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos.length, 2);
    assert.deepEqual(
      op.operation_id.split(',').sort(),
      [...replicate.predictions.keys()].sort(),
      "every prediction Replicate made is the job's",
    );
    assert.equal(replicate.requestsTo('create').length, 2);
    assert.deepEqual([...replicate.files.values()].map((f) => f.bytes.length).sort(), [first.length, last.length].sort());
    assert.deepEqual(await ledgerOf(rstack, id), [['charge', -Math.round(job.cost_in_euro * 1e6)]]);
    await assertAuditHolds(rstack);
  });

  test('polls refused 401 twice (a token revoked before its successor is deployed): polled again, the job succeeds, charged once', async () => {
    const c = await newCustomer(rstack, 10);
    replicate.dropCallbacks = true;
    replicate.defaultPlan = { starting_polls: 1, processing_polls: 1 };
    replicate.fault({ route: 'get', status: 401, body: { title: 'Unauthenticated', detail: 'Invalid token', status: 401 }, times: 2 });
    const id = await createJob(rstack, c.key, klingJob());
    const { job } = await watchJob(rstack, c.key, id, 30_000, 200);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(replicate.requestsTo('cancel').length, 0);
    assert.deepEqual(await ledgerOf(rstack, id), [['charge', -KLING_VIDEO_MICRO_EUR]]);
    await assertAuditHolds(rstack);
  });
});

describe('fal: the result of a completed request refused once for our key', () => {
  test('is read again: the job succeeds, charged once', async () => {
    const c = await newCustomer(stack, 5);
    fal.plans = [{ queue_polls: 0, progress_polls: 1 }];
    fal.fault({ route: 'result', status: 401, body: { detail: 'Invalid key' } });
    const id = await createJob(stack, c.key, klingJob());
    const { job } = await watchJob(stack, c.key, id, JOB_TIMEOUT_MS + 5_000, 100);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.ok(fal.requestsTo('result').length >= 2, 'the result was read again');
    assert.deepEqual(await ledgerOf(stack, id), [['charge', -KLING_VIDEO_MICRO_EUR]]);
  });
});

describe('Vertex AI: poll and copy errors that may pass', () => {
  const vertex = new VertexVeoFake();
  const TOKEN = 'test-token';
  const VERTEX_JOB_TIMEOUT_MS = 12_000;
  const VERTEX_POLL_MS = 100;
  // veo-3.1-fast-generate-001, 4 s at 720p with audio: 800_000 micro-euros a video.
  const FAST_VIDEO_MICRO_EUR = 800_000;
  const fastJob = { prompt: 'a lighthouse at dusk', model: 'veo-3.1-fast-generate-001', durationSeconds: 4, resolution: '720p', n: 1 };
  const denied = googleError(403, "Permission 'aiplatform.endpoints.predict' denied on resource projects/test-project");
  let vstack: Stack;

  before(async () => {
    await vertex.start();
    vstack = await providerStack(
      {
        VERTEX_PROJECT_ID: 'test-project',
        VERTEX_API_ENDPOINT: vertex.url,
        GCS_API_ENDPOINT: vertex.url,
        VERTEX_OUTPUT_GCS_URI: 'gs://our-bucket/videos/',
        VERTEX_ACCESS_TOKEN: TOKEN,
        VIDEO_JOB_TIMEOUT_MS: String(VERTEX_JOB_TIMEOUT_MS),
      },
      VERTEX_POLL_MS,
    );
  });
  after(async () => {
    await vstack?.stop();
    await vertex.stop();
  });
  beforeEach(() => vertex.reset());
  afterEach(async () => {
    await assertAuditHolds(vstack);
  });

  const credentialRetries = async () =>
    (await videoProviderPollRetries.get()).values.find((v) => v.labels.backend === 'vertex' && v.labels.reason === 'credentials')?.value ??
    0;
  const cancelAnswerOf = async (id: string): Promise<string | null> =>
    (await vstack.db.query('SELECT cancel_answer FROM video_jobs WHERE id = $1', [id])).rows[0].cancel_answer;
  const vertexOperation = (operation_id: string) => vertex.operations.get(operation_id.split('#')[0]!);

  test('one poll refused 403: polled again, the job succeeds and is charged; the refusal is counted', async () => {
    vertex.scenario = { pollsUntilDone: 1 };
    vertex.fault({ route: 'fetchPredictOperation', status: 403, body: denied });
    const before = await credentialRetries();
    const c = await newCustomer(vstack, 5);
    const id = await createJob(vstack, c.key, fastJob);
    const { job } = await watchJob(vstack, c.key, id, 20_000, 100);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos.length, 1);
    assert.equal(await credentialRetries(), before + 1, 'video_provider_poll_retries_total{reason="credentials"} counted it');
    assert.equal(vertex.requestsTo('cancel').length, 0);
    assert.deepEqual(await ledgerOf(vstack, id), [['charge', -FAST_VIDEO_MICRO_EUR]]);
  });

  test('503s for 4 s: the polls back off (a handful, not one per interval), the job waits and then succeeds', async () => {
    vertex.scenario = { pollsUntilDone: 0 };
    vertex.fault({
      route: 'fetchPredictOperation',
      status: 503,
      body: googleError(503, 'The service is currently unavailable.'),
      times: 1000,
    });
    const c = await newCustomer(vstack, 5);
    const id = await createJob(vstack, c.key, fastJob);
    await waitSubmitted(vstack, id);
    await sleep(4_000);
    const polls = vertex.requestsTo('fetchPredictOperation').length;
    // Every 100 ms would be 40 polls; doubling from 100 ms, 5 or 6 (0.1 + 0.2 + 0.4 + 0.8 + 1.6 + 3.2 s).
    assert.ok(polls >= 3 && polls <= 7, `${polls} polls in 4 s`);
    const pending = await http(vstack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
    assert.equal(pending.body.status, 'pending', JSON.stringify(pending.body));
    vertex.reset(); // Vertex is back
    const { job } = await watchJob(vstack, c.key, id, 20_000, 100);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.deepEqual(await ledgerOf(vstack, id), [['charge', -FAST_VIDEO_MICRO_EUR]]);
  });

  test('every poll refused 403: retried, backing off, until the deadline; then refunded in full and cancelled at Vertex, the answer recorded', async () => {
    vertex.scenario = { pollsUntilDone: 1_000_000 };
    vertex.fault({ route: 'fetchPredictOperation', status: 403, body: denied, times: 1000 });
    const c = await newCustomer(vstack, 5);
    const id = await createJob(vstack, c.key, fastJob);
    const op = await waitSubmitted(vstack, id);
    const { job } = await watchJob(vstack, c.key, id, VERTEX_JOB_TIMEOUT_MS + 15_000, 200);
    assert.equal(job.status, 'failed', JSON.stringify(job));
    assert.equal(job.error.code, 'deadline_exceeded');
    assert.equal(job.refunded_in_euro, 0.8);
    const polls = vertex.requestsTo('fetchPredictOperation').filter((r) => (r.json as { operationName?: string }).operationName);
    assert.ok(polls.length >= 5 && polls.length <= 12, `${polls.length} polls within the deadline, backing off`);
    const answer = await until('the cancel answer', 15_000, () => cancelAnswerOf(id));
    assert.equal(vertex.requestsTo('cancel').length, 1, 'the cancel reached Vertex');
    assert.deepEqual(vertexOperation(op.operation_id)?.result, { error: { code: 1, message: 'CANCELLED' } });
    // Vertex took the cancel; reading the operation after it was refused like every poll, which the record says.
    assert.match(answer, /^cancel failed \(provider_permission_denied\)/);
    assert.doesNotMatch(answer, /aiplatform|test-project/);
    assert.deepEqual(await ledgerOf(vstack, id), [
      ['charge', -FAST_VIDEO_MICRO_EUR],
      ['refund', FAST_VIDEO_MICRO_EUR],
    ]);
    assert.equal(await balanceMicro(vstack, c.workspaceId), 5_000_000);
  });

  test('a final poll error (404, the operation unknown): the job fails refunded, its operation is cancelled at Vertex first, the answer recorded', async () => {
    vertex.scenario = { pollsUntilDone: 5 };
    vertex.fault({ route: 'fetchPredictOperation', status: 404, body: googleError(404, 'Operation not found.') });
    const c = await newCustomer(vstack, 5);
    const id = await createJob(vstack, c.key, fastJob);
    const op = await waitSubmitted(vstack, id);
    const { job } = await watchJob(vstack, c.key, id, 20_000, 100);
    assert.equal(job.status, 'failed', JSON.stringify(job));
    assert.equal(job.error.code, 'not_found');
    assert.equal(job.refunded_in_euro, 0.8);
    assert.equal(vertex.requestsTo('cancel').length, 1, 'the cancel reached Vertex');
    assert.deepEqual(vertexOperation(op.operation_id)?.result, { error: { code: 1, message: 'CANCELLED' } });
    assert.match((await cancelAnswerOf(id)) ?? '', /^Vertex AI: cancellation accepted before the operation finished/);
    assert.equal(await balanceMicro(vstack, c.workspaceId), 5_000_000);
  });

  test('the copy of a finished output refused 403 once: copied again, delivered and charged (not refunded)', async () => {
    vertex.scenario = { pollsUntilDone: 0 };
    vertex.fault({ route: 'download', status: 403, body: googleError(403, 'does not have storage.objects.get access') });
    const c = await newCustomer(vstack, 5);
    const id = await createJob(vstack, c.key, fastJob);
    const { job } = await watchJob(vstack, c.key, id, 20_000, 100);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos.length, 1);
    assert.equal(vertex.requestsTo('download').length, 2, 'refused once, then copied');
    assert.deepEqual(await ledgerOf(vstack, id), [['charge', -FAST_VIDEO_MICRO_EUR]]);
  });
});
