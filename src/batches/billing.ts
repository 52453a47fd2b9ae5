// A batch's money: one reservation, requests charged from it, one release of what was not used.
//
// Creating a batch reserves the sum of its requests' estimates as one ledger charge carrying batch_id
// (the workspace's balance and the API key's spend move by it, under the workspace lock). Each request
// then runs as it would alone, but its charge is drawn from the reservation (batches.remaining_micro_eur)
// and its refund goes back into it: its job or speech row carries batch_id and has no ledger entry of its
// own. Requests never started (cancelled, expired) cost nothing and their share stays in the reservation;
// when the batch ends, everything not used (theirs included) returns as one ledger refund carrying
// batch_id, so a batch has at most two ledger entries. Lock order: the workspace, then the batch.
// The ledger audit (../billing/audit.ts) checks reserved = requests' net charges + released + remaining.
import { inTransaction, type Db, type Tx } from '../db/pool.js';
import { assertMicroEur } from '../money.js';
import { applyEntry, lockWorkspaceBalance, spendFromKey } from '../billing/ledger.js';
import { drawFromReservation } from '../billing/reservations.js';
import type { VideoJobCharge, ChargeResult } from '../video-jobs/billing.js';

export const reserveKey = (batchId: string) => `batch:${batchId}:reserve`;
export const releaseKey = (batchId: string) => `batch:${batchId}:release:end`;

export type BatchItemKind = 'video' | 'speech';

export interface NewBatchItem {
  idx: number;
  custom_id: string | null;
  kind: BatchItemKind;
  /** What the request runs, as validated (its job's or speech's input). */
  request: Record<string, unknown>;
  estimated_cost_micro_eur: number;
  /** The id of the job or speech request it becomes. */
  request_id: string;
}

export interface NewBatch {
  id: string;
  workspaceId: string;
  apiKeyId: string | undefined;
  endpoint: string | null;
  inputFileId: string | null;
  metadata: Record<string, string> | null;
  expires_at_ms: number;
  items: NewBatchItem[];
}

export type ReserveResult =
  | { ok: true; reserved_micro_eur: number }
  | { ok: false; reason: 'insufficient_credits'; available_micro_eur: number; reserved_micro_eur: number }
  | { ok: false; reason: 'key_spend_limit_exceeded'; reserved_micro_eur: number }
  | { ok: false; reason: 'payment_required'; owed_micro_eur: number };

/** Records the batch with its requests and reserves the sum of their estimates, or nothing at all. */
export async function reserveBatch(db: Db, b: NewBatch): Promise<ReserveResult> {
  let total = 0;
  for (const item of b.items) {
    assertMicroEur(item.estimated_cost_micro_eur);
    total += item.estimated_cost_micro_eur;
  }
  assertMicroEur(total);
  if (!(total > 0)) throw new Error('invariant: a batch costs more than 0');
  return inTransaction(db, async (tx): Promise<ReserveResult> => {
    const locked = await lockWorkspaceBalance(tx, b.workspaceId);
    // A workspace that owes (a refund or dispute took back credits already spent) starts no paid work.
    if (locked.owed_micro_eur > 0) return { ok: false, reason: 'payment_required', owed_micro_eur: locked.owed_micro_eur };
    if (locked.available_micro_eur < total)
      return { ok: false, reason: 'insufficient_credits', available_micro_eur: locked.available_micro_eur, reserved_micro_eur: total };
    if (b.apiKeyId !== undefined && !(await spendFromKey(tx, b.apiKeyId, total)))
      return { ok: false, reason: 'key_spend_limit_exceeded', reserved_micro_eur: total };
    await tx.query(
      `INSERT INTO batches (id, workspace_id, api_key_id, endpoint, status, total, reserved_micro_eur, remaining_micro_eur,
                            input_file_id, metadata, expires_at)
       VALUES ($1, $2, $3, $4, 'in_progress', $5, $6, $6, $7, $8, to_timestamp($9 / 1000.0))`,
      [
        b.id,
        b.workspaceId,
        b.apiKeyId ?? null,
        b.endpoint,
        b.items.length,
        total,
        b.inputFileId,
        b.metadata && JSON.stringify(b.metadata),
        b.expires_at_ms,
      ],
    );
    await tx.query(
      `INSERT INTO batch_items (batch_id, idx, custom_id, kind, request, estimated_cost_micro_eur, request_id)
       SELECT $1, i.idx, i.custom_id, i.kind, i.request, i.estimated_cost_micro_eur, i.request_id
         FROM jsonb_to_recordset($2::jsonb) AS i(idx int, custom_id text, kind text, request jsonb, estimated_cost_micro_eur bigint, request_id uuid)`,
      [b.id, JSON.stringify(b.items)],
    );
    await applyEntry(tx, {
      workspaceId: b.workspaceId,
      kind: 'charge',
      amount_micro_eur: -total,
      idempotencyKey: reserveKey(b.id),
      batchId: b.id,
    });
    return { ok: true, reserved_micro_eur: total };
  });
}

