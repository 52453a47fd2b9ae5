// The worker process killed with SIGKILL mid-job and a new one started: the job completes and
// billing is exact; a job cancelled while its lost submission could only time out ends cancelled. The
// worker runs as a real separate process (`src/worker-main.ts`).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { decodeRetryState, decodeTimeoutType, RetryState, TimeoutType } from '@temporalio/common';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';

let stack: Stack;
const children: ChildProcess[] = [];

before(async () => {
  stack = await startStack({ worker: false });
});
after(async () => {
  killAll(children);
  await stack.stop();
});

/** Only the calling test's workers: those an earlier test started go first. */
async function stopEarlierWorkers(): Promise<void> {
  const earlier = children.splice(0).filter((c) => c.exitCode === null && c.signalCode === null);
  killAll(earlier);
  await Promise.all(earlier.map((c) => new Promise((r) => c.once('exit', r))));
}

test('SIGKILL of the worker mid-job: a new worker finishes the job and billing is exact', async () => {
  const first = await startEntryProcess(stack, 'worker', { track: children });
  const c = await newCustomer(stack, 10);
  // n=3 of which 2 delivered: 3 x 0.2 charged, 0.2 refunded.
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
    token: c.key,
    json: simJob({ delay_ms: 4_000, videos: 2 }, { n: 3 }),
  });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 600_000);

  // Wait until the provider has the operation (charged and submitted), then kill the worker.
  for (let i = 0; ; i++) {
    const op = await stack.db.query('SELECT 1 FROM simulator.video_operations WHERE request_id = $1', [created.body.id]);
    if (op.rowCount === 1) break;
    assert.ok(i < 200, 'job was never submitted');
    await new Promise((r) => setTimeout(r, 50));
  }
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  assert.equal(first.signalCode, 'SIGKILL');

  const pending = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: c.key });
  assert.equal(pending.status, 200);
  assert.equal(pending.body.status, 'pending'); // answered from PostgreSQL while no worker runs

  await startEntryProcess(stack, 'worker', { track: children });
  const job = await waitForJob(stack, c.key, created.body.id, 90_000);
  assert.equal(job.status, 'succeeded');
  assert.equal(job.videos.length, 2);
  assert.equal(job.cost_in_euro, 0.4);
  assert.equal(job.refunded_in_euro, 0.2);
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 400_000);
  const entries = await stack.db.query('SELECT kind, amount_micro_eur FROM ledger_entries WHERE video_job_id = $1 ORDER BY id', [
    created.body.id,
  ]);
  assert.deepEqual(entries.rows, [
    { kind: 'charge', amount_micro_eur: -600_000 },
    { kind: 'refund', amount_micro_eur: 200_000 },
  ]);
  const ops = await stack.db.query('SELECT count(*)::int AS n FROM simulator.video_operations WHERE request_id = $1', [created.body.id]);
  assert.equal(ops.rows[0].n, 1, 'the provider saw one submission');
  await assertAuditHolds(stack);
});

test("a worker stopped (SIGTERM) while its job waits for the provider stops at once; another worker's poller tells the same run", async () => {
  await stopEarlierWorkers();
  const first = await startEntryProcess(stack, 'worker', { track: children });
  const c = await newCustomer(stack, 10);
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
    token: c.key,
    json: simJob({ delay_ms: 6_000, videos: 1 }),
  });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  for (let i = 0; ; i++) {
    const op = await stack.db.query('SELECT 1 FROM simulator.video_operations WHERE request_id = $1', [created.body.id]);
    if (op.rowCount === 1) break;
    assert.ok(i < 200, 'job was never submitted');
    await new Promise((r) => setTimeout(r, 50));
  }
  const stopped_at = Date.now();
  first.kill('SIGTERM');
  await new Promise((r) => first.once('exit', r));
  // The worker's shutdown grace is 20 s: a poller that held on until then would show here.
  assert.ok(Date.now() - stopped_at < 10_000, `the worker took ${Date.now() - stopped_at} ms to stop`);
  assert.equal(first.exitCode, 0);

  await startEntryProcess(stack, 'worker', { track: children });
  const job = await waitForJob(stack, c.key, created.body.id, 60_000);
  assert.equal(job.status, 'succeeded');
  assert.equal(job.videos.length, 1);
  const ops = await stack.db.query('SELECT count(*)::int AS n FROM simulator.video_operations WHERE request_id = $1', [created.body.id]);
  assert.equal(ops.rows[0].n, 1, 'the provider saw one submission');
  // The stopped worker held no state of the job: the new worker's poller signalled the same run (no activity
  // retried or timed out), and the job's row of video_job_polls went with its settlement.
  const events = (await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).fetchHistory()).events!;
  const activityEvents = events.filter(
    (e) =>
      e.activityTaskStartedEventAttributes ||
      e.activityTaskCompletedEventAttributes ||
      e.activityTaskFailedEventAttributes ||
      e.activityTaskTimedOutEventAttributes,
  );
  const retried = events.find((e) => e.activityTaskStartedEventAttributes && e.activityTaskStartedEventAttributes.attempt! > 1);
  assert.equal(retried, undefined, JSON.stringify(activityEvents));
  assert.ok(
    !events.some((e) => e.activityTaskTimedOutEventAttributes || e.activityTaskFailedEventAttributes),
    JSON.stringify(activityEvents),
  );
  const rows = await stack.db.query('SELECT count(*)::int AS n FROM video_job_polls WHERE job_id = $1', [created.body.id]);
  assert.equal(rows.rows[0].n, 0);
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 200_000);
  await assertAuditHolds(stack);
});

