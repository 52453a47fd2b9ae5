// A claim and a stop of one batch at the same moment: requests a stop failed are never claimed after it,
// even by a claim that read them while they were still queued. No worker runs here: the claim is called
// as the batch's workflow calls it, while the stop's write of the requests is held uncommitted.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { inTransaction } from '../../src/db/pool.js';
import { claimBatchItems, type Claim } from '../../src/batches/items.js';
import { http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { videoLine } from './setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ worker: false });
});
after(async () => {
  await stack?.stop();
});

test('a claim waiting on requests a stop is failing claims none of them once the stop commits', async () => {
  const c = await newCustomer(stack, 10);
  const requests = Array.from({ length: 4 }, (_, i) => videoLine(`v-${i}`, 'ok'));
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const batchId: string = created.body.id;

  let claim: Promise<Claim> | undefined;
  await inTransaction(stack.db, async (tx) => {
    // The stop's write of the requests (stopBatch's), its rows locked until it commits.
    await tx.query("UPDATE batch_items SET status = 'failed' WHERE batch_id = $1 AND status = 'queued'", [batchId]);
    // The claim reads the batch (not stopping yet) and the requests as committed (queued), then waits on their rows.
    claim = claimBatchItems(stack.db, batchId, 0, 10);
    await new Promise((r) => setTimeout(r, 500));
  });
  const claimed = await claim!;
  assert.deepEqual(claimed.items, [], 'nothing the stop failed is claimed');
  const rows = await stack.db.query<{ status: string }>('SELECT DISTINCT status FROM batch_items WHERE batch_id = $1', [batchId]);
  assert.deepEqual(
    rows.rows.map((r) => r.status),
    ['failed'],
  );
});
