// Video jobs' money: one charge when a create is accepted, at most one refund at settlement.
//
// Bounded acceptance (a create answered with anything but 2xx has charged nothing, now
// or later). Every create is one attempt. The workflow's charge and the API's refusal of an attempt it
// gave up on both run under the job's advisory lock, and each looks for the other first, so an attempt
// ends charged or refused, never both. The charge also refuses itself once the attempt's acceptance
// deadline has passed on the database clock, so a charge that starts late (pool wait, a stalled
// worker) can never commit after the API stopped waiting. The charge itself is one statement, the
// database function video_job_charge (src/db/migrations/008_video_job_charge.sql).
import { inTransaction, prepared, type Db, type Tx } from '../db/pool.js';
import { assertMicroEur } from '../money.js';
import type { VideoParams } from '../models/values.js';
import { applyEntry, lockWorkspaceBalance, NotFoundError, spendFromKey } from '../billing/ledger.js';
import { insertJobEvent, prepareJobEvent, type JobEventContext } from '../webhooks/events.js';
import { refundIntoReservation } from '../billing/reservations.js';

// A job's charge entry is keyed `video_job:<id>:charge` (written by video_job_charge, 008_video_job_charge.sql).
export const refundKey = (jobId: string) => `video_job:${jobId}:refund`;

/**
 * How long the API's refusal of an attempt waits for the job's lock: any charge of the job in flight
 * holds it meanwhile, and a charge is one statement whose every lock wait ends after 2 s
 * (video_job_charge's lock_timeout), so it is decided well within this.
 */
const REFUSAL_LOCK_TIMEOUT_MS = 30_000;

/** Serialises everything that decides one job's acceptance (charge, refusal), for this transaction. */
async function lockJob(tx: Tx, jobId: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('video_job:' || $1, 0))", [jobId]);
}

export interface VideoJobCharge {
  jobId: string;
  /** This create's attempt; absent only for jobs started by the first release (one attempt per job). */
  attemptId?: string | undefined;
  workflowId: string;
  workspaceId: string;
  model: string;
  prompt: string;
  params: VideoParams;
  /** Priced from the catalog by the caller (the charge activity), never taken from the request. */
  estimated_cost_micro_eur: number;
  /** Whether the videos have sound (priced differently); absent = the model's default. */
  generateAudio?: boolean | undefined;
  created_at_ms: number;
  request_fingerprint: string;
  /** The charge is refused once the database clock is past this (Unix ms); absent = no bound (first release). */
  accept_by_ms?: number | undefined;
  /** Record a 402 refusal (credits, key limit) for the job for good (the create had an Idempotency-Key). */
  sticky_refusal?: boolean | undefined;
  /** The API key that made the request: its spend limit applies, and its spend moves with the charge. */
  apiKeyId?: string | undefined;
  backend?: string | undefined;
  deadline_at_ms?: number | undefined;
  /** A batch's job: charged from the batch's reservation (../batches/billing.ts), not the balance. */
  batchId?: string | undefined;
}

export type ChargeResult =
  | { ok: true; balance_micro_eur: number; already_charged: boolean; estimated_cost_micro_eur: number }
  | { ok: false; reason: 'insufficient_credits'; balance_micro_eur: number }
  /** The API key's spend limit does not cover the estimate. */
  | { ok: false; reason: 'key_spend_limit_exceeded' }
  /** Too late (the acceptance deadline passed) or refused by the API: nothing charged, for good. */
  | { ok: false; reason: 'not_accepted_in_time' }
  /** The job was already charged by another attempt (an Idempotency-Key retry raced a run that accepted it). */
  | { ok: false; reason: 'charged_by_another_attempt' }
  /** The workspace already has its limit of pending jobs: nothing charged or recorded (a later retry may pass). */
  | { ok: false; reason: 'too_many_pending_jobs' };

interface JobAttemptRow {
  attempt_id: string | null;
  estimated_cost_micro_eur: number;
}

async function chargedAttempt(tx: Tx, jobId: string): Promise<JobAttemptRow | null> {
  const r = await tx.query<JobAttemptRow>('SELECT attempt_id, estimated_cost_micro_eur FROM video_jobs WHERE id = $1', [jobId]);
  return r.rows[0] ?? null;
}

