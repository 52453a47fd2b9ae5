// A cancel and the charge of one of the batch's jobs at the same moment: both go through, neither failing
// as a deadlock. The stop locks the workspace, then the batch; the charge locks the batch, and its job's
// row needs a share of the workspace's row (a foreign key). No worker runs here: the charge is called as
// the job's workflow calls it, while another transaction holds the batch's row so that both queue on it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { inTransaction } from '../../src/db/pool.js';
import { chargeBatchVideoJob, stopBatch } from '../../src/batches/billing.js';
import { http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { videoLine } from './setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ worker: false });
});
after(async () => {
  await stack?.stop();
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("a cancel while one of the batch's jobs is being charged: both go through (neither waits on the other)", async () => {
  const c = await newCustomer(stack, 10);
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests: [videoLine('v-0', 'ok')] } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const batchId: string = created.body.id;
  const item = (
    await stack.db.query<{ request_id: string; request: Record<string, any>; estimated_cost_micro_eur: number }>(
      'SELECT request_id, request, estimated_cost_micro_eur FROM batch_items WHERE batch_id = $1 AND idx = 0',
      [batchId],
    )
  ).rows[0]!;

  let charge: Promise<unknown> | undefined;
  let stop: Promise<unknown> | undefined;
  await inTransaction(stack.db, async (tx) => {
    await tx.query('SELECT 1 FROM batches WHERE id = $1 FOR UPDATE', [batchId]);
    // First in the batch's queue: the job's charge (as its workflow's first step makes it).
    charge = chargeBatchVideoJob(stack.db, batchId, {
      jobId: item.request_id,
      workflowId: `video-job-${item.request_id}`,
      workspaceId: c.workspaceId,
      model: item.request['model'],
      prompt: item.request['prompt'],
      params: item.request['params'],
      estimated_cost_micro_eur: item.estimated_cost_micro_eur,
      created_at_ms: Date.now(),
      request_fingerprint: 'fingerprint',
      batchId,
    });
    await pause(300);
    // Then the cancel: it takes the workspace's row, then waits for the batch's.
    stop = stopBatch(stack.db, batchId, 'cancelled');
    await pause(300);
  });
  const [charged, stopped] = await Promise.allSettled([charge!, stop!]);
  assert.equal(charged.status, 'fulfilled', charged.status === 'rejected' ? String(charged.reason) : '');
  assert.equal(stopped.status, 'fulfilled', stopped.status === 'rejected' ? String(stopped.reason) : '');
  assert.deepEqual((charged as PromiseFulfilledResult<any>).value.ok, true);
  assert.equal((stopped as PromiseFulfilledResult<boolean>).value, true);
  const b = await stack.db.query<{ status: string; remaining: number }>(
    'SELECT status, remaining_micro_eur AS remaining FROM batches WHERE id = $1',
    [batchId],
  );
  assert.deepEqual(b.rows[0], { status: 'cancelling', remaining: 0 });
});
