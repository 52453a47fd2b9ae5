// Webhook events of video jobs, recorded inside the settlement transaction: the event (its body, built
// by prepareJobEvent before the workspace is locked, is the exact text later signed and sent) and one
// delivery per endpoint of the workspace subscribed to its type commit together with the money, or not
// at all; the unique (job, type) key records it once however often settlement is retried. The
// deliveries are started after the commit (./dispatch.ts).
import type { Tx } from '../db/pool.js';
import { uuidForKey } from '../ids.js';
import { presentVideoJob } from '../video-jobs/present.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import type { VideoJobState } from '../../workflows/messages.js';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from './event-types.js';

export { WEBHOOK_EVENT_TYPES, type WebhookEventType };

/** How an event's `data` (the job as GET /v2/videos/generations/{id} answers it) gets its download URLs. */
export interface JobEventContext {
  downloadUrls: DownloadUrlSigner;
  /** PUBLIC_BASE_URL, else the API's own http://HOST:PORT. */
  baseUrl: string;
}

/** `evt_` + 32 hex digits, derived from the job and the type: the same event always has the same id. */
export function webhookEventId(workspaceId: string, jobId: string, type: WebhookEventType): string {
  return 'evt_' + uuidForKey('webhook-event', workspaceId, `${jobId}:${type}`).replace(/-/g, '');
}

/** A job's terminal event, its body built (and its download URLs signed) before any lock is taken. */
export interface PreparedJobEvent {
  id: string;
  workspace_id: string;
  job_id: string;
  type: WebhookEventType;
  payload: string;
  created_s: number;
}

const JOB_STATE_COLUMNS = `id AS job_id, workspace_id, status, model, params, request_fingerprint, estimated_cost_micro_eur, cost_micro_eur,
            refunded_micro_eur, videos, error, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms,
            (extract(epoch FROM completed_at) * 1000)::bigint AS completed_at_ms, backend, progress, queue_position, batch_id`;

/**
 * The terminal event of a job about to be settled as `settled` (its final status, cost, videos, error),
 * or null when no endpoint of the workspace subscribes to it. Signing the download URLs may be a network
 * call (S3 credentials): it runs here, before the settlement locks the workspace, never under that lock.
 */
export async function prepareJobEvent(
  tx: Tx,
  jobId: string,
  settled: Pick<VideoJobState, 'status' | 'cost_micro_eur' | 'refunded_micro_eur' | 'videos' | 'error' | 'completed_at_ms'>,
  ctx: JobEventContext,
): Promise<PreparedJobEvent | null> {
  if (settled.status !== 'succeeded' && settled.status !== 'failed') return null;
  const r = await tx.query<VideoJobState>(`SELECT ${JOB_STATE_COLUMNS} FROM video_jobs WHERE id = $1`, [jobId]);
  const row = r.rows[0];
  if (!row) return null;
  const job: VideoJobState = { ...row, ...settled };
  const type: WebhookEventType = job.status === 'succeeded' ? 'video.generation.succeeded' : 'video.generation.failed';
  const subscribed = await tx.query<{ n: number }>(
    'SELECT count(*)::bigint AS n FROM webhook_endpoints WHERE workspace_id = $1 AND deleted_at IS NULL AND $2 = ANY(events)',
    [job.workspace_id, type],
  );
  if (subscribed.rows[0]!.n === 0) return null;
  const id = webhookEventId(job.workspace_id, jobId, type);
  const created_s = Math.floor(Date.now() / 1000);
  const payload = JSON.stringify({
    id,
    object: 'event',
    type,
    created: created_s,
    data: await presentVideoJob(job, ctx.downloadUrls, ctx.baseUrl),
  });
  return { id, workspace_id: job.workspace_id, job_id: jobId, type, payload, created_s };
}

/**
 * Records a prepared event and its deliveries, in the caller's transaction (the one that settled the
 * job). Answers the ids of the deliveries it created: none when the event was already recorded.
 */
export async function insertJobEvent(tx: Tx, e: PreparedJobEvent): Promise<string[]> {
  const inserted = await tx.query(
    `INSERT INTO webhook_events (id, workspace_id, type, video_job_id, payload, created_at) VALUES ($1, $2, $3, $4, $5, to_timestamp($6))
     ON CONFLICT (video_job_id, type) DO NOTHING`,
    [e.id, e.workspace_id, e.type, e.job_id, e.payload, e.created_s],
  );
  if (inserted.rowCount !== 1) return [];
  const deliveries = await tx.query<{ id: string }>(
    `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, workspace_id)
     SELECT gen_random_uuid(), $1, id, workspace_id FROM webhook_endpoints
      WHERE workspace_id = $2 AND deleted_at IS NULL AND $3 = ANY(events)
     RETURNING id`,
    [e.id, e.workspace_id, e.type],
  );
  return deliveries.rows.map((d) => d.id);
}

/**
 * Records the terminal event of a job already settled (its state as stored) and its deliveries, in the
 * caller's transaction; the ids of the deliveries created. Settlement itself prepares the event before
 * locking the workspace (prepareJobEvent, insertJobEvent).
 */
export async function recordJobEvent(tx: Tx, jobId: string, ctx: JobEventContext): Promise<string[]> {
  const r = await tx.query<VideoJobState>(`SELECT ${JOB_STATE_COLUMNS} FROM video_jobs WHERE id = $1`, [jobId]);
  const job = r.rows[0];
  if (!job) return [];
  const prepared = await prepareJobEvent(tx, jobId, job, ctx);
  return prepared ? insertJobEvent(tx, prepared) : [];
}

/**
 * Records a batch's `batch.completed` event (data: the batch as presented) and its deliveries, in the
 * caller's transaction (the one that ended the batch); the event's id is derived from the batch, so it
 * is recorded once. The ids of the deliveries created (none when no endpoint subscribes).
 */
export async function insertBatchEvent(tx: Tx, workspaceId: string, batchId: string, data: unknown): Promise<string[]> {
  const type: WebhookEventType = 'batch.completed';
  const subscribed = await tx.query<{ n: number }>(
    'SELECT count(*)::bigint AS n FROM webhook_endpoints WHERE workspace_id = $1 AND deleted_at IS NULL AND $2 = ANY(events)',
    [workspaceId, type],
  );
  if (Number(subscribed.rows[0]!.n) === 0) return [];
  const id = webhookEventId(workspaceId, batchId, type);
  const created_s = Math.floor(Date.now() / 1000);
  const payload = JSON.stringify({ id, object: 'event', type, created: created_s, data });
  const inserted = await tx.query(
    `INSERT INTO webhook_events (id, workspace_id, type, batch_id, payload, created_at) VALUES ($1, $2, $3, $4, $5, to_timestamp($6))
     ON CONFLICT (id) DO NOTHING`,
    [id, workspaceId, type, batchId, payload, created_s],
  );
  if (inserted.rowCount !== 1) return [];
  const deliveries = await tx.query<{ id: string }>(
    `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, workspace_id)
     SELECT gen_random_uuid(), $1, id, workspace_id FROM webhook_endpoints WHERE workspace_id = $2 AND deleted_at IS NULL AND $3 = ANY(events)
     RETURNING id`,
    [id, workspaceId, type],
  );
  return deliveries.rows.map((d) => d.id);
}