/** Whether `attemptId` is the attempt that charged this job (jobs of the first release had one attempt, unnamed). */
const isSameAttempt = (row: JobAttemptRow, attemptId: string | undefined) =>
  row.attempt_id === null || attemptId === undefined || row.attempt_id === attemptId;

type RefusalReason = 'insufficient_credits' | 'key_spend_limit_exceeded' | 'not_accepted_in_time';

async function recordRefusal(
  tx: Tx,
  r: { jobId: string; attemptId: string; workspaceId: string; reason: RefusalReason; fingerprint: string },
): Promise<void> {
  await tx.query('SELECT video_job_record_refusal($1, $2, $3, $4, $5)', [r.jobId, r.attemptId, r.workspaceId, r.reason, r.fingerprint]);
}

/** A row of video_job_charge (src/db/migrations/008_video_job_charge.sql, replaced by 011_abuse_limits.sql). */
interface ChargeRow {
  outcome:
    | 'charged'
    | 'already_charged'
    | 'charged_by_another_attempt'
    | 'insufficient_credits'
    | 'key_spend_limit_exceeded'
    | 'not_accepted_in_time'
    | 'too_many_pending_jobs';
  before_micro_eur: number | null;
  after_micro_eur: number | null;
  charged_micro_eur: number | null;
}

const CHARGE = prepared(
  'video-job-charge',
  'SELECT outcome, before_micro_eur, after_micro_eur, charged_micro_eur FROM video_job_charge($1, $2, ' +
    '$3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)',
);

/**
 * Charges the estimate and records the job, atomically and idempotently per attempt: one statement
 * (the database function video_job_charge takes the job's lock, decides the attempt, locks the
 * workspace, records the job with its key's spend and appends the ledger entry). The function asserts
 * that the balance moved by the estimate before it commits; the figures it returns are checked again here.
 */
export async function chargeVideoJob(db: Db, job: VideoJobCharge): Promise<ChargeResult> {
  assertMicroEur(job.estimated_cost_micro_eur);
  if (!(job.estimated_cost_micro_eur > 0)) throw new Error('invariant: a video job costs more than 0');
  if (job.estimated_cost_micro_eur % job.params.n !== 0) throw new Error('invariant: estimate is n unit prices');
  const r = await db.query<ChargeRow>({
    ...CHARGE,
    values: [
      job.jobId,
      job.attemptId ?? null,
      job.workspaceId,
      job.workflowId,
      job.model,
      job.prompt,
      job.request_fingerprint,
      JSON.stringify(job.params),
      job.estimated_cost_micro_eur,
      job.created_at_ms,
      job.accept_by_ms ?? null,
      job.sticky_refusal === true,
      job.apiKeyId ?? null,
      job.backend ?? null,
      job.deadline_at_ms ?? null,
    ],
  });
  const row = r.rows[0];
  if (!row) throw new Error('invariant: video_job_charge returns one row');
  switch (row.outcome) {
    case 'charged': {
      const { before_micro_eur: before, after_micro_eur: after } = row;
      if (before === null || after === null || after < 0 || after !== before - job.estimated_cost_micro_eur) {
        throw new Error(`invariant: charge moved the balance by the estimate (${before} -> ${after})`);
      }
      if (row.charged_micro_eur !== job.estimated_cost_micro_eur) throw new Error('invariant: the job is charged its estimate');
      return { ok: true, balance_micro_eur: after, already_charged: false, estimated_cost_micro_eur: job.estimated_cost_micro_eur };
    }
    case 'already_charged':
      if (row.charged_micro_eur === null || row.after_micro_eur === null)
        throw new Error('invariant: a charged job has its estimate and workspace');
      return { ok: true, balance_micro_eur: row.after_micro_eur, already_charged: true, estimated_cost_micro_eur: row.charged_micro_eur };
    case 'insufficient_credits':
      return { ok: false, reason: 'insufficient_credits', balance_micro_eur: row.after_micro_eur ?? 0 };
    case 'charged_by_another_attempt':
    case 'key_spend_limit_exceeded':
    case 'not_accepted_in_time':
    case 'too_many_pending_jobs':
      return { ok: false, reason: row.outcome };
    default:
      throw new Error(`invariant: unknown charge outcome ${String((row as { outcome: unknown }).outcome)}`);
  }
}

