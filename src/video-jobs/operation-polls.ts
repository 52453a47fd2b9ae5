// The rows of video_job_polls (migration 010): one per submitted job until it settles. The submit
// activity records a job's operation and its row in one statement; the workers' pollers claim due rows
// by moving next_poll_at ahead (SKIP LOCKED: two pollers never take the same row), and set it again after
// each poll; a verified provider callback makes a row due as soon as its pacing allows (once per
// delivery: the row keeps the deliveries that nudged it); settlement deletes it.
import { setTimeout as sleep } from 'node:timers/promises';
import { prepared, type Db } from '../db/pool.js';
import { currentTraceParent } from '../telemetry/index.js';

/** How the poller paces a job's polls: the first after `interval_ms`, then growing by POLL_BACKOFF up to the max. */
export interface PollPacing {
  interval_ms: number;
  max_interval_ms: number;
}

/** Each poll of a running operation waits this much longer than the one before (up to the max interval). */
export const POLL_BACKOFF = 1.5;

/**
 * Records the job's operation and backend, and its poll row, atomically and only while the job is
 * pending (a job settled meanwhile, by a cancel, gets no row). A row that exists is made due at once,
 * its pacing kept: the recovery run of a job resumes its operation without waiting for the next poll.
 */
const RECORD = prepared(
  'video-job-record-operation',
  `WITH job AS (
     UPDATE video_jobs SET operation_id = $2, backend = $3, trace_parent = COALESCE(trace_parent, $7) WHERE id = $1 AND status = 'pending' RETURNING id)
   INSERT INTO video_job_polls (job_id, backend, operation_id, interval_ms, max_interval_ms, next_poll_at)
   SELECT id, $3, $2, $4, $5, now() + make_interval(secs => $6::float8 / 1000) FROM job
   ON CONFLICT (job_id) DO UPDATE SET backend = EXCLUDED.backend, operation_id = EXCLUDED.operation_id, next_poll_at = EXCLUDED.next_poll_at`,
);

/**
 * Whether it was recorded: false when the job is no longer pending (settled meanwhile). With tracing, the
 * submission's trace context is kept with the job (the first one: a recovery run's stays out), for the
 * polls and callbacks of its operation.
 */
export async function recordOperation(
  db: Db,
  r: { job_id: string; backend: string; operation_id: string; pacing: PollPacing; first_poll_after_ms: number },
): Promise<boolean> {
  const values = [
    r.job_id,
    r.operation_id,
    r.backend,
    r.pacing.interval_ms,
    Math.max(r.pacing.max_interval_ms, r.pacing.interval_ms),
    r.first_poll_after_ms,
    currentTraceParent(),
  ];
  const result = await db.query({ ...RECORD, values });
  return (result.rowCount ?? 0) > 0;
}

/** The operation recorded with a job, if it was submitted, with its backend and workspace. */
export interface RecordedOperation {
  operation_id: string | null;
  backend: string | null;
  workspace_id: string;
}

const RECORDED = prepared('video-job-recorded-operation', 'SELECT operation_id, backend, workspace_id FROM video_jobs WHERE id = $1');

export async function recordedOperation(db: Db, job_id: string): Promise<RecordedOperation | null> {
  return (await db.query<RecordedOperation>({ ...RECORDED, values: [job_id] })).rows[0] ?? null;
}

/** A claimed row: what to poll. */
export interface DuePoll {
  job_id: string;
  backend: string;
  operation_id: string;
  interval_ms: number;
  max_interval_ms: number;
  failures: number;
  /** The workflow was already told the operation ended (this claim is a reminder). */
  signalled: boolean;
}

/**
 * The least time between the start of a poll and one a provider's callback brings forward (the row's
 * interval when that is shorter): distinct deliveries arriving together (one per request of a job) poll
 * the provider once, not once each.
 */
export const NUDGE_MIN_GAP_MS = 1_000;

// A claimed row's poll starts now: no nudge makes the next one due before NUDGE_MIN_GAP_MS, and the
// nudges before it are answered by it.
const CLAIM = prepared(
  'video-job-polls-claim',
  `UPDATE video_job_polls p SET next_poll_at = now() + make_interval(secs => $2::float8 / 1000), nudge_pending = false,
     nudge_not_before = GREATEST(p.nudge_not_before, now() + make_interval(secs => LEAST(p.interval_ms, ${NUDGE_MIN_GAP_MS})::float8 / 1000))
   FROM (SELECT job_id FROM video_job_polls WHERE next_poll_at <= now() ORDER BY next_poll_at LIMIT $1 FOR UPDATE SKIP LOCKED) due
   WHERE p.job_id = due.job_id
   RETURNING p.job_id, p.backend, p.operation_id, p.interval_ms, p.max_interval_ms, p.failures, p.signalled_at IS NOT NULL AS signalled`,
);

