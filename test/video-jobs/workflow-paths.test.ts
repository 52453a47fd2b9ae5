// Workflow paths that need their own configuration: the job deadline, a history that stays the same size
// however long the provider takes, the poller and provider callbacks, submission and its fallback,
// cancellation by a provider that bills the operation it had started (one that does not bill is the
// cancel of lifecycle.test.ts), and creates no worker confirms in time (bounded acceptance).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { JOB_STATUS_SA, videoJobWorkflowId } from '../../workflows/messages.js';
import { providerCalls } from '../../src/providers/simulator-usage.js';
import { createStorage } from '../../src/runtime/storage.js';
import { createVideoProviders } from '../../src/runtime/providers.js';
import { startWorker, type RunningWorker } from '../../src/runtime/worker.js';
import { createLogger } from '../../src/logger.js';
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { ActivityFailure, ApplicationFailure, RetryState, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { createVideoJobActivities } from '../../activities/video-job.js';
import { jobIdForIdempotencyKey } from '../../src/video-jobs/service.js';
import { chargeDirect, directInput, startDirect } from '../helpers/direct-start.js';
import { settleVideoJob, type SettlementResult } from '../../src/video-jobs/billing.js';
import { readVideoJob } from '../../src/video-jobs/records.js';
import { nudgePoll, reschedulePolls } from '../../src/video-jobs/operation-polls.js';
import { ProviderError, type VideoProvider } from '../../src/providers/video/types.js';
import { submissionEnd } from '../../workflows/video-job.js';

describe('deadline', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { VIDEO_JOB_TIMEOUT_MS: '1500' } });
  });
  after(async () => {
    await stack.stop();
  });

  test('a job not finished by its deadline fails and is refunded in full', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 60_000 }) });
    assert.equal(created.status, 202);
    assert.equal(await balanceMicro(stack, c.workspaceId), 4_600_000);
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'failed');
    assert.equal(job.error.code, 'deadline_exceeded');
    assert.equal(job.refunded_in_euro, 0.4);
    assert.equal(job.cost_in_euro, 0);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    await assertAuditHolds(stack);
  });
});

test("a failed submission ends the job at its deadline only when the deadline ended it; a lost attempt's timeout is not the deadline", () => {
  const ended = (retryState: RetryState, cause: Error) =>
    submissionEnd(new ActivityFailure('activity failed', 'submitVideoJob', '7', retryState, 'worker', cause));
  const timeout = (type: TimeoutType) => new TimeoutFailure(`activity ${type} timeout`, undefined, type);
  // The time left to the deadline ran out, or did not leave room for another attempt.
  assert.equal(ended(RetryState.TIMEOUT, timeout(TimeoutType.SCHEDULE_TO_CLOSE)), 'deadline');
  assert.equal(ended(RetryState.TIMEOUT, timeout(TimeoutType.HEARTBEAT)), 'deadline');
  // Every attempt was lost (each retried within the deadline until the last): a failed submission.
  assert.equal(ended(RetryState.MAXIMUM_ATTEMPTS_REACHED, timeout(TimeoutType.HEARTBEAT)), 'failed');
  assert.equal(ended(RetryState.MAXIMUM_ATTEMPTS_REACHED, timeout(TimeoutType.START_TO_CLOSE)), 'failed');
  // An attempt lost after the job's cancel was requested, which Temporal does not retry: the cancel.
  assert.equal(ended(RetryState.CANCEL_REQUESTED, timeout(TimeoutType.HEARTBEAT)), 'lost_after_cancel');
  assert.equal(ended(RetryState.MAXIMUM_ATTEMPTS_REACHED, ApplicationFailure.create({ message: 'rate limited' })), 'failed');
});