export type AcceptanceDecision =
  /** The attempt was charged: the job exists and is this attempt's. */
  | { decision: 'charged'; estimated_cost_micro_eur: number }
  /** Another attempt (same Idempotency-Key) charged the job. */
  | { decision: 'charged_by_another_attempt' }
  /** The attempt is refused for good; nothing was or will be charged for it. */
  | { decision: 'refused' };

/**
 * Settles an attempt whose outcome nobody saw: the API that stopped waiting for it, or the workflow
 * whose charge step failed. Waits for any charge transaction of the job in flight (the job lock), then
 * either finds the charge or records the refusal that stops any later one.
 */
export async function decideAcceptance(
  db: Db,
  a: { jobId: string; attemptId: string; workspaceId: string; fingerprint: string },
): Promise<AcceptanceDecision> {
  return inTransaction(
    db,
    async (tx) => {
      await lockJob(tx, a.jobId);
      const charged = await chargedAttempt(tx, a.jobId);
      if (charged) {
        return isSameAttempt(charged, a.attemptId)
          ? { decision: 'charged', estimated_cost_micro_eur: charged.estimated_cost_micro_eur }
          : { decision: 'charged_by_another_attempt' };
      }
      await recordRefusal(tx, { ...a, reason: 'not_accepted_in_time' });
      return { decision: 'refused' };
    },
    {
      settings: `SET LOCAL lock_timeout = '${REFUSAL_LOCK_TIMEOUT_MS}ms'; SET LOCAL statement_timeout = '${REFUSAL_LOCK_TIMEOUT_MS + 5_000}ms'`,
    },
  );
}

/** What a new job's charge refuses, in the order it checks them. */
export type ForeseenRefusal = 'payment_required' | 'too_many_pending_jobs' | 'insufficient_credits' | 'key_spend_limit_exceeded';

/**
 * What the charge of a new job would refuse if it ran now (the workspace's pending jobs, its balance net of
 * holds, the key's spend limit: video_job_charge's checks, in its order), read without a lock or a write.
 * A create refused here writes nothing: no images, no workflow. The charge still decides every create it
 * lets through (a race with another create can still refuse it there).
 */
export async function foreseeRefusal(
  db: Db,
  a: { workspaceId: string; apiKeyId: string | undefined; estimated_cost_micro_eur: number },
): Promise<ForeseenRefusal | null> {
  const r = await db.query<{ owed: string; available: string; pending: number; pending_max: number; key_left: string | null }>(
    `SELECT w.owed_micro_eur AS owed, w.balance_micro_eur - w.held_micro_eur AS available,
            (SELECT count(*) FROM video_jobs j WHERE j.workspace_id = w.id AND j.status = 'pending')::int AS pending,
            COALESCE(w.max_pending_jobs, NULLIF(current_setting('video_api.max_pending_jobs', true), '')::integer, 50) AS pending_max,
            (SELECT k.spend_limit_micro_eur - k.spent_micro_eur FROM api_keys k WHERE k.id = $2::uuid) AS key_left
       FROM workspaces w WHERE w.id = $1`,
    [a.workspaceId, a.apiKeyId ?? null],
  );
  const row = r.rows[0];
  if (!row) return null;
  // While the workspace owes anything (a Stripe refund or dispute of spent credits), before any other check.
  if (Number(row.owed) > 0) return 'payment_required';
  if (row.pending >= row.pending_max) return 'too_many_pending_jobs';
  if (Number(row.available) < a.estimated_cost_micro_eur) return 'insufficient_credits';
  if (row.key_left !== null && Number(row.key_left) < a.estimated_cost_micro_eur) return 'key_spend_limit_exceeded';
  return null;
}

/**
 * Records, for good, the refusal of a create with an Idempotency-Key that was refused before its workflow
 * started (see foreseeRefusal), as its charge would have: the key then stays refused. Under the job's
 * lock; false (nothing recorded) when another attempt of the key has charged the job meanwhile.
 */
