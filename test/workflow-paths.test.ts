// Workflow paths that need their own configuration: the job deadline, a history that stays the same size
// however long the provider takes, and creates no worker confirms in time (bounded acceptance).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from './helpers/stack.js';
import { JOB_STATUS_SA, OPERATION_RUNNING, videoJobWorkflowId } from '../workflows/messages.js';
import { providerCalls } from '../src/providers/simulator-usage.js';
import { createStorage, createVideoProviders, startWorker, type RunningWorker } from '../src/runtime.js';
import { createLogger } from '../src/logger.js';
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { createVideoJobActivities } from '../activities/video-job.js';
import { jobIdForIdempotencyKey } from '../src/services/video-jobs.js';
import { chargeDirect, directInput, startDirect } from './helpers/direct-start.js';
import { settleVideoJob } from '../src/billing/video-job-billing.js';
import { PATCH_DECIDE_WHEN_LATE, PATCH_STATUS_AT_START, PATCH_SUBMIT_WITHIN_AWAIT } from '../workflows/video-job.js';

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

describe('polling costs no history', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { VIDEO_POLL_INTERVAL_MS: '50', VIDEO_POLL_MAX_INTERVAL_MS: '50' } });
  });
  after(async () => {
    await stack.stop();
  });

  /** The job's whole history: the record says succeeded once settled, its workflow closes a task later. */
  const eventsOf = async (jobId: string) => {
    const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobId));
    await handle.result();
    return (await handle.fetchHistory()).events!;
  };

  test('a job polled many times has as many history events as one polled once; status answers meanwhile; billed once', async () => {
    const c = await newCustomer(stack, 5);
    const quick = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0, videos: 1 }) });
    assert.equal(quick.status, 202);
    assert.equal((await waitForJob(stack, c.key, quick.body.id)).status, 'succeeded');

    const polls_before = await providerCalls(stack.db, 'video_poll');
    const slow = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 5_000, videos: 1 }) });
    assert.equal(slow.status, 202);
    const mid = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${slow.body.id}`, { token: c.key });
    assert.equal(mid.body.status, 'pending');
    const job = await waitForJob(stack, c.key, slow.body.id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.cost_in_euro, 0.2);
    assert.equal(job.refunded_in_euro, 0.2);
    const polls = (await providerCalls(stack.db, 'video_poll')) - polls_before;
    // Polled in the worker every 50 ms: far more often than activity retries could (the server runs those
    // on its timer queue, about one a second at best).
    assert.ok(polls >= 20, `the provider was polled ${polls} times`);

    const quickEvents = await eventsOf(quick.body.id);
    const slowEvents = await eventsOf(slow.body.id);
    // Workflow tasks vary by timing (an activity finishing during a task makes one more); what a poll
    // would add (activity and timer events) must not be there.
    const notWorkflowTasks = (events: typeof quickEvents) =>
      events.filter((e) => !e.workflowTaskScheduledEventAttributes && !e.workflowTaskStartedEventAttributes && !e.workflowTaskCompletedEventAttributes).length;
    assert.equal(notWorkflowTasks(slowEvents), notWorkflowTasks(quickEvents), `${slowEvents.length} events after ${polls} polls vs ${quickEvents.length}`);
    assert.ok(slowEvents.length <= 40, `${slowEvents.length} events`);
    assert.ok(!slowEvents.some((e) => e.workflowExecutionContinuedAsNewEventAttributes), 'no continue-as-new needed');
    assert.ok(slowEvents.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch'), 'the new path is marked by its patch');
    // One attempt of the awaiting activity did every poll: none was a Temporal retry.
    const awaiting = slowEvents.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'submitAndAwaitVideoGeneration');
    assert.ok(awaiting?.activityTaskScheduledEventAttributes?.heartbeatTimeout, 'the awaiting activity heartbeats');
    const started = slowEvents.find((e) => e.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === awaiting!.eventId!.toString());
    assert.equal(started?.activityTaskStartedEventAttributes?.attempt, 1, `${polls} polls in one attempt`);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * 200_000);
    const refunds = await stack.db.query("SELECT count(*)::int AS n FROM ledger_entries WHERE video_job_id = $1 AND kind = 'refund'", [slow.body.id]);
    assert.equal(refunds.rows[0].n, 1);
    await assertAuditHolds(stack);
  });
});

describe('the workers\' poller', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { VIDEO_POLL_INTERVAL_MS: '200', VIDEO_POLL_MAX_INTERVAL_MS: '200', WORKER_MAX_CONCURRENT_POLLS: '1' } });
  });
  after(async () => {
    await stack.stop();
  });

  test('one poll at a time awaits many jobs, each a row until its attempt is completed by its task token, never retried', async () => {
    const c = await newCustomer(stack, 5);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 1_500, videos: 1 }) });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      ids.push(created.body.id);
    }
    // Pending, each job is a row of video_job_awaits (waiting for a poll slot, since there is one), written
    // by the statement that records the job's operation: a row always names the job's recorded operation.
    for (let i = 0; ; i++) {
      const r = await stack.db.query<{ n: number; mismatched: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE j.operation_id IS DISTINCT FROM a.operation_id)::int AS mismatched
           FROM video_job_awaits a JOIN video_jobs j ON j.id = a.job_id WHERE a.job_id = ANY($1::uuid[])`,
        [ids],
      );
      assert.equal(r.rows[0]!.mismatched, 0, 'a row names an operation the job did not record');
      if (r.rows[0]!.n > 0) break;
      assert.ok(i < 100, 'no job was ever awaited by the poller');
      await new Promise((res) => setTimeout(res, 20));
    }
    for (const id of ids) {
      const job = await waitForJob(stack, c.key, id);
      assert.equal(job.status, 'succeeded');
      const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(id));
      await handle.result();
      const events = (await handle.fetchHistory()).events!;
      assert.ok(!events.some((e) => e.activityTaskStartedEventAttributes && e.activityTaskStartedEventAttributes.attempt! > 1), 'no attempt was retried');
      assert.ok(events.length <= 40, `${events.length} events`);
    }
    const left = await stack.db.query('SELECT count(*)::int AS n FROM video_job_awaits WHERE job_id = ANY($1::uuid[])', [ids]);
    assert.equal(left.rows[0].n, 0, 'every row goes with its completed attempt');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 6 * 200_000);
    await assertAuditHolds(stack);
  });

  test('an awaiting attempt scheduled without a heartbeat timeout (by a 0.5.x run) polls once: "still running" while it runs, the status once done, no row', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 3_000, videos: 1 }) });
    assert.equal(created.status, 202);
    const job_id: string = created.body.id;
    let operation_id: string | null = null;
    for (let i = 0; !operation_id; i++) {
      assert.ok(i < 250, 'the job never recorded its operation');
      await new Promise((res) => setTimeout(res, 20));
      operation_id = (await stack.db.query('SELECT operation_id FROM video_jobs WHERE id = $1', [job_id])).rows[0]?.operation_id ?? null;
    }
    // The activity as 0.5.x runs scheduled it: no heartbeat timeout (MockActivityEnvironment's default info).
    const activities = createVideoJobActivities({ db: stack.db, storage: createStorage(stack.config), videoProviders: createVideoProviders(stack.db, stack.config), logger: createLogger('silent', 'test') });
    const env = new MockActivityEnvironment();
    const input = { backend: 'simulator', job_id, operation_id, poll_interval_ms: 200, poll_max_interval_ms: 200 };
    await assert.rejects(env.run(activities.awaitVideoGeneration, input), (err: unknown) => {
      assert.ok(err instanceof ApplicationFailure, String(err));
      assert.equal(err.type, OPERATION_RUNNING);
      assert.equal(err.nonRetryable, false);
      return true;
    });
    const job = await waitForJob(stack, c.key, job_id);
    assert.equal(job.status, 'succeeded');
    const status = (await env.run(activities.awaitVideoGeneration, input)) as { state: string };
    assert.equal(status.state, 'succeeded');
    const rows = await stack.db.query('SELECT count(*)::int AS n FROM video_job_awaits WHERE job_id = $1', [job_id]);
    assert.equal(rows.rows[0].n, 0);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 200_000);
    await assertAuditHolds(stack);
  });
});

