// Workflow paths that need their own configuration: the job deadline, and continue-as-new keeping
// history bounded while billing stays exact.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from './helpers/stack.js';
import { videoJobWorkflowId } from '../workflows/messages.js';

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

describe('continue-as-new', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ maxPollsPerRun: 1, env: { VIDEO_POLL_INTERVAL_MS: '50', VIDEO_POLL_MAX_INTERVAL_MS: '100' } });
  });
  after(async () => {
    await stack.stop();
  });

  test('a long job continues as new with bounded history, keeps answering queries, and bills exactly once', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 3_000, videos: 1 }) });
    assert.equal(created.status, 202);
    // While it runs, status keeps answering across runs.
    const mid = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: c.key });
    assert.equal(mid.body.status, 'pending');
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.cost_in_euro, 0.2);
    assert.equal(job.refunded_in_euro, 0.2);
    const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id));
    // Walk the chain of runs back from the last: every earlier run ended in continue-as-new.
    let runId: string | undefined = (await handle.describe()).runId;
    let runs = 0;
    while (runId) {
      const history = await stack.api.temporal.workflow.getHandle(handle.workflowId, runId).fetchHistory();
      runs++;
      assert.ok(history.events!.length < 100, `history of a run is ${history.events!.length} events`);
      runId = history.events![0]!.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
    }
    assert.ok(runs >= 3, `expected several runs, got ${runs}`);
    assert.equal(await balanceMicro(stack, c.workspaceId), 4_800_000);
    const refunds = await stack.db.query("SELECT count(*)::int AS n FROM ledger_entries WHERE video_job_id = $1 AND kind = 'refund'", [created.body.id]);
    assert.equal(refunds.rows[0].n, 1);
    await assertAuditHolds(stack);
  });
});

describe('no worker running', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ worker: false, createTimeoutMs: 2_000 });
  });
  after(async () => {
    await stack.stop();
  });

  test('a create that no worker confirms in time is a 503 naming the job, not a hang; nothing is charged', async () => {
    const c = await newCustomer(stack, 5);
    const started = Date.now();
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers: { 'Idempotency-Key': 'k-503' } });
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.ok(Date.now() - started < 10_000);
    assert.equal(r.body.error.code, 'temporarily_unavailable');
    assert.equal(r.headers.get('retry-after'), '5');
    const location = r.headers.get('location')!;
    assert.match(r.body.error.message, new RegExp(location.split('/').pop()!));
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    // GET on that id: not (yet) a job of this workspace.
    assert.equal((await http(stack.baseUrl, 'GET', location, { token: c.key })).status, 404);
    await assertAuditHolds(stack);
  });
});
