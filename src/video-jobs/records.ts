// Video jobs as PostgreSQL records them: one job by id (a status read, once its key is authenticated), and a
// workspace's jobs newest first, a page at a time (cursor pagination on
// (created_at, id), served by the video_jobs_list* indexes).
import { prepared, type Db } from '../db/pool.js';
import type { VideoJobState } from '../../workflows/messages.js';
import type { VideoParams } from '../models/values.js';
import { stickyRefusalSql, type StickyRefusal } from './billing.js';

export interface VideoJobRecord extends VideoJobState {
  deleted: boolean;
  prompt: string;
  operation_id: string | null;
  deadline_at_ms: number | null;
}

const COLUMNS = `id, workspace_id, status, model, params, request_fingerprint, estimated_cost_micro_eur, cost_micro_eur, refunded_micro_eur,
  videos, error, backend, prompt, operation_id, progress, queue_position, deleted_at IS NOT NULL AS deleted,
  (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms,
  (extract(epoch FROM completed_at) * 1000)::bigint AS completed_at_ms,
  (extract(epoch FROM deadline_at) * 1000)::bigint AS deadline_at_ms, batch_id`;

interface Row {
  id: string;
  workspace_id: string;
  status: 'pending' | 'succeeded' | 'failed';
  model: string;
  params: VideoParams;
  request_fingerprint: string;
  estimated_cost_micro_eur: number;
  cost_micro_eur: number | null;
  refunded_micro_eur: number;
  videos: VideoJobState['videos'];
  error: VideoJobState['error'];
  backend: string | null;
  prompt: string;
  operation_id: string | null;
  progress: number | null;
  queue_position: number | null;
  deleted: boolean;
  created_at_ms: number;
  completed_at_ms: number | null;
  deadline_at_ms: number | null;
  batch_id: string | null;
}

function toRecord(row: Row): VideoJobRecord {
  return {
    job_id: row.id,
    workspace_id: row.workspace_id,
    status: row.status,
    model: row.model,
    params: row.params,
    created_at_ms: row.created_at_ms,
    completed_at_ms: row.completed_at_ms,
    estimated_cost_micro_eur: row.estimated_cost_micro_eur,
    cost_micro_eur: row.cost_micro_eur,
    refunded_micro_eur: row.refunded_micro_eur,
    videos: row.videos,
    error: row.error,
    request_fingerprint: row.request_fingerprint,
    deleted: row.deleted,
    backend: row.backend,
    prompt: row.prompt,
    operation_id: row.operation_id,
    deadline_at_ms: row.deadline_at_ms,
    progress: row.progress,
    queue_position: row.queue_position,
    batch_id: row.batch_id,
  };
}

/** A job's row by its id: every status read runs it, so each connection plans it once. */
const JOB_BY_ID = prepared('video-job-read', `SELECT ${COLUMNS} FROM video_jobs WHERE id = $1`);

/** The job's record, deleted or not; null when no job has this id. */
export async function readVideoJob(db: Db, job_id: string): Promise<VideoJobRecord | null> {
  const r = await db.query<Row>({ ...JOB_BY_ID, values: [job_id] });
  return r.rows[0] ? toRecord(r.rows[0]) : null;
}

/**
 * What a create with an Idempotency-Key finds under its job id, in one read: the job's record (deleted or
 * not), and the key's sticky refusal (a 402 that stays with the key), if any.
 */
const KEYED_JOB = prepared(
  'video-job-keyed-read',
  `SELECT job.*, ${stickyRefusalSql('$1')} AS refusal
     FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT ${COLUMNS} FROM video_jobs WHERE id = $1) AS job ON true`,
);

export async function readKeyedVideoJob(db: Db, job_id: string): Promise<{ record: VideoJobRecord | null; refusal: StickyRefusal | null }> {
  const r = await db.query<(Row | { [K in keyof Row]: null }) & { refusal: StickyRefusal | null }>({ ...KEYED_JOB, values: [job_id] });
  const row = r.rows[0]!;
  return { record: row.id === null ? null : toRecord(row as Row), refusal: row.refusal };
}

export interface JobListQuery {
  limit: number;
  /** The id of the last job of the previous page. */
  after?: string | undefined;
  status?: 'pending' | 'succeeded' | 'failed' | undefined;
  model?: string | undefined;
  /** desc (default): newest first; asc: oldest first. */
  order?: 'asc' | 'desc' | undefined;
}

/**
 * A page of the workspace's jobs (not deleted), newest first (or oldest first with order asc). `after` must be a job of the workspace
 * (null is answered when it is not). One more row than asked says whether there is a next page.
 */
export async function listVideoJobs(
  db: Db,
  workspace_id: string,
  q: JobListQuery,
): Promise<{ jobs: VideoJobRecord[]; has_more: boolean } | null> {
  const where = ['workspace_id = $1', 'deleted_at IS NULL'];
  const args: unknown[] = [workspace_id];
  if (q.after !== undefined) {
    const cursor = await db.query<{ created_at: Date }>('SELECT created_at FROM video_jobs WHERE id = $1 AND workspace_id = $2', [
      q.after,
      workspace_id,
    ]);
    if (!cursor.rows[0]) return null;
    args.push(cursor.rows[0].created_at, q.after);
    where.push(`(created_at, id) ${q.order === 'asc' ? '>' : '<'} ($${args.length - 1}, $${args.length})`);
  }
  if (q.status !== undefined) {
    args.push(q.status);
    where.push(`status = $${args.length}`);
  }
  if (q.model !== undefined) {
    args.push(q.model);
    where.push(`model = $${args.length}`);
  }
  args.push(q.limit + 1);
  const r = await db.query<Row>(
    `SELECT ${COLUMNS} FROM video_jobs WHERE ${where.join(' AND ')} ORDER BY created_at ` +
      `${q.order === 'asc' ? 'ASC' : 'DESC'}, id ${q.order === 'asc' ? 'ASC' : 'DESC'} LIMIT ` +
      `$${args.length}`,
    args,
  );
  return { jobs: r.rows.slice(0, q.limit).map(toRecord), has_more: r.rows.length > q.limit };
}

/** Marks a finished job deleted (its ledger entries stay); whether this call deleted it. Its images go with it (deleteVideoJobInputs). */
export async function markVideoJobDeleted(db: Db, job_id: string): Promise<boolean> {
  const r = await db.query(
    "UPDATE video_jobs SET deleted_at = now(), storage_swept_at = NULL WHERE id = $1 AND deleted_at IS NULL AND status <> 'pending'",
    [job_id],
  );
  return r.rowCount === 1;
}

/** The jobs of a batch (its output file's video lines), by id. */
export async function readBatchVideoJobs(db: Db, batch_id: string): Promise<Map<string, VideoJobRecord>> {
  const r = await db.query<Row>(`SELECT ${COLUMNS} FROM video_jobs WHERE batch_id = $1`, [batch_id]);
  return new Map(r.rows.map((row) => [row.id, toRecord(row)]));
}
