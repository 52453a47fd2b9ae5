// The credit ledger's core. Every balance change is one append-only ledger entry with a unique
// idempotency key, written in the same transaction as the balance update; the workspace row lock
// serialises concurrent changes, and the CHECKs (balance >= held >= 0) make an overdraft impossible
// even if code erred. What moves money lives in the features: ../video-jobs/billing.ts (charge, refund),
// ../voices/speech-billing.ts (hold, capture, release); audit.ts beside this file checks all of it.
import { randomUUID } from 'node:crypto';
import { inTransaction, type Db, type Tx } from '../db/pool.js';
import { assertMicroEur, AMOUNT_MICRO_EUR_MAX } from '../money.js';

export class NotFoundError extends Error {}

/**
 * A speech hold older than this belongs to a request whose process died: the reconciler releases it (or
 * captures it, when its audio was delivered). Here, beside the balance it holds, so that the audit reads it too.
 */
export const SPEECH_HOLD_TTL_MS = 10 * 60_000;

const UNIQUE_VIOLATION = '23505';

export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === UNIQUE_VIOLATION;
}

export interface LockedBalance {
  balance_micro_eur: number;
  /** Reserved by speech requests in flight: not spendable. */
  held_micro_eur: number;
  /** balance - held: what a new charge or hold may use. */
  available_micro_eur: number;
}

/** Locks the workspace row for the rest of the transaction and reads its balance. */
export async function lockWorkspaceBalance(tx: Tx, workspaceId: string): Promise<LockedBalance> {
  const r = await tx.query<{ balance_micro_eur: number; held_micro_eur: number }>(
    'SELECT balance_micro_eur, held_micro_eur FROM workspaces WHERE id = $1 FOR UPDATE',
    [workspaceId],
  );
  const row = r.rows[0];
  if (!row) throw new NotFoundError(`workspace ${workspaceId} not found`);
  return { ...row, available_micro_eur: row.balance_micro_eur - row.held_micro_eur };
}

export interface LedgerEntryInput {
  workspaceId: string;
  kind: 'topup' | 'charge' | 'refund';
  amount_micro_eur: number;
  idempotencyKey: string;
  videoJobId?: string;
  topupId?: string;
  speechRequestId?: string;
  /** A batch's reservation (charge) or what it did not use (refund). */
  batchId?: string;
}

/** Appends one entry and moves the balance by its amount; the caller holds the workspace lock. Returns the new balance. */
export async function applyEntry(tx: Tx, entry: LedgerEntryInput): Promise<number> {
  assertMicroEur(entry.amount_micro_eur);
  if (entry.amount_micro_eur === 0) throw new Error('ledger entries are never zero');
  // One statement: the balance moves and the entry records the balance it left
  // (balance_after_micro_eur, the statement's figure), under the caller's workspace row lock.
  // A batch's entry names its batch (a column of migration 027); the others leave it out, so they are
  // written the same against a schema without it.
  const batch = entry.batchId === undefined ? { column: '', value: '' } : { column: ', batch_id', value: ', $8' };
  const r = await tx.query<{ balance_micro_eur: number }>(
    `WITH moved AS (
       UPDATE workspaces SET balance_micro_eur = balance_micro_eur + $3 WHERE id = $1 RETURNING balance_micro_eur
     )
     INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, video_job_id, topup_id, speech_request_id${batch.column},
                                 balance_after_micro_eur)
     SELECT $1, $2, $3, $4, $5, $6, $7${batch.value}, moved.balance_micro_eur FROM moved
     RETURNING balance_after_micro_eur AS balance_micro_eur`,
    [
      entry.workspaceId,
      entry.kind,
      entry.amount_micro_eur,
      entry.idempotencyKey,
      entry.videoJobId ?? null,
      entry.topupId ?? null,
      entry.speechRequestId ?? null,
      ...(entry.batchId === undefined ? [] : [entry.batchId]),
    ],
  );
  const balance = r.rows[0]?.balance_micro_eur;
  if (balance === undefined || balance < 0) throw new Error(`invariant: balance of ${entry.workspaceId} would be ${balance}`);
  return balance;
}

/**
 * Moves `amount_micro_eur` onto the key's spend if its limit allows (negative: gives it back). The caller
 * holds the workspace lock; the key's row lock is taken here, always after it. Returns whether it moved.
 */
export async function spendFromKey(tx: Tx, apiKeyId: string, amount_micro_eur: number): Promise<boolean> {
  const r = await tx.query(
    `UPDATE api_keys SET spent_micro_eur = spent_micro_eur + $2
      WHERE id = $1 AND (spend_limit_micro_eur IS NULL OR spent_micro_eur + $2 <= spend_limit_micro_eur OR $2 < 0)
      RETURNING spent_micro_eur`,
    [apiKeyId, amount_micro_eur],
  );
  return r.rowCount === 1;
}

export async function entryExists(tx: Tx, idempotencyKey: string): Promise<boolean> {
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
  if (!(input.amount_micro_eur > 0 && input.amount_micro_eur <= AMOUNT_MICRO_EUR_MAX)) {
    throw new RangeError(`top-up amount out of range: ${input.amount_micro_eur}`);
  }
  const idempotencyKey = `topup:${input.workspaceId}:${input.idempotencyKey ?? randomUUID()}`;
  const locked = await lockWorkspaceBalance(tx, input.workspaceId);
  const existing = await tx.query<{ topup_id: string }>('SELECT topup_id FROM ledger_entries WHERE idempotency_key = $1', [idempotencyKey]);
  if (existing.rows[0]) return { balance_micro_eur: locked.balance_micro_eur, topup_id: existing.rows[0].topup_id };
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
