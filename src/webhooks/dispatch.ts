// Starts the delivery workflows of recorded webhook deliveries, after the transaction that recorded
// them has committed. Idempotent: the workflow id is derived from the delivery id and a closed one is
// never started again (REJECT_DUPLICATE), and `dispatched_at` marks the rows whose workflow has
// been started. A crash between commit and start loses nothing: `dispatchUndispatched` (run by the
// reconciler) starts whatever was recorded and not started.
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Db } from '../db/pool.js';
import { WORKSPACE_ID_SA } from '../../workflows/messages.js';
import {
  WEBHOOK_GIVE_UP_AFTER_MS,
  webhookDeliveryWorkflowId,
  type WebhookDeliveryInput,
  type webhookDeliveryWorkflow,
} from '../../workflows/webhook-delivery.js';

/**
 * Deliveries run on a task queue of their own, polled by a worker of their own in every worker process,
 * with its own slots and a rate limit: however many deliveries retry (dead endpoints, slow DNS), the
 * jobs' charges, polls and settlements on the main task queue never wait behind them.
 */
export const webhookTaskQueue = (taskQueue: string) => `${taskQueue}-webhooks`;

export interface WebhookDispatch {
  client: Client;
  db: Db;
  /** The main task queue of the workers (TEMPORAL_TASK_QUEUE); deliveries go to webhookTaskQueue of it. */
  taskQueue: string;
  /** WEBHOOK_RETRY_INITIAL_MS. */
  retry_initial_ms: number;
}

/** Most deliveries started by one call. */
export const DISPATCH_BATCH_MAX = 1_000;

/**
 * How long a recorded delivery is left to the settlement that recorded it (which starts it right after its
 * commit) before `dispatchUndispatched` starts it: the reconciler picks up what a crash left, and does not
 * race a settlement that is about to start its own deliveries.
 */
export const UNDISPATCHED_GRACE_MS = 30_000;
/** Workflow starts in flight at once (a job's deliveries start together, not one after another). */
const DISPATCH_CONCURRENCY = 8;

/** Starts the delivery workflows of these deliveries that are not started yet; answers how many it started. */
export async function dispatchWebhookDeliveries(d: WebhookDispatch, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  if (ids.length > DISPATCH_BATCH_MAX) throw new RangeError(`at most ${DISPATCH_BATCH_MAX} deliveries per dispatch`);
  const r = await d.db.query<{ id: string; workspace_id: string }>(
    'SELECT id, workspace_id FROM webhook_deliveries WHERE id = ANY($1::uuid[]) AND dispatched_at IS NULL',
    [ids],
  );
  const start = async (delivery: { id: string; workspace_id: string }) => {
    const input: WebhookDeliveryInput = {
      delivery_id: delivery.id,
      retry_initial_ms: d.retry_initial_ms,
      give_up_after_ms: WEBHOOK_GIVE_UP_AFTER_MS,
    };
    try {
      await d.client.workflow.start<typeof webhookDeliveryWorkflow>('webhookDeliveryWorkflow', {
        workflowId: webhookDeliveryWorkflowId(delivery.id),
        taskQueue: webhookTaskQueue(d.taskQueue),
        args: [input],
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [{ key: WORKSPACE_ID_SA, value: delivery.workspace_id }],
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    await d.db.query('UPDATE webhook_deliveries SET dispatched_at = now() WHERE id = $1 AND dispatched_at IS NULL', [delivery.id]);
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(DISPATCH_CONCURRENCY, r.rows.length) }, async () => {
      while (next < r.rows.length) await start(r.rows[next++]!);
    }),
  );
  return r.rows.length;
}

/** Starts the deliveries of a job's events that are not started yet (after its settlement). */
export async function dispatchJobWebhooks(d: WebhookDispatch, jobId: string): Promise<number> {
  return dispatchEventsOf(d, 'video_job_id', jobId);
}

/** Starts the deliveries of a batch's event that are not started yet (after it ended). */
export async function dispatchBatchWebhooks(d: WebhookDispatch, batchId: string): Promise<number> {
  return dispatchEventsOf(d, 'batch_id', batchId);
}

async function dispatchEventsOf(d: WebhookDispatch, subject: 'video_job_id' | 'batch_id', id: string): Promise<number> {
  const r = await d.db.query<{ id: string }>(
    `SELECT d.id FROM webhook_events e JOIN webhook_deliveries d ON d.event_id = e.id
      WHERE e.${subject} = $1 AND d.dispatched_at IS NULL`,
    [id],
  );
  return dispatchWebhookDeliveries(
    d,
    r.rows.map((row) => row.id),
  );
}

/**
 * Starts the deliveries of the workspace's budget alerts not started yet: what a charge (a job's, a
 * speech capture) recorded with its ledger entry, called after that entry's commit. The recording is the
 * database's (migration 024_budget_alerts.sql), so the caller does not know whether there is any: one
 * read of the deliveries not started (a few rows, by the partial index webhook_deliveries_undispatched).
 * A speech's capture reads in its statement whether the workspace has a webhook endpoint at all, and
 * calls this only then.
 */
export async function dispatchAlertWebhooks(d: WebhookDispatch, workspaceId: string): Promise<number> {
  const r = await d.db.query<{ id: string }>(
    `SELECT d.id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
      WHERE d.dispatched_at IS NULL AND d.workspace_id = $1 AND e.ledger_entry_id IS NOT NULL LIMIT $2`,
    [workspaceId, DISPATCH_BATCH_MAX],
  );
  return dispatchWebhookDeliveries(
    d,
    r.rows.map((row) => row.id),
  );
}

/** Starts up to `limit` recorded deliveries that were never started, oldest first. */
export async function dispatchUndispatched(d: WebhookDispatch, limit: number, min_age_ms = UNDISPATCHED_GRACE_MS): Promise<number> {
  const r = await d.db.query<{ id: string }>(
    'SELECT id FROM webhook_deliveries WHERE dispatched_at IS NULL AND created_at <= now() - ' +
      'make_interval(secs => $2::float8 / 1000) ORDER BY created_at LIMIT $1',
    [Math.max(1, Math.min(limit, DISPATCH_BATCH_MAX)), Math.max(0, min_age_ms)],
  );
  return dispatchWebhookDeliveries(
    d,
    r.rows.map((row) => row.id),
  );
}