describe('the submitting activities of earlier releases\' runs', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.stop();
  });
  const activitiesOf = (s: Stack) =>
    createVideoJobActivities({ db: s.db, storage: createStorage(s.config), videoProviders: createVideoProviders(s.db, s.config), logger: createLogger('silent', 'test') });
  /** The job has no workflow to settle it: settled here (failed, refunded in full), so the ledger balances. */
  const settleByHand = async (job_id: string, workspace_id: string) => {
    const settled = await settleVideoJob(stack.db, { jobId: job_id, outcome: 'failed', delivered: 0, videos: [], error: { code: 'test', message: 'settled by the test' }, completed_at_ms: Date.now() });
    assert.equal(settled.refunded_micro_eur, 200_000);
    assert.equal(await balanceMicro(stack, workspace_id), 5_000_000);
    await assertAuditHolds(stack);
  };

  test('0.2.0\'s submit activity submits once and records the operation it returns', async () => {
    const c = await newCustomer(stack, 5);
    const input = directInput(c.workspaceId, randomUUID(), { accept_by_ms: Date.now() + 60_000 });
    assert.equal((await chargeDirect(stack.db, input)).ok, true);
    const request = { request_id: input.job_id, model: input.model, prompt: input.prompt, params: input.params, parameters: { simulate: { delay_ms: 60_000 } } };
    const submits_before = await providerCalls(stack.db, 'video_submit');
    const submitted = (await new MockActivityEnvironment().run(activitiesOf(stack).submitVideoGeneration, { backend: 'simulator', request })) as { operation_id: string };
    assert.equal(await providerCalls(stack.db, 'video_submit'), submits_before + 1);
    const job = await stack.db.query('SELECT operation_id FROM video_jobs WHERE id = $1', [input.job_id]);
    assert.equal(job.rows[0].operation_id, submitted.operation_id);
    await settleByHand(input.job_id, c.workspaceId);
  });

  test('0.5.x\'s awaiting activity: its first attempt submits and records the operation, no row, "still running"; a later attempt polls the recorded operation and never submits again', async () => {
    const c = await newCustomer(stack, 5);
    // A charged job whose run has not submitted yet (no workflow: the activity is run here, as a 0.5.x run
    // schedules it, without a heartbeat timeout).
    const input = directInput(c.workspaceId, randomUUID(), { accept_by_ms: Date.now() + 60_000 });
    assert.equal((await chargeDirect(stack.db, input)).ok, true);
    const activities = activitiesOf(stack);
    const request = { request_id: input.job_id, model: input.model, prompt: input.prompt, params: input.params, parameters: { simulate: { delay_ms: 60_000 } } };
    const args = { backend: 'simulator', request, poll_interval_ms: 200, poll_max_interval_ms: 200 };
    const stillRunning = (err: unknown) => {
      assert.ok(err instanceof ApplicationFailure, String(err));
      assert.equal(err.type, OPERATION_RUNNING);
      return true;
    };
    const submits_before = await providerCalls(stack.db, 'video_submit');
    await assert.rejects(new MockActivityEnvironment({ attempt: 1 }).run(activities.submitAndAwaitVideoGeneration, args), stillRunning);
    assert.equal(await providerCalls(stack.db, 'video_submit'), submits_before + 1);
    const job = await stack.db.query('SELECT operation_id FROM video_jobs WHERE id = $1', [input.job_id]);
    assert.match(job.rows[0].operation_id ?? '', /^simop_/, 'the first attempt recorded the operation it submitted');
    const rows = await stack.db.query('SELECT count(*)::int AS n FROM video_job_awaits WHERE job_id = $1', [input.job_id]);
    assert.equal(rows.rows[0].n, 0);
    const polls_before = await providerCalls(stack.db, 'video_poll');
    await assert.rejects(new MockActivityEnvironment({ attempt: 2 }).run(activities.submitAndAwaitVideoGeneration, args), stillRunning);
    assert.equal(await providerCalls(stack.db, 'video_submit'), submits_before + 1, 'a later attempt never submits again');
    assert.equal(await providerCalls(stack.db, 'video_poll'), polls_before + 1);
    await settleByHand(input.job_id, c.workspaceId);
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
    const keyed = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers: { 'Idempotency-Key': 'k-503' } });
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
    while ((await stack.db.query('SELECT count(*)::int AS n FROM video_job_refusals WHERE workspace_id = $1', [c.workspaceId])).rows[0].n < 2) {
      assert.ok(Date.now() < wait_ms, 'both late attempts are refused for good');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    assert.equal((await stack.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE workspace_id = $1', [c.workspaceId])).rows[0].n, 0);

    // The client retries with the same key: a new attempt, accepted and charged once.
    const retried = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers: { 'Idempotency-Key': 'k-503' } });
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
    assert.ok(
      events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'decideVideoJobAcceptance'),
      `the late run decided its attempt (patch ${PATCH_DECIDE_WHEN_LATE})`,
    );

    const never = directInput(c.workspaceId, randomUUID(), { accept_by_ms: Date.now() - 1 });
    const refused = (await (await startDirect(stack, never)).result()) as { status: string };
    assert.equal(refused.status, 'not_accepted');
    assert.equal((await stack.db.query("SELECT count(*)::int AS n FROM video_job_refusals WHERE job_id = $1 AND reason = 'not_accepted_in_time'", [never.job_id])).rows[0].n, 1);
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
    events.flatMap((e) => (e.upsertWorkflowSearchAttributesEventAttributes ? [Object.keys(e.upsertWorkflowSearchAttributesEventAttributes.searchAttributes?.indexedFields ?? {}).join(',')] : []));
  /** The ids of the history's patch markers. */
  const patchesOf = (events: Events) =>
    events
      .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')
      .map((e) => {
        const data = e.markerRecordedEventAttributes!.details!['patch-data']!.payloads![0]!.data!;
        return (JSON.parse(typeof data === 'string' ? Buffer.from(data, 'base64').toString() : Buffer.from(data).toString()) as { id: string }).id;
      });

  // 0.5.0: the API starts the run "pending"; an accepted job then upserts only its patch's version, and its
  // final status when it settles (one history event and one visibility write fewer per create).
  test('is "pending" from the start of an accepted job, which upserts none until it settles; a run started "charging" upserts "pending" as 0.4.0 did', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 3_000 }) });
    assert.equal(created.status, 202);
    const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id));
    assert.equal((await handle.describe()).typedSearchAttributes.get(JOB_STATUS_SA), 'pending', 'while the job runs');
    await handle.result();
    const events = (await handle.fetchHistory()).events!;
    assert.deepEqual(upserts(events), ['TemporalChangeVersion', 'VideoJobStatus'], 'the version on acceptance, the status once settled');
    assert.deepEqual(patchesOf(events), [PATCH_STATUS_AT_START]);
    assert.equal((await handle.describe()).typedSearchAttributes.get(JOB_STATUS_SA), 'succeeded');

    // As 0.4.0's API started it: the run upserts "pending" once charged, and marks the submit's patch.
    const old = directInput(c.workspaceId, randomUUID(), { accept_by_ms: Date.now() + 30_000 });
    const oldRun = await startDirect(stack, old, undefined, 'charging');
    assert.equal(((await oldRun.result()) as { status: string }).status, 'succeeded');
    const oldEvents = (await oldRun.fetchHistory()).events!;
    assert.deepEqual(upserts(oldEvents), ['VideoJobStatus', 'TemporalChangeVersion', 'VideoJobStatus']);
    assert.deepEqual(patchesOf(oldEvents), [PATCH_SUBMIT_WITHIN_AWAIT]);

    // A refused attempt's run ends with its refusal as its status.
    const poor = await newCustomer(stack, 0.1);
    const refused = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: poor.key, json: simJob(), headers: { 'Idempotency-Key': 'poor-1' } });
    assert.equal(refused.status, 402, JSON.stringify(refused.body));
    const refusedRun = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(jobIdForIdempotencyKey(poor.workspaceId, 'poor-1')));
    assert.equal(((await refusedRun.result()) as { status: string }).status, 'rejected');
    assert.equal((await refusedRun.describe()).typedSearchAttributes.get(JOB_STATUS_SA), 'rejected');
    await assertAuditHolds(stack);
  });
});