describe('waiting for the provider costs no history', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { VIDEO_POLL_INTERVAL_MS: '50', VIDEO_POLL_MAX_INTERVAL_MS: '50' } });
  });
  after(async () => {
    await stack.stop();
  });

  /** The job's whole history, once its workflow has closed. */
  const eventsOf = async (jobId: string) => {
    const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId));
    await handle.result();
    return (await handle.fetchHistory()).events!;
  };

  test('a job polled many times has the history of one polled once (at most 30 events); status answers meanwhile; billed once', async () => {
    const c = await newCustomer(stack, 5);
    const quick = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0, videos: 1 }) });
    assert.equal(quick.status, 202);
    assert.equal((await waitForJob(stack, c.key, quick.body.id)).status, 'succeeded');

    const polls_before = await providerCalls(stack.db, 'video_poll');
    const slow = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ delay_ms: 3_000, videos: 1 }),
    });
    assert.equal(slow.status, 202);
    const mid = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${slow.body.id}`, { token: c.key });
    assert.equal(mid.body.status, 'pending');
    const job = await waitForJob(stack, c.key, slow.body.id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.backend, 'simulator');
    assert.equal(job.cost_in_euro, 0.2);
    assert.equal(job.refunded_in_euro, 0.2);
    const polls = (await providerCalls(stack.db, 'video_poll')) - polls_before;
    assert.ok(polls >= 20, `the provider was polled ${polls} times`);

    const quickEvents = await eventsOf(quick.body.id);
    const slowEvents = await eventsOf(slow.body.id);
    // Workflow tasks vary by timing; what a poll would add (activity or timer events) must not be there.
    const notWorkflowTasks = (events: typeof quickEvents) =>
      events.filter(
        (e) => !e.workflowTaskScheduledEventAttributes && !e.workflowTaskStartedEventAttributes && !e.workflowTaskCompletedEventAttributes,
      ).length;
    assert.equal(
      notWorkflowTasks(slowEvents),
      notWorkflowTasks(quickEvents),
      `${slowEvents.length} events after ${polls} polls vs ${quickEvents.length}`,
    );
    assert.ok(slowEvents.length <= 30, `${slowEvents.length} events`);
    assert.equal(slowEvents.filter((e) => e.workflowExecutionSignaledEventAttributes).length, 1, 'told once that the operation ended');
    assert.ok(!slowEvents.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch'), 'one path: no patch markers');
    assert.ok(
      !slowEvents.some((e) => e.activityTaskStartedEventAttributes && e.activityTaskStartedEventAttributes.attempt! > 1),
      'no activity was retried',
    );
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * 200_000);
    const refunds = await stack.db.query("SELECT count(*)::int AS n FROM ledger_entries WHERE video_job_id = $1 AND kind = 'refund'", [
      slow.body.id,
    ]);
    assert.equal(refunds.rows[0].n, 1);
    await assertAuditHolds(stack);
  });
});

describe("the workers' poller", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      env: { VIDEO_POLL_INTERVAL_MS: '200', VIDEO_POLL_MAX_INTERVAL_MS: '200', WORKER_MAX_CONCURRENT_POLLS: '1' },
    });
  });
  after(async () => {
    await stack.stop();
  });

  test('one poll at a time serves many jobs, each a row naming its recorded operation until it settles', async () => {
    const c = await newCustomer(stack, 5);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: c.key,
        json: simJob({ delay_ms: 1_500, videos: 1 }),
      });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      ids.push(created.body.id);
    }
    for (let i = 0; ; i++) {
      const r = await stack.db.query<{ n: number; mismatched: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE j.operation_id IS DISTINCT FROM p.operation_id OR j.backend IS DISTINCT FROM p.backend)::int AS mismatched
           FROM video_job_polls p JOIN video_jobs j ON j.id = p.job_id WHERE p.job_id = ANY($1::uuid[])`,
        [ids],
      );
      assert.equal(r.rows[0]!.mismatched, 0, 'a row names an operation the job did not record');
      if (r.rows[0]!.n > 0) break;
      assert.ok(i < 100, 'no job was ever a row of the poller');
      await new Promise((res) => setTimeout(res, 20));
    }
    for (const id of ids) assert.equal((await waitForJob(stack, c.key, id)).status, 'succeeded');
    const left = await stack.db.query('SELECT count(*)::int AS n FROM video_job_polls WHERE job_id = ANY($1::uuid[])', [ids]);
    assert.equal(left.rows[0].n, 0, 'every row goes with its settlement');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 6 * 200_000);
    await assertAuditHolds(stack);
  });

  test("polls rescheduled together in one statement each move their own job's progress, never back", async () => {
    const c = await newCustomer(stack, 5);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: c.key,
        json: simJob({ delay_ms: 60_000, videos: 1 }),
      });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      ids.push(created.body.id);
    }
    const [a, b] = ids as [string, string];
    for (let i = 0; ; i++) {
      const r = await stack.db.query('SELECT count(*)::int AS n FROM video_job_polls WHERE job_id = ANY($1::uuid[])', [ids]);
      if (r.rows[0].n === 2) break;
      assert.ok(i < 250, 'the jobs never became rows of the poller');
      await new Promise((res) => setTimeout(res, 20));
    }
    const read = async () =>
      (
        await stack.db.query<{ id: string; progress: number | null; queue_position: number | null }>(
          'SELECT id, progress, queue_position FROM video_jobs WHERE id = ANY($1::uuid[])',
          [ids],
        )
      ).rows.reduce(
        (m, r) => m.set(r.id, { progress: r.progress, queue_position: r.queue_position }),
        new Map<string, { progress: number | null; queue_position: number | null }>(),
      );
    await reschedulePolls(stack.db, [
      { job_id: a, wait_ms: 200, interval_ms: 200, failures: 0, progress: 40, queue_position: null },
      { job_id: b, wait_ms: 200, interval_ms: 200, failures: 0, progress: null, queue_position: 7 },
    ]);
    let now = await read();
    assert.deepEqual(now.get(a), { progress: 40, queue_position: null });
    assert.deepEqual(now.get(b), { progress: null, queue_position: 7 });
    await reschedulePolls(stack.db, [
      { job_id: a, wait_ms: 200, interval_ms: 200, failures: 0, progress: 25, queue_position: null },
      { job_id: b, wait_ms: 200, interval_ms: 200, failures: 0, progress: 10, queue_position: 3 },
    ]);
    now = await read();
    assert.deepEqual(now.get(a), { progress: 40, queue_position: null }, 'progress never goes back');
    assert.deepEqual(now.get(b), { progress: 10, queue_position: 3 });
    for (const id of ids) {
      const cancelled = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
      assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    }
    for (const id of ids) assert.equal((await waitForJob(stack, c.key, id)).status, 'failed');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    await assertAuditHolds(stack);
  });
});

