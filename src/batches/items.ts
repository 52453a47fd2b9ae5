// A batch's requests as its workflow runs them: claimed a few at a time (within the workspace's batch
// concurrency and pending-job cap), then ended from what their job or speech recorded. Each step is
// idempotent, so an activity retried after any crash changes nothing twice: a claim is named by its
// sequence number (a retry answers the items it claimed), an ended item is not ended again.
import { inTransaction, type Db, type Tx } from '../db/pool.js';
import type { BatchItemKind } from './billing.js';

export interface ClaimedItem {
  idx: number;
  kind: BatchItemKind;
  request_id: string;
  request: Record<string, unknown>;
  estimated_cost_micro_eur: number;
}

export interface Claim {
  items: ClaimedItem[];
  /** Requests of the batch still waiting to start after this claim. */
  queued: number;
  /** Whether the batch is stopping (cancelled or expired): nothing more starts. */
  stopping: boolean;
}

/**
 * Claims the batch's next requests that may start now, as claim `seq` (a retry answers the running requests it claimed): at most the workspace's batch
 * concurrency running across its batches, and video requests only while the workspace is under its
 * pending-job cap (they wait for room, never fail for it). Claims of one workspace are serialised.
 */
export async function claimBatchItems(db: Db, batchId: string, seq: number, concurrency: number, adoptRunning = false): Promise<Claim> {
  return inTransaction(db, async (tx) => {
    const b = await tx.query<{ workspace_id: string; ending: string | null; status: string }>(
      'SELECT workspace_id, ending, status FROM batches WHERE id = $1',
      [batchId],
    );
    const batch = b.rows[0];
    if (!batch) throw new Error(`invariant: batch ${batchId} exists`);
    await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('batch_claims:' || $1, 0))", [batch.workspace_id]);
    // A recovery run (its workflow had stopped) first takes on the requests its earlier runs left running.
    if (adoptRunning && (await claimed(tx, batchId, seq)).length === 0)
      await tx.query("UPDATE batch_items SET claim_seq = $2 WHERE batch_id = $1 AND status = 'running'", [batchId, seq]);
    const again = await claimed(tx, batchId, seq);
    const stopping = batch.ending !== null || !['in_progress', 'validating'].includes(batch.status);
    if (again.length > 0 || stopping) return { items: again, queued: await queuedOf(tx, batchId), stopping };
    const room = await tx.query<{ running: number; pending: number; pending_max: number }>(
      `SELECT (SELECT count(*) FROM batch_items i JOIN batches b ON b.id = i.batch_id
                WHERE b.workspace_id = $1 AND b.completed_at IS NULL AND i.status = 'running')::int AS running,
              (SELECT count(*) FROM video_jobs j WHERE j.workspace_id = $1 AND j.status = 'pending')::int AS pending,
              COALESCE(w.max_pending_jobs, NULLIF(current_setting('video_api.max_pending_jobs', true), '')::integer, 50) AS pending_max
         FROM workspaces w WHERE w.id = $1`,
      [batch.workspace_id],
    );
    const { running, pending, pending_max } = room.rows[0]!;
    const slots = concurrency - running;
    // Video jobs of this workspace already started by batches but not yet charged count against the cap too.
    const videoRoom = pending_max - pending - (await startingVideos(tx, batch.workspace_id));
    if (slots > 0) {
      const next = await tx.query<{ idx: number; kind: BatchItemKind }>(
        "SELECT idx, kind FROM batch_items WHERE batch_id = $1 AND status = 'queued' ORDER BY idx LIMIT $2",
        [batchId, slots],
      );
      // In order: a video request that finds no room stops the claim (those after it wait their turn).
      const take: number[] = [];
      let videos = 0;
      for (const item of next.rows) {
        if (item.kind === 'video' && ++videos > videoRoom) break;
        take.push(item.idx);
      }
      if (take.length > 0)
        // Still queued: a stop that failed them after they were read (it holds their rows until it commits) wins.
        await tx.query(
          "UPDATE batch_items SET status = 'running', claim_seq = $2 WHERE batch_id = $1 AND idx = ANY($3::int[]) AND status = 'queued'",
          [batchId, seq, take],
        );
    }
    return { items: await claimed(tx, batchId, seq), queued: await queuedOf(tx, batchId), stopping: false };
  });
}

