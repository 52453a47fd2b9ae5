// The worker process killed with SIGKILL mid-job and a new one started: the job completes and
// billing is exact. The worker runs as a real separate process (`src/worker-main.ts`).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
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
  const entries = await stack.db.query('SELECT kind, amount_micro_eur FROM ledger_entries WHERE video_job_id = $1 ORDER BY id', [created.body.id]);
  assert.deepEqual(entries.rows, [
    { kind: 'charge', amount_micro_eur: -600_000 },
    { kind: 'refund', amount_micro_eur: 200_000 },
  ]);
  const ops = await stack.db.query('SELECT count(*)::int AS n FROM simulator.video_operations WHERE request_id = $1', [created.body.id]);
  assert.equal(ops.rows[0].n, 1, 'the provider saw one submission');
  await assertAuditHolds(stack);
});

test('a worker stopped (SIGTERM) while its job waits for the provider stops at once; another worker\'s poller tells the same run', async () => {
  // Only this test's workers: the one the test above started goes first.
  const earlier = children.splice(0).filter((c) => c.exitCode === null && c.signalCode === null);
  killAll(earlier);
  await Promise.all(earlier.map((c) => new Promise((r) => c.once('exit', r))));
  const first = await startEntryProcess(stack, 'worker', { track: children });
  const c = await newCustomer(stack, 10);
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 6_000, videos: 1 }) });
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
  const activityEvents = events.filter((e) => e.activityTaskStartedEventAttributes || e.activityTaskCompletedEventAttributes || e.activityTaskFailedEventAttributes || e.activityTaskTimedOutEventAttributes);
  const retried = events.find((e) => e.activityTaskStartedEventAttributes && e.activityTaskStartedEventAttributes.attempt! > 1);
  assert.equal(retried, undefined, JSON.stringify(activityEvents));
  assert.ok(!events.some((e) => e.activityTaskTimedOutEventAttributes || e.activityTaskFailedEventAttributes), JSON.stringify(activityEvents));
  const rows = await stack.db.query('SELECT count(*)::int AS n FROM video_job_polls WHERE job_id = $1', [created.body.id]);
  assert.equal(rows.rows[0].n, 0);
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 200_000);
  await assertAuditHolds(stack);
});