describe('a provider callback', () => {
  let stack: Stack;
  before(async () => {
    // Polls so rare that only a callback can finish a job within the test.
    stack = await startStack({ env: { VIDEO_POLL_INTERVAL_MS: '600000', VIDEO_POLL_MAX_INTERVAL_MS: '600000' } });
  });
  after(async () => {
    await stack.stop();
  });

  test('makes its job polled at once; a callback for another backend or an unknown job changes nothing', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0, videos: 1 }) });
    assert.equal(created.status, 202);
    const id: string = created.body.id;
    for (let i = 0; !(await readVideoJob(stack.db, id))?.operation_id; i++) {
      assert.ok(i < 200, 'the job never recorded its operation');
      await new Promise((res) => setTimeout(res, 20));
    }
    await new Promise((res) => setTimeout(res, 500));
    assert.equal((await readVideoJob(stack.db, id))!.status, 'pending', 'not polled yet');
    assert.equal(await nudgePoll(stack.db, id, 'vertex'), false, 'the job waits on another backend');
    assert.equal(await nudgePoll(stack.db, randomUUID(), 'simulator'), false, 'no such job');
    const nudged = Date.now();
    assert.equal(await nudgePoll(stack.db, id, 'simulator'), true);
    const job = await waitForJob(stack, c.key, id);
    assert.equal(job.status, 'succeeded');
    assert.ok(Date.now() - nudged < 3_000, `seen ${Date.now() - nudged} ms after the callback`);
    assert.equal(await nudgePoll(stack.db, id, 'simulator'), false, 'a settled job changes nothing');
    await assertAuditHolds(stack);
  });
});