export async function recordForeseenRefusal(
  db: Db,
  a: {
    jobId: string;
    attemptId: string;
    workspaceId: string;
    fingerprint: string;
    reason: 'insufficient_credits' | 'key_spend_limit_exceeded';
  },
): Promise<boolean> {
  return inTransaction(
    db,
    async (tx) => {
      await lockJob(tx, a.jobId);
      if (await chargedAttempt(tx, a.jobId)) return false;
      await recordRefusal(tx, a);
      return true;
    },
    {
      settings: `SET LOCAL lock_timeout = '${REFUSAL_LOCK_TIMEOUT_MS}ms'; SET LOCAL statement_timeout = '${REFUSAL_LOCK_TIMEOUT_MS + 5_000}ms'`,
    },
  );
}

/** Why a job with this Idempotency-Key is refused for good (402). */
export interface StickyRefusal {
  request_fingerprint: string;
  reason: 'insufficient_credits' | 'key_spend_limit_exceeded';
}

/** The job's sticky refusal (a JSON StickyRefusal, or NULL), as an SQL expression of the job id in `param`. */
export const stickyRefusalSql = (param: `$${number}`): string =>
  `(SELECT json_build_object('request_fingerprint', request_fingerprint, 'reason', reason) FROM video_job_refusals
     WHERE job_id = ${param} AND reason <> 'not_accepted_in_time' LIMIT 1)`;

export interface StoredVideo {
  storage_key: string;
  content_type: string;
  bytes: number;
}

export interface Settlement {
  jobId: string;
  outcome: 'succeeded' | 'failed';
  /** Videos delivered to the customer (0 on failure). */
  delivered: number;
  videos: StoredVideo[];
  error: { code: string; message: string } | null;
  /**
   * A cancelled job whose provider bills requests the cancel stopped while they ran: their share of the
   * charge is kept, nothing delivered.
   */
  billed_without_delivery?: boolean;
  /**
   * With billed_without_delivery, the provider's counts (CancelAnswer): unit price x (billed - ended) is
   * kept. Absent when the cancel was answered by a worker of the previous release, which counted nothing:
   * the whole charge is then kept, as that release did.
   */
  cancel_units?: { billed_units: number; ended_units: number } | undefined;
  completed_at_ms: number;
}

export interface SettlementResult {
  status: 'succeeded' | 'failed';
  cost_micro_eur: number;
  refunded_micro_eur: number;
  already_settled: boolean;
  /** The job's error as settled (null when it succeeded). */
  error?: { code: string; message: string } | null;
}

/** What the settlement decides from the job's charge and what was delivered, its invariants asserted. */
function settledAmounts(job: { params: VideoParams; estimated_cost_micro_eur: number }, s: Settlement) {
  const n = job.params.n;
  const delivered = s.outcome === 'failed' ? 0 : s.delivered;
  if (!(Number.isInteger(delivered) && delivered >= 0 && delivered <= n)) {
    throw new Error(`invariant: delivered ${delivered} of ${n}`);
  }
  if (s.outcome === 'succeeded' && s.videos.length !== delivered) throw new Error('invariant: one stored video per delivered video');
  const unit = job.estimated_cost_micro_eur / n;
  const billed = s.outcome === 'failed' && s.billed_without_delivery === true;
  const billedUnits = billed ? cancelBilledUnits(s.cancel_units, n) : null;
  const cost = unit * (delivered + (billedUnits ?? 0));
  const refund = job.estimated_cost_micro_eur - cost;
  if (!(Number.isSafeInteger(unit) && cost >= 0 && refund >= 0 && cost + refund === job.estimated_cost_micro_eur)) {
    throw new Error('invariant: cost + refund = charge');
  }
  // A job that delivers nothing has failed, whatever the provider said.
  const status: 'succeeded' | 'failed' = delivered === 0 ? 'failed' : 'succeeded';
  const error = status === 'failed' ? (s.error ?? { code: 'no_videos', message: 'the provider returned no videos' }) : null;
  const videos = status === 'succeeded' ? s.videos : [];
  return { billed, billedUnits, cost, refund, status, error, videos };
}

