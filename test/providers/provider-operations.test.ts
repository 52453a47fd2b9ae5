// A provider operation that may have been created is never left running with nobody waiting for it:
// a job past its deadline asks the provider to cancel (fal has no deadline of its own), and a job whose
// workflow was lost and restarted (a recovery run, which starts with the operation but not its backend)
// is cancelled at the provider like any other; a Replicate job whose frames make its answers large
// records every prediction it made. Against the fal and Replicate fakes, with real PostgreSQL and Temporal;
// the provider's requests are counted against the job's charge, and the ledger audit holds after each.
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FalFake } from '../fakes/fal-fake.js';
import { ReplicateFake } from '../fakes/replicate-fake.js';
import { imageField, pngOfSize } from '../helpers/images.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, type Stack } from '../helpers/stack.js';
import { createJob, KLING_VIDEO_MICRO_EUR, klingJob, ledgerOf, providerStack, waitSubmitted, watchJob } from '../helpers/provider-jobs.js';
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

describe('Replicate: a job with a first and a last frame of 7.5 MB each', () => {
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

  test('two videos: the frames are uploaded once each, both predictions are recorded and delivered, charged once; none runs unrecorded', async () => {
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
});
