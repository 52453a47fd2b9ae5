// Records the event histories of the batch workflow's paths into test/histories/<version>/, for the
// replay test: a batch of videos (one failing, one short) and speech that completes, one cancelled while
// its first requests run, and one of its video jobs (a child run charged from the batch's reservation).
// Run with `npm run record-histories` (with the other recorders).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { batchWorkflowId, videoJobWorkflowId } from '../../workflows/messages.js';
import { http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { saveHistory } from '../helpers/histories.js';
import { speechLine, videoLine, waitForBatch, waitForBatchJobs } from './setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ env: { BATCH_CONCURRENCY: '2' } });
});
after(async () => {
  await stack.stop();
});

test('a batch that completes, with a failure and a shortfall', async () => {
  const c = await newCustomer(stack, 20);
  const requests = [videoLine('ok', 'ok', 100), videoLine('fail', 'fail', 100), videoLine('short', 'short', 100), speechLine('s', 'hello')];
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const batch = await waitForBatch(stack, c.key, created.body.id);
  assert.equal(batch.status, 'completed');
  await saveHistory(stack, 'batch-completed', batchWorkflowId(batch.id));
  const job = await stack.db.query<{ id: string }>("SELECT id FROM video_jobs WHERE batch_id = $1 AND status = 'succeeded' LIMIT 1", [
    batch.id,
  ]);
  await saveHistory(stack, 'video-job-of-batch', videoJobWorkflowId(job.rows[0]!.id));
});

test('a batch cancelled while its first requests run', async () => {
  const c = await newCustomer(stack, 20);
  const requests = Array.from({ length: 5 }, (_, i) => videoLine(`v-${i}`, 'ok', 1_500));
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  await waitForBatchJobs(stack, created.body.id, 2);
  assert.equal((await http(stack.baseUrl, 'POST', `/v2/batches/${created.body.id}/cancel`, { token: c.key })).status, 200);
  const batch = await waitForBatch(stack, c.key, created.body.id);
  assert.equal(batch.status, 'cancelled');
  await saveHistory(stack, 'batch-cancelled', batchWorkflowId(batch.id));
});
