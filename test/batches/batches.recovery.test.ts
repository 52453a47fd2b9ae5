// A batch whose workflow stops while its requests run (an operator's terminate) is given a recovery run
// by the reconciler: it takes on the requests left running (their jobs go on, none started twice) and
// finishes the others; the money is exact and the ledger audit holds.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { batchWorkflowId } from '../../workflows/messages.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { VIDEO_UNIT_MICRO_EUR, videoLine, waitForBatch, waitForBatchJobs } from './setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ env: { BATCH_CONCURRENCY: '2', RECONCILE_INTERVAL_MS: '1000' } });
});
after(async () => {
  await stack?.stop();
});

test('a batch whose workflow was terminated mid-run is finished by a recovery run, each job run once', async () => {
  const c = await newCustomer(stack, 10);
  const requests = Array.from({ length: 6 }, (_, i) => videoLine(`v-${i}`, i === 4 ? 'short' : 'ok', 1_500));
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  await waitForBatchJobs(stack, created.body.id, 2);
  await stack.api.temporal.workflow.getHandle(batchWorkflowId(created.body.id)).terminate('test: an operator stops the batch');

  const batch = await waitForBatch(stack, c.key, created.body.id, 90_000);
  assert.equal(batch.status, 'completed');
  assert.deepEqual(batch.request_counts, { total: 6, completed: 6, failed: 0 });
  const ops = await stack.db.query(
    `SELECT count(*)::int AS jobs, count(o.request_id)::int AS ops
       FROM video_jobs j LEFT JOIN simulator.video_operations o ON o.request_id = j.id::text WHERE j.batch_id = $1`,
    [batch.id],
  );
  assert.deepEqual(ops.rows[0], { jobs: 6, ops: 6 });
  const cost = 11 * VIDEO_UNIT_MICRO_EUR;
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - cost);
  const runs = await stack.db.query('SELECT count(DISTINCT claim_seq)::int AS n FROM batch_items WHERE batch_id = $1', [batch.id]);
  assert.ok(runs.rows[0].n >= 3);
  await assertAuditHolds(stack);
});

test('a batch reaching the end of its completion window is expired: what runs finishes, the rest fails batch_expired, one refund', async () => {
  const c = await newCustomer(stack, 10);
  const requests = Array.from({ length: 6 }, (_, i) => videoLine(`v-${i}`, 'ok', 2_000));
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  await waitForBatchJobs(stack, created.body.id, 2);
  // The shortest window is an hour: the batch's end is moved to now, and the run that reads it (a
  // recovery run, which takes the window from the batch's row) meets it.
  await stack.db.query("UPDATE batches SET expires_at = now() + interval '1 second' WHERE id = $1", [created.body.id]);
  await stack.api.temporal.workflow.getHandle(batchWorkflowId(created.body.id)).terminate('test: the batch runs on from its row');

  const batch = await waitForBatch(stack, c.key, created.body.id, 90_000);
  assert.equal(batch.status, 'expired');
  const items = await stack.db.query<{ status: string; code: string | null; job: string | null }>(
    `SELECT i.status, i.error->>'code' AS code, j.status AS job
       FROM batch_items i LEFT JOIN video_jobs j ON j.id = i.request_id WHERE i.batch_id = $1 ORDER BY i.idx`,
    [batch.id],
  );
  const ran = items.rows.filter((r) => r.job !== null);
  assert.ok(ran.length >= 2 && ran.length < 6, `${ran.length} of 6 ran`);
  assert.ok(
    ran.every((r) => r.job === 'succeeded'),
    'what ran finished',
  );
  assert.ok(
    items.rows.filter((r) => r.job === null).every((r) => r.status === 'failed' && r.code === 'batch_expired'),
    JSON.stringify(items.rows),
  );
  assert.deepEqual(batch.request_counts, { total: 6, completed: ran.length, failed: 6 - ran.length });
  const reserved = 6 * 2 * VIDEO_UNIT_MICRO_EUR;
  const cost = ran.length * 2 * VIDEO_UNIT_MICRO_EUR;
  assert.equal(batch.cost_in_euro * 1e6, cost);
  const entries = await stack.db.query('SELECT kind, amount_micro_eur FROM ledger_entries WHERE batch_id = $1 ORDER BY id', [batch.id]);
  assert.deepEqual(entries.rows, [
    { kind: 'charge', amount_micro_eur: -reserved },
    { kind: 'refund', amount_micro_eur: reserved - cost },
  ]);
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - cost);
  await assertAuditHolds(stack);
});
