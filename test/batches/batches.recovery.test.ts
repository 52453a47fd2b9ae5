// A batch whose workflow stops while its requests run (an operator's terminate) is given a recovery run
// by the reconciler: it takes on the requests left running (their jobs go on, none started twice) and
// finishes the others; the money is exact and the ledger audit holds.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { batchWorkflowId } from '../../workflows/messages.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { VIDEO_UNIT_MICRO_EUR, videoLine, waitForBatch } from './setup.js';

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
  for (let i = 0; ; i++) {
    const jobs = await stack.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE batch_id = $1', [created.body.id]);
    if (jobs.rows[0].n === 2) break;
    assert.ok(i < 200, 'the first jobs never started');
    await new Promise((r) => setTimeout(r, 50));
  }
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