/**
 * Claims up to `limit` due rows: each is pushed `lease_ms` ahead, so no other poller takes it meanwhile,
 * and a poller that dies mid-poll leaves it due again after that.
 */
export async function claimDuePolls(db: Db, limit: number, lease_ms: number): Promise<DuePoll[]> {
  if (limit <= 0) return [];
  return (await db.query<DuePoll>({ ...CLAIM, values: [limit, lease_ms] })).rows;
}

/** A row's next poll after one that found the operation running (or failed in passing). */
export interface PollReschedule {
  job_id: string;
  /** The next poll is due after this long. */
  wait_ms: number;
  interval_ms: number;
  failures: number;
  progress?: number | null | undefined;
  queue_position?: number | null | undefined;
}

/**
 * Reschedules many rows in one statement: each row's next poll after its `wait_ms`, its interval and
 * failure count set, and its job's progress moved forward (never back) where the provider gave it. After
 * a failed poll (failures > 0) its wait (the backoff, or the provider's Retry-After) also holds against
 * nudges. A row nudged while its poll was in progress stays due as the nudge made it (after a poll that
 * did not fail): that poll may have read the provider before the change the callback announced.
 */
const RESCHEDULE = prepared(
  'video-job-polls-reschedule',
  `WITH v AS (
     SELECT * FROM unnest($1::uuid[], $2::float8[], $3::integer[], $4::integer[], $5::smallint[], $6::integer[])
       AS v(job_id, wait_ms, interval_ms, failures, progress, queue_position)),
   progress AS (
     UPDATE video_jobs j SET progress = GREATEST(j.progress, v.progress), queue_position = LEAST(j.queue_position, v.queue_position)
       FROM v
      WHERE j.id = v.job_id AND (v.progress IS NOT NULL OR v.queue_position IS NOT NULL)
        AND (j.progress IS DISTINCT FROM GREATEST(j.progress, v.progress) OR j.queue_position IS DISTINCT FROM LEAST(j.queue_position, v.queue_position)))
   UPDATE video_job_polls p SET interval_ms = v.interval_ms, failures = v.failures,
     next_poll_at = CASE WHEN p.nudge_pending AND v.failures = 0 THEN LEAST(now() + make_interval(secs => v.wait_ms / 1000),
                                                                    GREATEST(now(), p.nudge_not_before))
                         ELSE now() + make_interval(secs => v.wait_ms / 1000) END,
     nudge_not_before = CASE WHEN v.failures > 0 THEN GREATEST(p.nudge_not_before, now() + make_interval(secs => v.wait_ms / 1000)) ELSE p.nudge_not_before END
     FROM v WHERE p.job_id = v.job_id`,
);

/** The most rows one reschedule statement carries. */
export const RESCHEDULE_ROWS_MAX = 500;

export async function reschedulePolls(db: Db, rows: readonly PollReschedule[]): Promise<void> {
  if (rows.length === 0) return;
  if (rows.length > RESCHEDULE_ROWS_MAX) throw new Error(`at most ${RESCHEDULE_ROWS_MAX} rows per reschedule, got ${rows.length}`);
  const progress = (p: number | null | undefined) => (p === null || p === undefined ? null : Math.min(Math.max(Math.round(p), 0), 100));
  const position = (q: number | null | undefined) => (q === null || q === undefined ? null : Math.max(Math.round(q), 0));
  await db.query({
    ...RESCHEDULE,
    values: [
      rows.map((r) => r.job_id),
      rows.map((r) => r.wait_ms),
      rows.map((r) => r.interval_ms),
      rows.map((r) => r.failures),
      rows.map((r) => progress(r.progress)),
      rows.map((r) => position(r.queue_position)),
    ],
  });
}

const SIGNALLED = prepared(
  'video-job-polls-signalled',
  `UPDATE video_job_polls SET signalled_at = now(), next_poll_at = now() + make_interval(secs => $2::float8 / 1000) WHERE job_id = $1`,
);

/** The workflow was told; it is reminded after `remind_after_ms` if it has not settled by then. */
export async function markSignalled(db: Db, job_id: string, remind_after_ms: number): Promise<void> {
  await db.query({ ...SIGNALLED, values: [job_id, remind_after_ms] });
}