describe('submission', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.stop();
  });

  /** A backend whose every submission is refused with the given error. */
  const refusing = (err: ProviderError): VideoProvider => ({
    name: 'refusing',
    submit: async () => {
      throw err;
    },
    poll: async () => ({ state: 'running' }),
    fetchOutput: async () => Buffer.alloc(0),
    cancel: async () => ({ billed: false, billed_units: 0, ended_units: 0, answer: 'n/a' }),
  });
  const activitiesWith = (extra: Record<string, VideoProvider>) =>
    createVideoJobActivities({
      db: stack.db,
      storage: createStorage(stack.config),
      videoProviders: new Map([...createVideoProviders(stack.db, stack.config), ...Object.entries(extra)]),
      logger: createLogger('silent', 'test'),
      video: { pollIntervalMs: 60_000, pollIntervalMsMax: 60_000 },
    });
  const chargedJob = async (workspace_id: string) => {
    const input = directInput(workspace_id, randomUUID(), { accept_by_ms: Date.now() + 60_000 });
    assert.equal((await chargeDirect(stack.db, input)).ok, true);
    const request = {
      request_id: input.job_id,
      model: input.model,
      prompt: input.prompt,
      params: input.params,
      parameters: { simulate: { delay_ms: 60_000 } },
    };
    return { input, request };
  };
  const settleByHand = async (job_id: string) => {
    await settleVideoJob(stack.db, {
      jobId: job_id,
      outcome: 'failed',
      delivered: 0,
      videos: [],
      error: { code: 'test', message: 'settled by the test' },
      completed_at_ms: Date.now(),
    });
  };

  test('submits once and records the operation with its poll row; a retried attempt finds it and never submits again', async () => {
    const c = await newCustomer(stack, 5);
    const { input, request } = await chargedJob(c.workspaceId);
    const activities = activitiesWith({});
    const submits_before = await providerCalls(stack.db, 'video_submit');
    const first = (await new MockActivityEnvironment({ attempt: 1 }).run(activities.submitVideoJob, {
      request,
      backends: ['simulator'],
      max_attempts: 5,
    })) as { operation_id: string; backend: string };
    assert.equal(first.backend, 'simulator');
    const again = (await new MockActivityEnvironment({ attempt: 2 }).run(activities.submitVideoJob, {
      request,
      backends: ['simulator'],
      max_attempts: 5,
    })) as { operation_id: string };
    assert.equal(again.operation_id, first.operation_id);
    assert.equal(await providerCalls(stack.db, 'video_submit'), submits_before + 1, 'submitted once');
    const row = await stack.db.query(
      'SELECT p.operation_id, j.operation_id AS recorded FROM video_job_polls p JOIN video_jobs j ON j.id = p.job_id WHERE p.job_id = $1',
      [input.job_id],
    );
    assert.equal(row.rows[0].operation_id, first.operation_id);
    assert.equal(row.rows[0].recorded, first.operation_id);
    await settleByHand(input.job_id);
    assert.equal(
      (await stack.db.query('SELECT count(*)::int AS n FROM video_job_polls WHERE job_id = $1', [input.job_id])).rows[0].n,
      0,
      'settlement removes the row',
    );
    await assertAuditHolds(stack);
  });

  test('a passing refusal of the first backend sends the job to the next; a final refusal fails it', async () => {
    const c = await newCustomer(stack, 5);
    const busy = refusing(new ProviderError('rate limited', { code: 'rate_limited', retryable: true, retry_after_ms: 1_000 }));
    const final = refusing(new ProviderError('the prompt is refused', { code: 'invalid_request', retryable: false }));
    const activities = activitiesWith({ busy, final });
    const passing = await chargedJob(c.workspaceId);
    const moved = (await new MockActivityEnvironment().run(activities.submitVideoJob, {
      request: passing.request,
      backends: ['busy', 'simulator'],
      max_attempts: 5,
    })) as { backend: string };
    assert.equal(moved.backend, 'simulator');
    assert.equal((await readVideoJob(stack.db, passing.input.job_id))!.backend, 'simulator', 'the job says which backend ran it');
    await settleByHand(passing.input.job_id);

    const refused = await chargedJob(c.workspaceId);
    await assert.rejects(
      new MockActivityEnvironment().run(activities.submitVideoJob, {
        request: refused.request,
        backends: ['final', 'simulator'],
        max_attempts: 5,
      }),
      (err: unknown) => {
        assert.ok(err instanceof ApplicationFailure, String(err));
        assert.equal(err.nonRetryable, true);
        assert.equal(err.message, 'the prompt is refused');
        return true;
      },
    );
    await assert.rejects(
      new MockActivityEnvironment().run(activities.submitVideoJob, { request: refused.request, backends: ['busy'], max_attempts: 5 }),
      (err: unknown) => {
        assert.ok(err instanceof ApplicationFailure);
        assert.equal(err.nonRetryable, false, 'retried by Temporal, after the Retry-After');
        assert.equal(err.nextRetryDelay, 1_000);
        return true;
      },
    );
    await settleByHand(refused.input.job_id);
    await assertAuditHolds(stack);
  });

  test('a submission that ended without an answer of its own is refunded in full and its recorded operation cancelled', async () => {
    const c = await newCustomer(stack, 5);
    const { input, request } = await chargedJob(c.workspaceId);
    const activities = activitiesWith({});
    // An attempt recorded the operation; its answer never reached the workflow (the last attempt was lost with its worker).
    const { operation_id } = (await new MockActivityEnvironment({ attempt: 1 }).run(activities.submitVideoJob, {
      request,
      backends: ['simulator'],
      max_attempts: 5,
    })) as { operation_id: string };
    const settled = (await new MockActivityEnvironment().run(activities.settleVideoJob, {
      jobId: input.job_id,
      outcome: 'failed' as const,
      delivered: 0,
      videos: [],
      error: { code: 'submit_failed', message: 'the video provider could not be reached' },
      completed_at_ms: Date.now(),
    })) as SettlementResult;
    assert.equal(settled.status, 'failed');
    assert.equal(settled.cost_micro_eur, 0);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    const op = await stack.db.query('SELECT cancelled_at FROM simulator.video_operations WHERE id = $1', [operation_id]);
    assert.notEqual(op.rows[0].cancelled_at, null, 'the operation nobody waits for was cancelled at the provider');
    assert.match(
      (await stack.db.query('SELECT cancel_answer FROM video_jobs WHERE id = $1', [input.job_id])).rows[0].cancel_answer,
      /^cancelled; not billed/,
    );
    await assertAuditHolds(stack);
  });
});

