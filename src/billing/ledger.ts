// The credit ledger. Every balance change is one append-only ledger entry with a unique idempotency
// key, written in the same transaction as the balance update; the workspace row lock serialises
// concurrent changes, and the CHECK (balance >= 0) makes an overdraft impossible even if code erred.
import { randomUUID } from 'node:crypto';
import { inTransaction, type Db, type Tx } from '../db/pool.js';
import { assertMicroEur, MAX_AMOUNT_MICRO_EUR } from '../money.js';
import type { VideoParams } from '../catalog.js';
import { recordJobEvent, type JobEventContext } from '../webhooks/events.js';

export class NotFoundError extends Error {}

const UNIQUE_VIOLATION = '23505';

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === UNIQUE_VIOLATION;
}

async function lockWorkspaceBalance(tx: Tx, workspaceId: string): Promise<number> {
  const r = await tx.query<{ balance_micro_eur: number }>(
    'SELECT balance_micro_eur FROM workspaces WHERE id = $1 FOR UPDATE',
    [workspaceId],
  );
  const row = r.rows[0];
  if (!row) throw new NotFoundError(`workspace ${workspaceId} not found`);
  return row.balance_micro_eur;
}

async function applyEntry(
  tx: Tx,
  entry: {
    workspaceId: string;
    kind: 'topup' | 'charge' | 'refund';
    amount_micro_eur: number;
    idempotencyKey: string;
    videoJobId?: string;
    topupId?: string;
    speechRequestId?: string;
  },
): Promise<number> {
  assertMicroEur(entry.amount_micro_eur);
  if (entry.amount_micro_eur === 0) throw new Error('ledger entries are never zero');
  // balance_after_micro_eur (the statement's balance after this entry): read under the caller's
  // workspace row lock, so it is the balance the UPDATE below leaves.
  await tx.query(
    `INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, video_job_id, topup_id, speech_request_id, balance_after_micro_eur)
     VALUES ($1, $2, $3, $4, $5, $6, $7, (SELECT balance_micro_eur + $3 FROM workspaces WHERE id = $1))`,
    [
      entry.workspaceId,
      entry.kind,
      entry.amount_micro_eur,
      entry.idempotencyKey,
      entry.videoJobId ?? null,
      entry.topupId ?? null,
      entry.speechRequestId ?? null,
    ],
  );
  const r = await tx.query<{ balance_micro_eur: number }>(
    'UPDATE workspaces SET balance_micro_eur = balance_micro_eur + $2 WHERE id = $1 RETURNING balance_micro_eur',
    [entry.workspaceId, entry.amount_micro_eur],
  );
  const balance = r.rows[0]?.balance_micro_eur;
  if (balance === undefined || balance < 0) throw new Error(`invariant: balance of ${entry.workspaceId} would be ${balance}`);
  return balance;
}

async function entryExists(tx: Tx, idempotencyKey: string): Promise<boolean> {
  const r = await tx.query('SELECT 1 FROM ledger_entries WHERE idempotency_key = $1', [idempotencyKey]);
  return r.rowCount === 1;
}

// ---------------------------------------------------------------------------------------------
// Top-ups

export async function addCredits(
  db: Db,
  input: { workspaceId: string; amount_micro_eur: number; idempotencyKey?: string },
): Promise<{ balance_micro_eur: number; topup_id: string }> {
  try {
    return await inTransaction(db, (tx) => addCreditsIn(tx, input));
  } catch (err) {
    if (isUniqueViolation(err)) return addCredits(db, input);
    throw err;
  }
}

/** A top-up inside the caller's transaction (e.g. with the creation of the workspace). */
export async function addCreditsIn(
  tx: Tx,
  input: { workspaceId: string; amount_micro_eur: number; idempotencyKey?: string },
): Promise<{ balance_micro_eur: number; topup_id: string }> {
  if (!(input.amount_micro_eur > 0 && input.amount_micro_eur <= MAX_AMOUNT_MICRO_EUR)) {
    throw new RangeError(`top-up amount out of range: ${input.amount_micro_eur}`);
  }
  const idempotencyKey = `topup:${input.workspaceId}:${input.idempotencyKey ?? randomUUID()}`;
  await lockWorkspaceBalance(tx, input.workspaceId);
  const existing = await tx.query<{ topup_id: string }>(
    'SELECT topup_id FROM ledger_entries WHERE idempotency_key = $1',
    [idempotencyKey],
  );
  if (existing.rows[0]) {
    const b = await tx.query<{ balance_micro_eur: number }>('SELECT balance_micro_eur FROM workspaces WHERE id = $1', [input.workspaceId]);
    return { balance_micro_eur: b.rows[0]!.balance_micro_eur, topup_id: existing.rows[0].topup_id };
  }
  const topupId = randomUUID();
  await tx.query('INSERT INTO topups (id, workspace_id, amount_micro_eur) VALUES ($1, $2, $3)', [
    topupId,
    input.workspaceId,
    input.amount_micro_eur,
  ]);
  const balance = await applyEntry(tx, {
    workspaceId: input.workspaceId,
    kind: 'topup',
    amount_micro_eur: input.amount_micro_eur,
    idempotencyKey,
    topupId,
  });
  return { balance_micro_eur: balance, topup_id: topupId };
}