const REMOVE = prepared('video-job-polls-remove', 'DELETE FROM video_job_polls WHERE job_id = $1');

/** The job has no running workflow to tell (it settled, or the reconciler will restart it): its row goes. */
export async function removePoll(db: Db, job_id: string): Promise<void> {
  await db.query({ ...REMOVE, values: [job_id] });
}

/** The deliveries a row keeps (the newest): a job's provider delivers far fewer within its 5-minute tolerance. */
export const CALLBACK_DELIVERIES_KEPT = 32;

const NUDGE = prepared(
  'video-job-polls-nudge',
  `UPDATE video_job_polls SET next_poll_at = LEAST(next_poll_at, GREATEST(now(), nudge_not_before)), nudge_pending = true,
     callback_deliveries = CASE WHEN $3::text IS NULL THEN callback_deliveries ELSE (ARRAY[$3::text] || callback_deliveries)[1:${CALLBACK_DELIVERIES_KEPT}] END
   WHERE job_id = $1 AND backend = $2 AND signalled_at IS NULL AND ($3::text IS NULL OR NOT ($3::text = ANY (callback_deliveries)))`,
);

/**
 * A provider said (by a verified callback, `delivery_id`) that the job's operation changed: it is polled
 * as soon as its pacing allows (not within NUDGE_MIN_GAP_MS of the start of the last poll, nor before
 * the wait a failed poll was given: its backoff, or the provider's Retry-After). Whether it was nudged:
 * an unknown job, a settled one, one waiting on another backend, one whose workflow was already told, or
 * a delivery that already nudged it changes nothing, however often it comes.
 */
export async function nudgePoll(db: Db, job_id: string, backend: string, delivery_id?: string): Promise<boolean> {
  return ((await db.query({ ...NUDGE, values: [job_id, backend, delivery_id ?? null] })).rowCount ?? 0) > 0;
}

const WAITING = prepared(
  'video-job-polls-waiting',
  'SELECT operation_id FROM video_job_polls WHERE job_id = $1 AND backend = $2 AND signalled_at IS NULL',
);

const SUBMITTING = prepared(
  'video-job-submitting',
  "SELECT 1 FROM video_jobs WHERE id = $1 AND status = 'pending' AND operation_id IS NULL",
);

/** How long a callback waits for its job's submission to be recorded, and how often it looks. */
export const CALLBACK_RECORD_WAIT_MS = 5_000;
const CALLBACK_RECORD_CHECK_MS = 50;

/** A verified provider callback for a job, with what tells whether it is about the job's operation. */
export interface JobCallback {
  job_id: string;
  backend: string;
  delivery_id: string;
  concerns: (operation_id: string) => boolean;
}

/**
 * nudgePoll for a provider's callback, once the callback is found to be about one of the requests of
 * the job's recorded operation ('not_this_job' otherwise: a provider signing every account's callbacks
 * alike makes another job's, or another customer's, delivery verify too). A provider may call back
 * before the submission that started the operation has recorded it (an operation that ends at once:
 * the callback races the provider's answer to the submit): while the job is pending with no operation
 * recorded, it looks again until it is recorded (at most `wait_ms`), so the callback is not lost until
 * the next poll.
 */
export async function nudgePollForCallback(
  db: Db,
  c: JobCallback,
  wait_ms = CALLBACK_RECORD_WAIT_MS,
): Promise<'nudged' | 'unchanged' | 'not_this_job'> {
  const until = Date.now() + wait_ms;
  const attempt = async (): Promise<'nudged' | 'unchanged' | 'not_this_job' | 'none'> => {
    const row = (await db.query<{ operation_id: string }>({ ...WAITING, values: [c.job_id, c.backend] })).rows[0];
    if (!row) return 'none';
    if (!c.concerns(row.operation_id)) return 'not_this_job';
    return (await nudgePoll(db, c.job_id, c.backend, c.delivery_id)) ? 'nudged' : 'unchanged';
  };
  for (;;) {
    const done = await attempt();
    if (done !== 'none') return done;
    const submitting = ((await db.query({ ...SUBMITTING, values: [c.job_id] })).rowCount ?? 0) > 0;
    // Not submitting any more: the operation may have been recorded between the look and this read
    // (its row and the job's operation are written together), so it looks once more.
    if (!submitting) {
      const last = await attempt();
      return last === 'none' ? 'unchanged' : last;
    }
    if (Date.now() >= until) return 'unchanged';
    await sleep(CALLBACK_RECORD_CHECK_MS);
  }
}