/**
 * Locks the batch's row to record one of its requests (a video job's charge, a speech's end), after a share
 * lock on its workspace's row: the request's row and its usage rollup take that share lock anyway (their
 * foreign keys), and a stop or a batch's end locks the workspace before the batch. Taken after the batch,
 * the two could each wait for the other (a deadlock: the cancel or the charge failing).
 */
export async function lockBatchToRecord(tx: Tx, workspaceId: string, batchId: string): Promise<void> {
  await tx.query('SELECT 1 FROM workspaces WHERE id = $1 FOR KEY SHARE', [workspaceId]);
  await lockBatch(tx, batchId);
}

/** Locks the batch's row for the rest of the transaction (after the workspace's, when both are taken). */
async function lockBatch(tx: Tx, batchId: string) {
  const r = await tx.query<{
    workspace_id: string;
    api_key_id: string | null;
    status: string;
    ending: string | null;
    remaining_micro_eur: number;
  }>('SELECT workspace_id, api_key_id, status, ending, remaining_micro_eur FROM batches WHERE id = $1 FOR UPDATE', [batchId]);
  const row = r.rows[0];
  if (!row) throw new Error(`invariant: batch ${batchId} does not exist`);
  return row;
}

/**
 * A batch's video job charged from its reservation: the job recorded (pending, its estimate the one
 * reserved for it), the reservation reduced by it; no ledger entry, no key spend (both moved with the
 * reservation). Under the job's lock, as every charge: a replay finds the job and charges nothing.
 */
export async function chargeBatchVideoJob(db: Db, batchId: string, job: VideoJobCharge): Promise<ChargeResult> {
  return inTransaction(db, async (tx): Promise<ChargeResult> => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('video_job:' || $1, 0))", [job.jobId]);
    const balance = async () =>
      (await tx.query<{ b: number }>('SELECT balance_micro_eur AS b FROM workspaces WHERE id = $1', [job.workspaceId])).rows[0]!.b;
    const existing = await tx.query<{ estimated_cost_micro_eur: number }>('SELECT estimated_cost_micro_eur FROM video_jobs WHERE id = $1', [
      job.jobId,
    ]);
    if (existing.rows[0])
      return {
        ok: true,
        already_charged: true,
        balance_micro_eur: await balance(),
        estimated_cost_micro_eur: existing.rows[0].estimated_cost_micro_eur,
      };
    await lockBatchToRecord(tx, job.workspaceId, batchId);
    const item = await tx.query<{ estimated_cost_micro_eur: number }>(
      "SELECT estimated_cost_micro_eur FROM batch_items WHERE batch_id = $1 AND request_id = $2 AND kind = 'video'",
      [batchId, job.jobId],
    );
    const estimate = item.rows[0]?.estimated_cost_micro_eur;
    if (estimate === undefined) throw new Error(`invariant: job ${job.jobId} is no video request of batch ${batchId}`);
    await drawFromReservation(tx, batchId, estimate, `its job ${job.jobId}`);
    await tx.query(
      `INSERT INTO video_jobs (id, workspace_id, workflow_id, model, prompt, request_fingerprint, params, status, estimated_cost_micro_eur,
                               created_at, attempt_id, backend, deadline_at, api_key_id, batch_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, to_timestamp($9 / 1000.0), $10, $11, to_timestamp($12 / 1000.0), $13, $14)`,
      [
        job.jobId,
        job.workspaceId,
        job.workflowId,
        job.model,
        job.prompt,
        job.request_fingerprint,
        JSON.stringify(job.params),
        estimate,
        job.created_at_ms,
        job.attemptId ?? null,
        job.backend ?? null,
        job.deadline_at_ms ?? null,
        job.apiKeyId ?? null,
        batchId,
      ],
    );
    return { ok: true, already_charged: false, balance_micro_eur: await balance(), estimated_cost_micro_eur: estimate };
  });
}