// ---------------------------------------------------------------------------------------------
// Video jobs: one charge at creation, at most one refund at settlement.

export interface VideoJobCharge {
  jobId: string;
  workflowId: string;
  workspaceId: string;
  model: string;
  prompt: string;
  params: VideoParams;
  estimated_cost_micro_eur: number;
  created_at_ms: number;
  request_fingerprint: string;
}

export type ChargeResult =
  | { ok: true; balance_micro_eur: number; already_charged: boolean }
  | { ok: false; reason: 'insufficient_credits'; balance_micro_eur: number };

export const chargeKey = (jobId: string) => `video_job:${jobId}:charge`;
export const refundKey = (jobId: string) => `video_job:${jobId}:refund`;

/** Charges the estimate and records the job, atomically and idempotently. */
export async function chargeVideoJob(db: Db, job: VideoJobCharge): Promise<ChargeResult> {
  assertMicroEur(job.estimated_cost_micro_eur);
  if (!(job.estimated_cost_micro_eur > 0)) throw new Error('invariant: a video job costs more than 0');
  if (job.estimated_cost_micro_eur % job.params.n !== 0) throw new Error('invariant: estimate is n unit prices');
  return inTransaction(db, async (tx) => {
    // Well inside the charge's 10 s local-activity timeout: an attempt Temporal has given up on
    // cannot commit later, after a retry decided otherwise.
    await tx.query("SET LOCAL statement_timeout = '4s'; SET LOCAL lock_timeout = '3s'");
    const balance = await lockWorkspaceBalance(tx, job.workspaceId);
    if (await entryExists(tx, chargeKey(job.jobId))) {
      return { ok: true, balance_micro_eur: balance, already_charged: true };
    }
    if (balance < job.estimated_cost_micro_eur) {
      return { ok: false, reason: 'insufficient_credits', balance_micro_eur: balance };
    }
    await tx.query(
      `INSERT INTO video_jobs (id, workspace_id, workflow_id, model, prompt, request_fingerprint, params, status, estimated_cost_micro_eur, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, to_timestamp($9 / 1000.0))`,
      [job.jobId, job.workspaceId, job.workflowId, job.model, job.prompt, job.request_fingerprint, JSON.stringify(job.params), job.estimated_cost_micro_eur, job.created_at_ms],
    );
    const after = await applyEntry(tx, {
      workspaceId: job.workspaceId,
      kind: 'charge',
      amount_micro_eur: -job.estimated_cost_micro_eur,
      idempotencyKey: chargeKey(job.jobId),
      videoJobId: job.jobId,
    });
    if (after !== balance - job.estimated_cost_micro_eur) throw new Error('invariant: charge moved the balance by the estimate');
    return { ok: true, balance_micro_eur: after, already_charged: false };
  });
}

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
  completed_at_ms: number;
}

export interface SettlementResult {
  status: 'succeeded' | 'failed';
  cost_micro_eur: number;
  refunded_micro_eur: number;
  already_settled: boolean;
}

