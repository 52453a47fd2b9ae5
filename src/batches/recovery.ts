// Batches whose workflow is not running while they are (never started: the API died between the
// reservation's commit and the start; or stopped by an operator) get a recovery run from the reconciler.
// It continues the claims' numbering and first takes on the requests left running (each started again
// idempotently: a job's workflow is never started twice, a speech is settled once).
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Db } from '../db/pool.js';
import { batchWorkflowId, type BatchWorkflowInput } from '../../workflows/messages.js';
import type { batchWorkflow } from '../../workflows/batch.js';

/** A batch this young that has started nothing is left to the API that is starting its workflow. */
export const BATCH_START_GRACE_MS = 60_000;
const BATCHES_PER_RUN = 100;

export async function restartLostBatches(db: Db, client: Client, taskQueue: string, job_timeout_ms: number): Promise<string[]> {
  const r = await db.query<{ id: string; workspace_id: string; expires_at_ms: number; next_seq: number }>(
    `SELECT b.id, b.workspace_id, (extract(epoch FROM b.expires_at) * 1000)::bigint AS expires_at_ms,
            (SELECT COALESCE(max(i.claim_seq) + 1, 0) FROM batch_items i WHERE i.batch_id = b.id)::int AS next_seq
       FROM batches b WHERE b.status IN ('in_progress', 'cancelling')
        AND (b.created_at < now() - make_interval(secs => $1 / 1000.0)
             OR EXISTS (SELECT 1 FROM batch_items i WHERE i.batch_id = b.id AND i.claim_seq IS NOT NULL))
      ORDER BY b.created_at LIMIT $2`,
    [BATCH_START_GRACE_MS, BATCHES_PER_RUN],
  );
  const restarted: string[] = [];
  for (const b of r.rows) {
    try {
      const described = await client.workflow.getHandle(batchWorkflowId(b.id)).describe();
      if (described.status.name === 'RUNNING') continue;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    const input: BatchWorkflowInput = {
      batch_id: b.id,
      workspace_id: b.workspace_id,
      expires_at_ms: Number(b.expires_at_ms),
      job_timeout_ms,
      claim_seq: b.next_seq,
      recovered: true,
    };
    try {
      await client.workflow.start<typeof batchWorkflow>('batchWorkflow', {
        workflowId: batchWorkflowId(b.id),
        taskQueue,
        args: [input],
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      });
      restarted.push(b.id);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  return restarted;
}