/**
 * Gives back `amount` of the reservation, once, when the batch ends (a ledger refund carrying batch_id, the
 * key's spend with it), under the workspace lock the caller holds; the batch's remaining must cover it.
 */
async function release(tx: Tx, b: { id: string; workspace_id: string; api_key_id: string | null }, amount: number) {
  if (amount === 0) return;
  const r = await tx.query(
    `UPDATE batches SET remaining_micro_eur = remaining_micro_eur - $2, released_micro_eur = released_micro_eur + $2
      WHERE id = $1 AND remaining_micro_eur >= $2`,
    [b.id, amount],
  );
  if (r.rowCount !== 1) throw new Error(`invariant: batch ${b.id} holds the ${amount} it releases`);
  await applyEntry(tx, {
    workspaceId: b.workspace_id,
    kind: 'refund',
    amount_micro_eur: amount,
    idempotencyKey: releaseKey(b.id),
    batchId: b.id,
  });
  if (b.api_key_id !== null && !(await spendFromKey(tx, b.api_key_id, -amount)))
    throw new Error('invariant: a release goes back to its key');
}

export type BatchEnding = 'cancelled' | 'expired';

/**
 * Stops a batch (a cancel, or its completion window ended): its requests not started yet fail with
 * `batch_cancelled` (or `batch_expired`), costing nothing (their share is released with the rest when the
 * batch ends); those running finish. Idempotent: a batch already stopping or ended is left as it is.
 * Returns whether it stopped it.
 */
export async function stopBatch(db: Db, batchId: string, ending: BatchEnding): Promise<boolean> {
  return inTransaction(db, async (tx) => {
    const head = await tx.query<{ workspace_id: string }>('SELECT workspace_id FROM batches WHERE id = $1', [batchId]);
    if (!head.rows[0]) return false;
    await lockWorkspaceBalance(tx, head.rows[0].workspace_id);
    const b = await lockBatch(tx, batchId);
    if (b.ending !== null || !['in_progress', 'validating'].includes(b.status)) return false;
    const error =
      ending === 'cancelled'
        ? { code: 'batch_cancelled', message: 'the batch was cancelled before this request started; nothing was charged for it' }
        : {
            code: 'batch_expired',
            message: 'the batch reached the end of its completion window before this request started; nothing was charged for it',
          };
    const never = await tx.query(
      "UPDATE batch_items SET status = 'failed', error = $2, cost_micro_eur = 0 WHERE batch_id = $1 AND status = 'queued'",
      [batchId, JSON.stringify(error)],
    );
    const n = never.rowCount ?? 0;
    await tx.query(
      `UPDATE batches SET ending = $2, failed = failed + $3, status = CASE WHEN $2 = 'cancelled' THEN 'cancelling' ELSE status END,
              cancelling_at = CASE WHEN $2 = 'cancelled' THEN now() ELSE cancelling_at END WHERE id = $1`,
      [batchId, ending, n],
    );
    return true;
  });
}

