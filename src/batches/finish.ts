// The end of a batch: what remains of its reservation released (one ledger refund), its output and
// error files recorded, its status final and its `batch.completed` webhook event recorded, in one
// transaction; then the event's deliveries are started. Idempotent: a retry after the commit ends
// nothing twice and starts the deliveries not started yet.
import type { Client } from '@temporalio/client';
import type { Db } from '../db/pool.js';
import { endBatch } from './billing.js';
import { presentBatch, readBatch } from './records.js';
import { insertBatchEvent } from '../webhooks/events.js';
import { dispatchBatchWebhooks } from '../webhooks/dispatch.js';

export interface BatchWebhooks {
  client: Client;
  taskQueue: string;
  retry_initial_ms: number;
}

export async function finishBatch(db: Db, batchId: string, webhooks?: BatchWebhooks): Promise<boolean> {
  const ended = await endBatch(db, batchId, async (tx) => {
    if (!webhooks) return;
    const b = (await readBatch(tx, batchId))!;
    await insertBatchEvent(tx, b.workspace_id, batchId, presentBatch(b));
  });
  if (webhooks)
    await dispatchBatchWebhooks(
      { client: webhooks.client, db, taskQueue: webhooks.taskQueue, retry_initial_ms: webhooks.retry_initial_ms },
      batchId,
    );
  return ended;
}
