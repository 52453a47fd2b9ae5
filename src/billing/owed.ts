// What a workspace owes: Stripe refunds and disputes of credits it had already spent (../payments/).
// While anything is owed, the workspace creates no paid work: every paid create asks here first, before
// any other money check, and answers 402 payment_required. The next credits pay what is owed first.
import type { Db } from '../db/pool.js';
import { ApiError } from '../errors.js';

export function paymentRequired(owed_micro_eur: number): ApiError {
  const eur = (owed_micro_eur / 1_000_000).toFixed(2);
  return new ApiError(
    402,
    'insufficient_credits_error',
    'payment_required',
    `this workspace owes ${eur} EUR (a refund or dispute took back credits already spent); add credits to pay it first; nothing was charged`,
  );
}

/** What the workspace owes now (0: nothing), read without a lock. */
export async function owedBy(db: Db, workspaceId: string): Promise<number> {
  const r = await db.query<{ owed_micro_eur: string }>('SELECT owed_micro_eur FROM workspaces WHERE id = $1', [workspaceId]);
  return Number(r.rows[0]?.owed_micro_eur ?? 0);
}

/** Throws 402 payment_required while the workspace owes anything. */
export async function refuseWhileOwed(db: Db, workspaceId: string): Promise<void> {
  const owed = await owedBy(db, workspaceId);
  if (owed > 0) throw paymentRequired(owed);
}