/**
 * Ends a batch none of whose requests runs or waits any more: what remains of its reservation is
 * released as one ledger refund, its output and error files recorded, its status final. Idempotent:
 * false when it had ended already. `onEnded` runs in the same transaction (the webhook event).
 */
export async function endBatch(db: Db, batchId: string, onEnded: (tx: Tx) => Promise<void>): Promise<boolean> {
  return inTransaction(db, async (tx) => {
    const head = await tx.query<{ workspace_id: string }>('SELECT workspace_id FROM batches WHERE id = $1', [batchId]);
    if (!head.rows[0]) throw new Error(`invariant: batch ${batchId} exists`);
    await lockWorkspaceBalance(tx, head.rows[0].workspace_id);
    const b = await lockBatch(tx, batchId);
    if (!['in_progress', 'validating', 'cancelling'].includes(b.status)) return false;
    const open = await tx.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM batch_items WHERE batch_id = $1 AND status IN ('queued', 'running')",
      [batchId],
    );
    if (open.rows[0]!.n > 0) throw new Error(`invariant: batch ${batchId} ends with ${open.rows[0]!.n} requests open`);
    await release(tx, { id: batchId, workspace_id: b.workspace_id, api_key_id: b.api_key_id }, b.remaining_micro_eur);
    const files = await tx.query<{ completed: number; failed: number }>('SELECT completed, failed FROM batches WHERE id = $1', [batchId]);
    const { completed, failed } = files.rows[0]!;
    const outputId = completed > 0 ? await insertResultFile(tx, batchId, b.workspace_id, 'batch_output') : null;
    const errorId = failed > 0 ? await insertResultFile(tx, batchId, b.workspace_id, 'batch_error') : null;
    await tx.query(
      `UPDATE batches SET status = COALESCE(ending, 'completed'), completed_at = now(), output_file_id = $2, error_file_id = $3 WHERE id = $1`,
      [batchId, outputId, errorId],
    );
    await onEnded(tx);
    return true;
  });
}

async function insertResultFile(tx: Tx, batchId: string, workspaceId: string, purpose: 'batch_output' | 'batch_error'): Promise<string> {
  const r = await tx.query<{ id: string }>(
    `INSERT INTO files (id, workspace_id, purpose, filename, bytes, lines, batch_id)
     SELECT gen_random_uuid(), $2, $3, $4, 0, CASE WHEN $3 = 'batch_output' THEN b.completed ELSE b.failed END, b.id FROM batches b WHERE b.id = $1
     RETURNING id`,
    [batchId, workspaceId, purpose, `${batchId}_${purpose === 'batch_output' ? 'output' : 'error'}.jsonl`],
  );
  return r.rows[0]!.id;
}

/**
 * A batch whose workflow could not be started: every request fails (nothing ran), the whole reservation
 * is released, the batch is `failed`. Idempotent.
 */
export async function failBatch(db: Db, batchId: string): Promise<void> {
  await inTransaction(db, async (tx) => {
    const head = await tx.query<{ workspace_id: string }>('SELECT workspace_id FROM batches WHERE id = $1', [batchId]);
    if (!head.rows[0]) return;
    await lockWorkspaceBalance(tx, head.rows[0].workspace_id);
    const b = await lockBatch(tx, batchId);
    if (!['in_progress', 'validating'].includes(b.status)) return;
    const error = { code: 'batch_failed', message: 'the batch could not be started; nothing was charged for it' };
    const failed = await tx.query(
      "UPDATE batch_items SET status = 'failed', error = $2, cost_micro_eur = 0 WHERE batch_id = $1 AND status = 'queued'",
      [batchId, JSON.stringify(error)],
    );
    await tx.query('UPDATE batches SET failed = failed + $2 WHERE id = $1', [batchId, failed.rowCount ?? 0]);
    await release(tx, { id: batchId, workspace_id: b.workspace_id, api_key_id: b.api_key_id }, b.remaining_micro_eur);
    await tx.query("UPDATE batches SET status = 'failed', completed_at = now() WHERE id = $1", [batchId]);
  });
}