async function claimed(tx: Tx, batchId: string, seq: number): Promise<ClaimedItem[]> {
  const r = await tx.query<ClaimedItem>(
    `SELECT idx, kind, request_id, request, estimated_cost_micro_eur FROM batch_items
      WHERE batch_id = $1 AND claim_seq = $2 AND status = 'running' ORDER BY idx`,
    [batchId, seq],
  );
  return r.rows;
}

async function queuedOf(tx: Tx, batchId: string): Promise<number> {
  const r = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM batch_items WHERE batch_id = $1 AND status = 'queued'", [
    batchId,
  ]);
  return r.rows[0]!.n;
}

/** Video requests of the workspace's batches claimed whose job is not recorded yet (their charge is on its way). */
async function startingVideos(tx: Tx, workspaceId: string): Promise<number> {
  const r = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM batch_items i JOIN batches b ON b.id = i.batch_id
      WHERE b.workspace_id = $1 AND b.completed_at IS NULL AND i.status = 'running' AND i.kind = 'video'
        AND NOT EXISTS (SELECT 1 FROM video_jobs j WHERE j.id = i.request_id)`,
    [workspaceId],
  );
  return r.rows[0]!.n;
}

export interface ItemError {
  code: string;
  message: string;
}

/**
 * Ends a running request with its outcome: completed (its cost) or failed (its cost, usually 0, and
 * its error), counted on the batch. Nothing when it had ended already. In the caller's transaction,
 * which holds the batch's row lock.
 */
export async function endItem(
  tx: Tx,
  batchId: string,
  idx: number,
  outcome: { status: 'completed' | 'failed'; cost_micro_eur: number; error: ItemError | null },
): Promise<boolean> {
  const r = await tx.query(
    "UPDATE batch_items SET status = $3, cost_micro_eur = $4, error = $5 WHERE batch_id = $1 AND idx = $2 AND status = 'running'",
    [batchId, idx, outcome.status, outcome.cost_micro_eur, outcome.error && JSON.stringify(outcome.error)],
  );
  if (r.rowCount !== 1) return false;
  await tx.query(
    `UPDATE batches SET completed = completed + ($2 = 'completed')::int, failed = failed + ($2 = 'failed')::int,
            cost_micro_eur = cost_micro_eur + $3 WHERE id = $1`,
    [batchId, outcome.status, outcome.cost_micro_eur],
  );
  return true;
}

export class StillRunning extends Error {}

/**
 * Ends a video request from its job's row once its workflow has ended: the job settled (succeeded:
 * completed; failed: failed with its error), or never recorded (its charge refused it: failed). A job
 * still pending (its workflow ended without settling; the reconciler restarts it) throws StillRunning.
 */
export async function endVideoItem(db: Db, batchId: string, idx: number, refusal: ItemError | null): Promise<void> {
  await inTransaction(db, async (tx) => {
    await tx.query('SELECT 1 FROM batches WHERE id = $1 FOR UPDATE', [batchId]);
    const r = await tx.query<{ status: string | null; cost_micro_eur: number | null; error: ItemError | null }>(
      `SELECT j.status, j.cost_micro_eur, j.error FROM batch_items i LEFT JOIN video_jobs j ON j.id = i.request_id
        WHERE i.batch_id = $1 AND i.idx = $2`,
      [batchId, idx],
    );
    const job = r.rows[0];
    if (!job) throw new Error(`invariant: batch ${batchId} has a request ${idx}`);
    if (job.status === 'pending') throw new StillRunning(`the job of request ${idx} of batch ${batchId} has not settled`);
    if (job.status === null) {
      await endItem(tx, batchId, idx, {
        status: 'failed',
        cost_micro_eur: 0,
        error: refusal ?? { code: 'not_started', message: 'the job could not be started; nothing was charged for it' },
      });
      return;
    }
    await endItem(tx, batchId, idx, {
      status: job.status === 'succeeded' ? 'completed' : 'failed',
      cost_micro_eur: job.cost_micro_eur ?? 0,
      error: job.status === 'succeeded' ? null : job.error,
    });
  });
}