/**
 * Keeps the charge for what was delivered and refunds the rest, once. With `webhooks` (issue 10), the
 * job's webhook event and its deliveries are recorded in the same transaction.
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
    }>('SELECT workspace_id, status, params, estimated_cost_micro_eur, cost_micro_eur, refunded_micro_eur FROM video_jobs WHERE id = $1 FOR UPDATE', [s.jobId]);
    const job = r.rows[0];
    if (!job) throw new NotFoundError(`video job ${s.jobId} was never charged`);
    if (job.status !== 'pending') {
      return {
        status: job.status as 'succeeded' | 'failed',
        cost_micro_eur: job.cost_micro_eur!,
        refunded_micro_eur: job.refunded_micro_eur,
        already_settled: true,
      };
    }
    const n = job.params.n;
    const delivered = s.outcome === 'failed' ? 0 : s.delivered;
    if (!(Number.isInteger(delivered) && delivered >= 0 && delivered <= n)) {
      throw new Error(`invariant: delivered ${delivered} of ${n}`);
    }
    if (s.outcome === 'succeeded' && s.videos.length !== delivered) throw new Error('invariant: one stored video per delivered video');
    const unit = job.estimated_cost_micro_eur / n;
    const cost = unit * delivered;
    const refund = job.estimated_cost_micro_eur - cost;
    if (!(Number.isSafeInteger(unit) && cost >= 0 && refund >= 0 && cost + refund === job.estimated_cost_micro_eur)) {
      throw new Error('invariant: cost + refund = charge');
    }
    // A job that delivers nothing has failed, whatever the provider said.
    const status = delivered === 0 ? 'failed' : 'succeeded';
    const error = status === 'failed' ? (s.error ?? { code: 'no_videos', message: 'the provider returned no videos' }) : null;
    await tx.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [job.workspace_id]);
    if (refund > 0) {
      await applyEntry(tx, {
        workspaceId: job.workspace_id,
        kind: 'refund',
        amount_micro_eur: refund,
        idempotencyKey: refundKey(s.jobId),
        videoJobId: s.jobId,
      });
    }
    await tx.query(
      `UPDATE video_jobs SET status = $2, cost_micro_eur = $3, refunded_micro_eur = $4, videos = $5, error = $6,
         completed_at = to_timestamp($7 / 1000.0) WHERE id = $1`,
      [s.jobId, status, cost, refund, JSON.stringify(status === 'succeeded' ? s.videos : []), error && JSON.stringify(error), s.completed_at_ms],
    );
    // Webhooks (issue 10): the job's event and one delivery per subscribed endpoint, committed with
    // the settlement, only when it settles; the settle activity starts the deliveries after commit.
    if (webhooks) await recordJobEvent(tx, s.jobId, webhooks);
    return { status, cost_micro_eur: cost, refunded_micro_eur: refund, already_settled: false };
  });
}

// ---------------------------------------------------------------------------------------------
// Speech: one charge per delivered speech request, recorded with the request; never refunded.

export interface SpeechCharge {
  speechRequestId: string;
  workspaceId: string;
  /** The client's Idempotency-Key (or a fresh one): the same key from the same workspace is charged once. */
  idempotencyKey: string;
  requestFingerprint: string;
  model: string;
  voice: string;
  voiceRegistryId: string | null;
  characters: number;
  responseFormat: string;
  audioBytes: number;
  cost_micro_eur: number;
}

export type SpeechChargeResult =
  | { ok: true; speech_request_id: string; cost_micro_eur: number; balance_micro_eur: number; already_charged: boolean }
  | { ok: false; reason: 'insufficient_credits'; balance_micro_eur: number }
  | { ok: false; reason: 'idempotency_key_reused' };

export const speechChargeKey = (speechRequestId: string) => `speech_request:${speechRequestId}:charge`;