test('a job cancelled while its submission is lost with its killed worker is cancelled and refunded, not failed as past its deadline', async () => {
  await stopEarlierWorkers();
  const first = await startEntryProcess(stack, 'worker', { track: children });
  const c = await newCustomer(stack, 5);
  // The simulated provider's submit is held in the middle: its statement waits for the table this test holds.
  const lock = await stack.db.connect();
  let created;
  try {
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE simulator.video_operations IN SHARE MODE');
    created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    for (let i = 0; ; i++) {
      const waiting = await stack.db.query(
        "SELECT 1 FROM pg_locks WHERE relation = 'simulator.video_operations'::regclass AND NOT granted",
      );
      if (waiting.rowCount) break;
      assert.ok(i < 200, 'the submit never reached the provider');
      await new Promise((r) => setTimeout(r, 50));
    }
    // The customer cancels while the submission is in flight; the cancel waits for that attempt to end.
    const cancelling = http(stack.baseUrl, 'POST', `/v2/videos/generations/${created.body.id}/cancel`, { token: c.key });
    const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id));
    for (let i = 0; !(await handle.fetchHistory()).events!.some((e) => e.activityTaskCancelRequestedEventAttributes); i++) {
      assert.ok(i < 200, 'the cancel never reached the submission');
      await new Promise((r) => setTimeout(r, 50));
    }
    // Then the attempt's worker dies: the attempt can only time out, and the provider never got the job.
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    await stack.db.query(
      "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE relation = 'simulator.video_operations'::regclass AND NOT granted",
    );
    await lock.query('ROLLBACK');
    await startEntryProcess(stack, 'worker', { track: children });
    const cancelled = await cancelling;
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  } finally {
    await lock.query('ROLLBACK').catch(() => {});
    lock.release();
  }
  const job = await waitForJob(stack, c.key, created.body.id, 60_000);
  assert.equal(job.status, 'failed');
  assert.equal(job.error.code, 'cancelled', JSON.stringify(job.error));
  assert.equal(job.cost_in_euro, 0);
  assert.equal(job.refunded_in_euro, 0.4);
  assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
  const ops = await stack.db.query('SELECT count(*)::int AS n FROM simulator.video_operations WHERE request_id = $1', [created.body.id]);
  assert.equal(ops.rows[0].n, 0, 'the provider never had the job');
  // Temporal retries no attempt of an activity whose cancel was requested: the lost attempt's heartbeat
  // timeout ended the submission, well before the job's deadline.
  const events = (await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).fetchHistory()).events!;
  const timedOut = events.find((e) => e.activityTaskTimedOutEventAttributes)?.activityTaskTimedOutEventAttributes;
  assert.equal(decodeTimeoutType(timedOut?.failure?.timeoutFailureInfo?.timeoutType), TimeoutType.HEARTBEAT, JSON.stringify(timedOut));
  assert.equal(decodeRetryState(timedOut?.retryState), RetryState.CANCEL_REQUESTED, JSON.stringify(timedOut));
  await assertAuditHolds(stack);
});