describe('cancellation', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.stop();
  });

  const submitted = async (key: string, simulate: Record<string, unknown>) => {
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: key, json: simJob(simulate) });
    assert.equal(created.status, 202);
    for (let i = 0; !(await readVideoJob(stack.db, created.body.id))?.operation_id; i++) {
      assert.ok(i < 200, 'the job never recorded its operation');
      await new Promise((res) => setTimeout(res, 20));
    }
    return created.body.id as string;
  };

  test('a provider that bills the operation it had started: the charge is kept, nothing delivered', async () => {
    const c = await newCustomer(stack, 5);
    const id = await submitted(c.key, { delay_ms: 60_000, billed_on_cancel: true });
    const r = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'failed');
    assert.equal(r.body.error.code, 'cancelled');
    assert.equal(r.body.cost_in_euro, 0.4);
    assert.equal(r.body.refunded_in_euro, 0);
    assert.deepEqual(r.body.videos, []);
    const rec = await stack.db.query('SELECT cancel_billed, cancel_answer FROM video_jobs WHERE id = $1', [id]);
    assert.equal(rec.rows[0].cancel_billed, true);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 400_000);
    await assertAuditHolds(stack);
  });
});

describe('no worker running', () => {
  let stack: Stack;
  let worker: RunningWorker | null = null;
  before(async () => {
    stack = await startStack({ worker: false, env: { VIDEO_CREATE_TIMEOUT_MS: '3000' } });
  });
  after(async () => {
    await worker?.shutdown();
    await stack.stop();
  });

  test('a create no worker confirms in time is a 503 that never charges, also once a worker returns; a retry with its key is accepted', async () => {
    const c = await newCustomer(stack, 5);
    const started = Date.now();
    const keyed = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob(),
      headers: { 'Idempotency-Key': 'k-503' },
    });
    assert.equal(keyed.status, 503, JSON.stringify(keyed.body));
    assert.ok(Date.now() - started < 10_000);
    assert.equal(keyed.body.error.code, 'temporarily_unavailable');
    assert.match(keyed.body.error.message, /nothing was charged/);
    assert.equal(keyed.headers.get('retry-after'), '5');
    const unkeyed = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob() });
    assert.equal(unkeyed.status, 503);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);

    // A worker comes back: the two runs waiting for it start late, refuse to charge, and never reach the provider.
    const submits_before = await providerCalls(stack.db, 'video_submit');
    const logger = createLogger('silent', 'test');
    worker = await startWorker({ config: stack.config, db: stack.db, temporalAddress: stack.config.temporal.address!, logger });
    const jobId = jobIdForIdempotencyKey(c.workspaceId, 'k-503');
    const late = (await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId)).result()) as { status: string };
    assert.equal(late.status, 'not_accepted');
    const wait_ms = Date.now() + 5_000;
    while (
      (await stack.db.query('SELECT count(*)::int AS n FROM video_job_refusals WHERE workspace_id = $1', [c.workspaceId])).rows[0].n < 2
    ) {
      assert.ok(Date.now() < wait_ms, 'both late attempts are refused for good');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    assert.equal((await stack.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE workspace_id = $1', [c.workspaceId])).rows[0].n, 0);

    // The client retries with the same key: a new attempt, accepted and charged once.
    const retried = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob(),
      headers: { 'Idempotency-Key': 'k-503' },
    });
    assert.equal(retried.status, 202, JSON.stringify(retried.body));
    assert.equal(retried.body.id, jobId);
    assert.equal((await waitForJob(stack, c.key, jobId)).status, 'succeeded');
    assert.equal((await providerCalls(stack.db, 'video_submit')) - submits_before, 1, 'only the accepted attempt reached the provider');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * 200_000);
    await assertAuditHolds(stack);
  });
});