/** Records the speech request and charges its cost, atomically and once per (workspace, idempotency key). */
export async function chargeSpeech(db: Db, s: SpeechCharge): Promise<SpeechChargeResult> {
  assertMicroEur(s.cost_micro_eur);
  if (!(s.cost_micro_eur > 0)) throw new Error('invariant: speech costs more than 0');
  if (!(Number.isSafeInteger(s.characters) && s.characters > 0 && s.audioBytes > 0)) throw new Error('invariant: speech of characters and bytes');
  try {
    return await inTransaction(db, async (tx): Promise<SpeechChargeResult> => {
      const balance = await lockWorkspaceBalance(tx, s.workspaceId);
      const existing = await tx.query<{ id: string; request_fingerprint: string; cost_micro_eur: number }>(
        'SELECT id, request_fingerprint, cost_micro_eur FROM speech_requests WHERE workspace_id = $1 AND idempotency_key = $2',
        [s.workspaceId, s.idempotencyKey],
      );
      const prior = existing.rows[0];
      if (prior) {
        if (prior.request_fingerprint !== s.requestFingerprint) return { ok: false, reason: 'idempotency_key_reused' };
        return { ok: true, speech_request_id: prior.id, cost_micro_eur: prior.cost_micro_eur, balance_micro_eur: balance, already_charged: true };
      }
      if (balance < s.cost_micro_eur) return { ok: false, reason: 'insufficient_credits', balance_micro_eur: balance };
      await tx.query(
        `INSERT INTO speech_requests (id, workspace_id, idempotency_key, request_fingerprint, model, voice, voice_registry_id,
                                      characters, response_format, audio_bytes, cost_micro_eur)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          s.speechRequestId,
          s.workspaceId,
          s.idempotencyKey,
          s.requestFingerprint,
          s.model,
          s.voice,
          s.voiceRegistryId,
          s.characters,
          s.responseFormat,
          s.audioBytes,
          s.cost_micro_eur,
        ],
      );
      const after = await applyEntry(tx, {
        workspaceId: s.workspaceId,
        kind: 'charge',
        amount_micro_eur: -s.cost_micro_eur,
        idempotencyKey: speechChargeKey(s.speechRequestId),
        speechRequestId: s.speechRequestId,
      });
      if (after !== balance - s.cost_micro_eur) throw new Error('invariant: charge moved the balance by the cost');
      return { ok: true, speech_request_id: s.speechRequestId, cost_micro_eur: s.cost_micro_eur, balance_micro_eur: after, already_charged: false };
    });
  } catch (err) {
    if (isUniqueViolation(err)) return chargeSpeech(db, s);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Audit

export interface AuditReport {
  ok: boolean;
  workspaces_checked: number;
  jobs_checked: number;
  ledger_entries: number;
  balance_mismatches: { workspace_id: string; balance_micro_eur: number; ledger_sum_micro_eur: number }[];
  job_mismatches: { job_id: string; status: string; expected_net_charge_micro_eur: number; ledger_net_charge_micro_eur: number }[];
  speech_requests_checked: number;
  speech_mismatches: { speech_request_id: string; cost_micro_eur: number; ledger_net_charge_micro_eur: number }[];
}

const MISMATCH_LIMIT = 100;

export async function auditLedger(db: Db): Promise<AuditReport> {
  return inTransaction(db, async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const balances = await tx.query<{ workspace_id: string; balance_micro_eur: number; ledger_sum_micro_eur: number }>(
      `SELECT w.id AS workspace_id, w.balance_micro_eur, COALESCE(SUM(l.amount_micro_eur), 0)::bigint AS ledger_sum_micro_eur
         FROM workspaces w LEFT JOIN ledger_entries l ON l.workspace_id = w.id GROUP BY w.id`,
    );
    // A pending job's net charge is its estimate; a finished job's is its actual cost.
    const jobs = await tx.query<{ job_id: string; status: string; expected_net_charge_micro_eur: number; ledger_net_charge_micro_eur: number }>(
      `SELECT j.id AS job_id, j.status,
              COALESCE(j.cost_micro_eur, j.estimated_cost_micro_eur) AS expected_net_charge_micro_eur,
              (-COALESCE(SUM(l.amount_micro_eur), 0))::bigint AS ledger_net_charge_micro_eur
         FROM video_jobs j LEFT JOIN ledger_entries l ON l.video_job_id = j.id GROUP BY j.id
       UNION ALL
       -- A finished job's cost is recomputed from what it delivered: (estimate / n) per stored video.
       SELECT j.id, j.status || ':cost',
              (j.estimated_cost_micro_eur / (j.params->>'n')::int) * jsonb_array_length(j.videos), j.cost_micro_eur
         FROM video_jobs j
        WHERE j.status <> 'pending'
          AND j.cost_micro_eur <> (j.estimated_cost_micro_eur / (j.params->>'n')::int) * jsonb_array_length(j.videos)
       UNION ALL
       -- Every entry of a job is booked to the job's own workspace.
       SELECT j.id, j.status || ':workspace', 0, count(*)
         FROM video_jobs j JOIN ledger_entries l ON l.video_job_id = j.id AND l.workspace_id <> j.workspace_id
        GROUP BY j.id, j.status`,
    );
    // A speech request's net charge is its recorded cost.
    const speech = await tx.query<{ speech_request_id: string; cost_micro_eur: number; ledger_net_charge_micro_eur: number }>(
      `SELECT s.id AS speech_request_id, s.cost_micro_eur,
              (-COALESCE(SUM(l.amount_micro_eur), 0))::bigint AS ledger_net_charge_micro_eur
         FROM speech_requests s LEFT JOIN ledger_entries l ON l.speech_request_id = s.id GROUP BY s.id`,
    );
    const entries = await tx.query<{ n: number }>('SELECT count(*)::bigint AS n FROM ledger_entries');
    const balance_mismatches = balances.rows.filter((r) => r.balance_micro_eur !== r.ledger_sum_micro_eur);
    const job_mismatches = jobs.rows.filter((r) => r.expected_net_charge_micro_eur !== r.ledger_net_charge_micro_eur);
    const speech_mismatches = speech.rows.filter((r) => r.cost_micro_eur !== r.ledger_net_charge_micro_eur);
    return {
      ok: balance_mismatches.length === 0 && job_mismatches.length === 0 && speech_mismatches.length === 0,
      workspaces_checked: balances.rowCount ?? 0,
      jobs_checked: jobs.rowCount ?? 0,
      ledger_entries: entries.rows[0]!.n,
      balance_mismatches: balance_mismatches.slice(0, MISMATCH_LIMIT),
      job_mismatches: job_mismatches.slice(0, MISMATCH_LIMIT),
      speech_requests_checked: speech.rowCount ?? 0,
      speech_mismatches: speech_mismatches.slice(0, MISMATCH_LIMIT),
    };
  });
}
