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
  /** What Stripe refunds and disputes took beyond the balance (credits already spent): no paid work until it is paid. */
  owed_micro_eur: number;
}

/** Locks the workspace row for the rest of the transaction and reads its balance. */
export async function lockWorkspaceBalance(tx: Tx, workspaceId: string): Promise<LockedBalance> {
  // The whole row: owed_micro_eur is a column of migration 025, read as 0 on a schema before it.
  const r = await tx.query<{ balance_micro_eur: number; held_micro_eur: number; owed_micro_eur?: number }>(
    'SELECT * FROM workspaces WHERE id = $1 FOR UPDATE',
    [workspaceId],
  );
  const row = r.rows[0];
  if (!row) throw new NotFoundError(`workspace ${workspaceId} not found`);
  return {
    balance_micro_eur: row.balance_micro_eur,
    held_micro_eur: row.held_micro_eur,
    owed_micro_eur: row.owed_micro_eur ?? 0,
    available_micro_eur: row.balance_micro_eur - row.held_micro_eur,
  };
}

export interface LedgerEntryInput {
  workspaceId: string;
  kind: 'topup' | 'charge' | 'refund' | 'credit' | 'debit';
  amount_micro_eur: number;
  idempotencyKey: string;
  videoJobId?: string;
  topupId?: string;
  speechRequestId?: string;
  /** A batch's reservation (charge) or what it did not use (refund). */
  batchId?: string;
  /** A credit's PaymentIntent, a debit's refund or dispute (../payments/). */
  stripeId?: string;
  /** What the entry adds to (debit) or pays of (credit, negative) what the workspace owes; 0 for every other kind. */
  owed_change_micro_eur?: number;
}

/** Appends one entry and moves the balance by its amount; the caller holds the workspace lock. Returns the new balance. */
export async function applyEntry(tx: Tx, entry: LedgerEntryInput): Promise<number> {
  assertMicroEur(entry.amount_micro_eur);
  const owed_change = entry.owed_change_micro_eur ?? 0;
  assertMicroEur(owed_change);
  if (entry.amount_micro_eur === 0 && owed_change === 0) throw new Error('ledger entries are never zero');
  // One statement: the balance (and what is owed) moves and the entry records the balance it left
  // (balance_after_micro_eur, the statement's figure), under the caller's workspace row lock.
  // Only a Stripe entry names its Stripe object and moves what is owed (columns of migration 025), only a
  // batch's names its batch (027): the others leave those columns out, so they are written the same
  // against a schema before them.
  const optional: [string, unknown][] = [];
  if (entry.stripeId !== undefined || owed_change !== 0)
    optional.push(['stripe_id', entry.stripeId ?? null], ['owed_change_micro_eur', owed_change]);
  if (entry.batchId !== undefined) optional.push(['batch_id', entry.batchId]);
  const columns = optional.map(([c]) => `, ${c}`).join('');
  const values = optional.map((_, i) => `, $${8 + i}`).join('');
  // What is owed moves by the entry's owed_change_micro_eur: the same parameter.
  const owedAt = optional.findIndex(([c]) => c === 'owed_change_micro_eur');
  const owed = owed_change === 0 ? '' : `, owed_micro_eur = owed_micro_eur + $${8 + owedAt}::bigint`;
  const r = await tx.query<{ balance_micro_eur: number }>(
    `WITH moved AS (
       UPDATE workspaces SET balance_micro_eur = balance_micro_eur + $3${owed} WHERE id = $1
       RETURNING balance_micro_eur
     )
     INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, video_job_id, topup_id, speech_request_id${columns},
                                 balance_after_micro_eur)
     SELECT $1, $2, $3, $4, $5, $6, $7${values}, moved.balance_micro_eur FROM moved
     RETURNING balance_after_micro_eur AS balance_micro_eur`,
    [
      entry.workspaceId,
      entry.kind,
      entry.amount_micro_eur,
      entry.idempotencyKey,
      entry.videoJobId ?? null,
      entry.topupId ?? null,
      entry.speechRequestId ?? null,
      ...optional.map(([, v]) => v),
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