describe('a run whose charge step starts late', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.stop();
  });

  // A worker charged the attempt, then froze past its workflow task's timeout: the task runs again after
  // the acceptance deadline, while the API (which found the charge) has answered 202.
  test('finds its attempt charged and goes on: the job succeeds, charged once; an attempt never charged is refused for good', async () => {
    const c = await newCustomer(stack, 5);
    const charged = directInput(c.workspaceId, randomUUID(), { accept_by_ms: Date.now() + 60_000 });
    const r = await chargeDirect(stack.db, charged);
    assert.ok(r.ok && !r.already_charged);
    const late = await startDirect(stack, { ...charged, accept_by_ms: Date.now() - 1 });
    const done = (await late.result()) as { status: string };
    assert.equal(done.status, 'succeeded');
    const events = (await late.fetchHistory()).events!;
    // Local activities are recorded as markers whose data names the activity type.
    const localActivities = events
      .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity')
      .map((e) => {
        const data = e.markerRecordedEventAttributes!.details!['data']!.payloads![0]!.data!;
        return (
          JSON.parse(typeof data === 'string' ? Buffer.from(data, 'base64').toString() : Buffer.from(data).toString()) as {
            activity_type: string;
          }
        ).activity_type;
      });
    assert.ok(localActivities.includes('decideVideoJobAcceptance'), `the late run decided its attempt (${localActivities.join(', ')})`);
    assert.ok(!localActivities.includes('chargeVideoJob'), 'and never charged');

    const never = directInput(c.workspaceId, randomUUID(), { accept_by_ms: Date.now() - 1 });
    const refused = (await (await startDirect(stack, never)).result()) as { status: string };
    assert.equal(refused.status, 'not_accepted');
    assert.equal(
      (
        await stack.db.query("SELECT count(*)::int AS n FROM video_job_refusals WHERE job_id = $1 AND reason = 'not_accepted_in_time'", [
          never.job_id,
        ])
      ).rows[0].n,
      1,
    );
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 200_000, 'charged once, for the job that ran');
    await assertAuditHolds(stack);
  });
});

describe('the job status search attribute', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.stop();
  });

  type Events = NonNullable<Awaited<ReturnType<ReturnType<Stack['api']['temporal']['workflow']['getHandle']>['fetchHistory']>>['events']>;
  /** The search attributes each upsert of the history set, in order (their names). */
  const upserts = (events: Events) =>
    events.flatMap((e) =>
      e.upsertWorkflowSearchAttributesEventAttributes
        ? [Object.keys(e.upsertWorkflowSearchAttributesEventAttributes.searchAttributes?.indexedFields ?? {}).join(',')]
        : [],
    );

  test('is "pending" from the start of an accepted job, which upserts only its final status; a refused attempt ends with its refusal', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 3_000 }) });
    assert.equal(created.status, 202);
    const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id));
    assert.equal((await handle.describe()).typedSearchAttributes.get(JOB_STATUS_SA), 'pending', 'while the job runs');
    await handle.result();
    const events = (await handle.fetchHistory()).events!;
    assert.deepEqual(upserts(events), ['VideoJobStatus'], 'the status once settled, nothing else');
    assert.equal((await handle.describe()).typedSearchAttributes.get(JOB_STATUS_SA), 'succeeded');

    // A refused attempt's run ends with its refusal as its status. (The API refuses a create it can see
    // the charge would refuse before starting any run: a run refused by its charge is one that raced
    // another create, started here directly.)
    const poor = await newCustomer(stack, 0.1);
    const refusedRun = await startDirect(
      stack,
      directInput(poor.workspaceId, jobIdForIdempotencyKey(poor.workspaceId, 'poor-1'), { sticky_refusal: true }),
    );
    assert.equal(((await refusedRun.result()) as { status: string }).status, 'rejected');
    assert.equal((await refusedRun.describe()).typedSearchAttributes.get(JOB_STATUS_SA), 'rejected');
    await assertAuditHolds(stack);
  });
});
