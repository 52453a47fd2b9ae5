// The rows of video_job_awaits (migration 009): an awaiting attempt records itself, the pollers claim
// the due rows, poll, and release or remove them. Every change to a row names the attempt's task token,
// so the poller of an attempt that was replaced (a retry) or already completed changes nothing.
import { prepared, type Db } from '../db/pool.js';

/** What an awaiting attempt records about itself. */
export interface AwaitRegistration {
  job_id: string;
  task_token: Uint8Array;
  backend: string;
  operation_id: string;
  with_operation: boolean;
  poll_interval_ms: number;
  poll_max_interval_ms: number;
  first_poll_after_ms: number;
  heartbeat_every_ms: number;
  /** When the first heartbeat is due, ms from the epoch (half the heartbeat timeout after the attempt was scheduled). */
  first_heartbeat_at_ms: number;
  /** The attempt's deadline, ms from the epoch, if it has one. */
  ends_at_ms: number | null;
  failures_known_zero: boolean;
  /** Also record `operation_id` as the job's operation (just submitted), in the same statement. */
  record_operation: boolean;
}

const REGISTER_ROW = `INSERT INTO video_job_awaits (job_id, task_token, backend, operation_id, with_operation, poll_interval_ms, poll_max_interval_ms,
     next_interval_ms, next_poll_at, heartbeat_every_ms, next_heartbeat_at, ends_at, failures_known_zero)
   VALUES ($1, $2, $3, $4, $5, $6, $7, $6, now() + make_interval(secs => $8::float8 / 1000), $9, to_timestamp($10::float8 / 1000),
     to_timestamp($11::float8 / 1000), $12)
   ON CONFLICT (job_id) DO UPDATE SET task_token = EXCLUDED.task_token, backend = EXCLUDED.backend, operation_id = EXCLUDED.operation_id,
     with_operation = EXCLUDED.with_operation, poll_interval_ms = EXCLUDED.poll_interval_ms, poll_max_interval_ms = EXCLUDED.poll_max_interval_ms,
     next_interval_ms = EXCLUDED.next_interval_ms, next_poll_at = EXCLUDED.next_poll_at, heartbeat_every_ms = EXCLUDED.heartbeat_every_ms,
     next_heartbeat_at = EXCLUDED.next_heartbeat_at, ends_at = EXCLUDED.ends_at, failures_known_zero = EXCLUDED.failures_known_zero,
     lease_owner = NULL, lease_until = NULL`;
const REGISTER = prepared('video-job-await-register', REGISTER_ROW);
/** The row and the job's operation, atomically: a failure records neither, and the retry submits again (as when recording the operation alone failed). */
const REGISTER_WITH_OPERATION = prepared(
  'video-job-await-register-with-operation',
  `WITH recorded AS (UPDATE video_jobs SET operation_id = $4 WHERE id = $1 AND operation_id IS DISTINCT FROM $4) ${REGISTER_ROW}`,
);

export async function registerAwait(db: Db, r: AwaitRegistration): Promise<void> {
  const max_interval_ms = Math.max(r.poll_max_interval_ms, r.poll_interval_ms);
  await db.query({
    ...(r.record_operation ? REGISTER_WITH_OPERATION : REGISTER),
    values: [
      r.job_id,
      Buffer.from(r.task_token),
      r.backend,
      r.operation_id,
      r.with_operation,
      r.poll_interval_ms,
      max_interval_ms,
      r.first_poll_after_ms,
      r.heartbeat_every_ms,
      r.first_heartbeat_at_ms,
      r.ends_at_ms,
      r.failures_known_zero,
    ],
  });
}

/** A claimed row: what to poll, and whether its poll and its heartbeat are due. */
export interface ClaimedAwait {
  job_id: string;
  task_token: Buffer;
  backend: string;
  operation_id: string;
  with_operation: boolean;
  poll_max_interval_ms: number;
  next_interval_ms: number;
  heartbeat_every_ms: number;
  failures_known_zero: boolean;
  poll_due: boolean;
  heartbeat_due: boolean;
  /** The attempt's deadline has passed: Temporal has timed it out. */
  expired: boolean;
  /** The job is no longer pending (settled, cancelled): nothing waits for the attempt's result. */
  job_settled: boolean;
}

const CLAIM = prepared(
  'video-job-await-claim',
  `UPDATE video_job_awaits a SET lease_owner = $1, lease_until = now() + make_interval(secs => $3::float8 / 1000)
   FROM (SELECT job_id FROM video_job_awaits
         WHERE LEAST(next_poll_at, next_heartbeat_at) <= now() AND (lease_until IS NULL OR lease_until < now())
         ORDER BY LEAST(next_poll_at, next_heartbeat_at) LIMIT $2 FOR UPDATE SKIP LOCKED) due
   WHERE a.job_id = due.job_id
   RETURNING a.job_id, a.task_token, a.backend, a.operation_id, a.with_operation, a.poll_max_interval_ms, a.next_interval_ms,
     a.heartbeat_every_ms, a.failures_known_zero, a.next_poll_at <= now() AS poll_due, a.next_heartbeat_at <= now() AS heartbeat_due,
     COALESCE(a.ends_at <= now(), false) AS expired,
     COALESCE((SELECT j.status <> 'pending' FROM video_jobs j WHERE j.id = a.job_id), true) AS job_settled`,
);

/** Claims up to `limit` due rows for `owner` for `lease_ms` (rows another worker holds are skipped). */
export async function claimDueAwaits(db: Db, owner: string, limit: number, lease_ms: number): Promise<ClaimedAwait[]> {
  if (limit <= 0) return [];
  return (await db.query<ClaimedAwait>({ ...CLAIM, values: [owner, limit, lease_ms] })).rows;
}

/** When the row is next due; the rest of it stays. */
export interface AwaitRelease {
  /** null: the poll keeps its time. */
  next_poll_after_ms: number | null;
  next_interval_ms: number;
  /** null: the heartbeat keeps its time. */
  next_heartbeat_after_ms: number | null;
  failures_known_zero: boolean;
}

const RELEASE = prepared(
  'video-job-await-release',
  `UPDATE video_job_awaits SET lease_owner = NULL, lease_until = NULL,
     next_poll_at = COALESCE(now() + make_interval(secs => $4::float8 / 1000), next_poll_at), next_interval_ms = $5,
     next_heartbeat_at = COALESCE(now() + make_interval(secs => $6::float8 / 1000), next_heartbeat_at), failures_known_zero = $7
   WHERE job_id = $1 AND task_token = $2 AND lease_owner = $3`,
);

export async function releaseAwait(db: Db, row: ClaimedAwait, owner: string, r: AwaitRelease): Promise<void> {
  await db.query({ ...RELEASE, values: [row.job_id, row.task_token, owner, r.next_poll_after_ms, r.next_interval_ms, r.next_heartbeat_after_ms, r.failures_known_zero] });
}

const REMOVE = prepared('video-job-await-remove', 'DELETE FROM video_job_awaits WHERE job_id = $1 AND task_token = $2');

/** The attempt is over (completed, failed, cancelled, timed out, replaced): its row goes. */
export async function removeAwait(db: Db, row: Pick<ClaimedAwait, 'job_id' | 'task_token'>): Promise<void> {
  await db.query({ ...REMOVE, values: [row.job_id, row.task_token] });
}

/** A stopping worker's claims, given back at once so another worker's poller need not wait for them to expire. */
export async function releaseClaimsOf(db: Db, owner: string): Promise<number> {
  const r = await db.query('UPDATE video_job_awaits SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1', [owner]);
  return r.rowCount ?? 0;
}