/**
 * The units a cancelled job is charged without delivery: the requests its provider bills that the cancel
 * stopped while they ran (billed - ended), at most n; all n when the answer counted nothing.
 */
function cancelBilledUnits(counts: Settlement['cancel_units'], n: number): number {
  if (counts === undefined) return n;
  const { billed_units: billed, ended_units: ended } = counts;
  if (!(Number.isInteger(billed) && Number.isInteger(ended) && ended >= 0 && billed >= ended)) {
    throw new Error(`invariant: cancel counts ${JSON.stringify(counts)}`);
  }
  return Math.min(billed - ended, n);
}

/**
 * Keeps the charge for what was delivered and refunds the rest, once. With `webhooks`, the job's webhook
 * event and its deliveries are recorded in the same transaction (started after commit by the caller).
 */
export async function settleVideoJob(db: Db, s: Settlement, webhooks?: JobEventContext): Promise<SettlementResult> {
  return inTransaction(db, async (tx) => {
    const r = await tx.query<{
      workspace_id: string;
      status: string;
      params: VideoParams;
      estimated_cost_micro_eur: number;
      cost_micro_eur: number | null;
      refunded_micro_eur: number;
      error: { code: string; message: string } | null;
      api_key_id: string | null;
      batch_id: string | null;
    }>(
      // batch_id read from the row as JSON: absent (null) on a schema before migration 027.
      'SELECT workspace_id, status, params, estimated_cost_micro_eur, cost_micro_eur, refunded_micro_eur, ' +
        "error, api_key_id, (to_jsonb(j) ->> 'batch_id')::uuid AS batch_id FROM video_jobs j WHERE id = $1 FOR UPDATE",
      [s.jobId],
    );
    const job = r.rows[0];
    if (!job) throw new NotFoundError(`video job ${s.jobId} was never charged`);
    if (job.status !== 'pending') {
      return {
        status: job.status as 'succeeded' | 'failed',
        cost_micro_eur: job.cost_micro_eur!,
        refunded_micro_eur: job.refunded_micro_eur,
        already_settled: true,
        error: job.error,
      };
    }
    const { billed, billedUnits, cost, refund, status, error, videos } = settledAmounts(job, s);
    // The webhook event's body (download URLs signed: possibly a network call) before the workspace lock.
    const event = webhooks
      ? await prepareJobEvent(
          tx,
          s.jobId,
          { status, cost_micro_eur: cost, refunded_micro_eur: refund, videos, error, completed_at_ms: s.completed_at_ms },
          webhooks,
        )
      : null;
    await lockWorkspaceBalance(tx, job.workspace_id);
    // A batch's job refunds into the batch's reservation (released with the batch), not the balance.
    if (refund > 0 && job.batch_id !== null) {
      await refundIntoReservation(tx, job.batch_id, refund);
    } else if (refund > 0) {
      await applyEntry(tx, {
        workspaceId: job.workspace_id,
        kind: 'refund',
        amount_micro_eur: refund,
        idempotencyKey: refundKey(s.jobId),
        videoJobId: s.jobId,
      });
      // The key's spend is net of refunds.
      if (job.api_key_id !== null && !(await spendFromKey(tx, job.api_key_id, -refund)))
        throw new Error('invariant: a refund goes back to its key');
    }
    await tx.query(
      `UPDATE video_jobs SET status = $2, cost_micro_eur = $3, refunded_micro_eur = $4, videos = $5, error = $6,
         completed_at = to_timestamp($7 / 1000.0), cancel_billed = $8, cancel_billed_units = $9 WHERE id = $1`,
      [s.jobId, status, cost, refund, JSON.stringify(videos), error && JSON.stringify(error), s.completed_at_ms, billed, billedUnits],
    );
    // Nothing is polled for a settled job.
    await tx.query('DELETE FROM video_job_polls WHERE job_id = $1', [s.jobId]);
    if (event) await insertJobEvent(tx, event);
    return { status, cost_micro_eur: cost, refunded_micro_eur: refund, already_settled: false, error };
  });
}
