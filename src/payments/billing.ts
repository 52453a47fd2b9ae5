// The money of Stripe's payments, refunds and disputes. Each Stripe object is handled once: a row of
// stripe_objects (its id and what was done with it, unique) is written in the transaction of its ledger
// entry, under the workspace's row lock, so a redelivered, duplicated or concurrent event changes nothing.
// Credits already spent are never taken below zero: what a debit cannot take from the balance is owed
// (owed_change_micro_eur on the entry, owed_micro_eur on the workspace), and a credit pays what is owed first.
import type { Tx } from '../db/pool.js';
import { applyEntry, lockWorkspaceBalance } from '../billing/ledger.js';
import { assertMicroEur } from '../money.js';

/** What was done with a Stripe object (the column stripe_objects.action). */
export type StripeAction = 'credit' | 'refund' | 'dispute' | 'dispute_won' | 'auto_top_up';

export interface StripeMovement {
  workspaceId: string;
  action: StripeAction;
  /** The object's key in stripe_objects (with `action`): the PaymentIntent, dispute, or a charge's refunds up to an amount. */
  objectKey: string;
  /** The Stripe id the ledger entry carries: the PaymentIntent credited, the refund or dispute debited. */
  stripeId: string;
  /** Positive: a credit; negative: a debit; 0: recorded only (nothing moves). */
  amount_micro_eur: number;
}

export interface MovementResult {
  /** Already handled before: nothing changed now. */
  duplicate: boolean;
  balance_micro_eur: number;
  owed_micro_eur: number;
  /** What it moved, balance and owed together (0: recorded only). */
  moved_micro_eur: number;
}

/** The ledger entry's idempotency key of a Stripe object handled (the audit joins stripe_objects to it). */
export const stripeEntryKey = (action: StripeAction, objectKey: string) => `stripe:${action}:${objectKey}`;

/**
 * Moves the money of one Stripe object once, in the caller's transaction (which commits it with whatever
 * else it records). A credit pays what is owed first, then raises the balance; a debit takes what the
 * balance has beyond speech holds, and the rest is owed.
 */
export async function moveStripeMoney(tx: Tx, m: StripeMovement): Promise<MovementResult> {
  assertMicroEur(m.amount_micro_eur);
  const locked = await lockWorkspaceBalance(tx, m.workspaceId);
  const recorded = await tx.query(
    `INSERT INTO stripe_objects (stripe_id, action, workspace_id, amount_micro_eur) VALUES ($1, $2, $3, $4)
     ON CONFLICT (stripe_id, action) DO NOTHING`,
    [m.objectKey, m.action, m.workspaceId, m.amount_micro_eur],
  );
  if (recorded.rowCount !== 1) {
    return { duplicate: true, balance_micro_eur: locked.balance_micro_eur, owed_micro_eur: locked.owed_micro_eur, moved_micro_eur: 0 };
  }
  if (m.amount_micro_eur === 0) {
    return { duplicate: false, balance_micro_eur: locked.balance_micro_eur, owed_micro_eur: locked.owed_micro_eur, moved_micro_eur: 0 };
  }
  let balance_move: number;
  let owed_change: number;
  if (m.amount_micro_eur > 0) {
    const paid = Math.min(locked.owed_micro_eur, m.amount_micro_eur);
    owed_change = -paid;
    balance_move = m.amount_micro_eur - paid;
  } else {
    const taken = Math.min(Math.max(locked.available_micro_eur, 0), -m.amount_micro_eur);
    balance_move = -taken;
    owed_change = -m.amount_micro_eur - taken;
  }
  const balance = await applyEntry(tx, {
    workspaceId: m.workspaceId,
    kind: m.amount_micro_eur > 0 ? 'credit' : 'debit',
    amount_micro_eur: balance_move,
    owed_change_micro_eur: owed_change,
    idempotencyKey: stripeEntryKey(m.action, m.objectKey),
    stripeId: m.stripeId,
  });
  return {
    duplicate: false,
    balance_micro_eur: balance,
    owed_micro_eur: locked.owed_micro_eur + owed_change,
    moved_micro_eur: m.amount_micro_eur,
  };
}

/** The workspace a PaymentIntent this service credited belongs to, or null (not one of ours). */
export async function paymentOf(
  tx: Tx,
  paymentIntentId: string,
): Promise<{ workspace_id: string; amount_micro_eur: number; refunded_micro_eur: number } | null> {
  const r = await tx.query<{ workspace_id: string; amount_micro_eur: number; refunded_micro_eur: number }>(
    'SELECT workspace_id, amount_micro_eur, refunded_micro_eur FROM stripe_payments WHERE payment_intent_id = $1',
    [paymentIntentId],
  );
  return r.rows[0] ?? null;
}

/**
 * Credits a payment once per PaymentIntent (and Checkout Session): the PaymentIntent is recorded as this
 * service's, for the refunds and disputes of its charge, in the same transaction as its credit.
 */
export async function creditPayment(
  tx: Tx,
  p: { workspaceId: string; paymentIntentId: string; checkoutSessionId: string | null; amount_micro_eur: number },
): Promise<MovementResult> {
  const moved = await moveStripeMoney(tx, {
    workspaceId: p.workspaceId,
    action: 'credit',
    objectKey: p.paymentIntentId,
    stripeId: p.paymentIntentId,
    amount_micro_eur: p.amount_micro_eur,
  });
  if (!moved.duplicate) {
    await tx.query(
      `INSERT INTO stripe_payments (payment_intent_id, workspace_id, checkout_session_id, amount_micro_eur) VALUES ($1, $2, $3, $4)`,
      [p.paymentIntentId, p.workspaceId, p.checkoutSessionId, p.amount_micro_eur],
    );
  }
  return moved;
}

/**
 * Takes back what was refunded of a payment's charge since the last time: Stripe's amount_refunded is
 * cumulative, so only its rise over what was already taken moves (an older event, delivered late, moves nothing).
 */
export async function debitRefunds(
  tx: Tx,
  r: { paymentIntentId: string; chargeId: string; refundId: string; refunded_micro_eur: number },
): Promise<MovementResult | null> {
  const payment = await paymentOf(tx, r.paymentIntentId);
  if (!payment) return null;
  const w = await lockWorkspaceBalance(tx, payment.workspace_id);
  const locked = await tx.query<{ refunded_micro_eur: number }>(
    'SELECT refunded_micro_eur FROM stripe_payments WHERE payment_intent_id = $1 FOR UPDATE',
    [r.paymentIntentId],
  );
  const refunded = Math.min(r.refunded_micro_eur, payment.amount_micro_eur);
  const delta = refunded - locked.rows[0]!.refunded_micro_eur;
  if (delta <= 0) {
    return { duplicate: true, balance_micro_eur: w.balance_micro_eur, owed_micro_eur: w.owed_micro_eur, moved_micro_eur: 0 };
  }
  await tx.query('UPDATE stripe_payments SET refunded_micro_eur = $2 WHERE payment_intent_id = $1', [r.paymentIntentId, refunded]);
  return moveStripeMoney(tx, {
    workspaceId: payment.workspace_id,
    action: 'refund',
    objectKey: `${r.chargeId}:${refunded}`,
    stripeId: r.refundId,
    amount_micro_eur: -delta,
  });
}

/**
 * A dispute opened (`opened`: its amount is debited) or won (given back). Either order: a dispute won
 * before its opening was handled is recorded, and its opening then moves nothing.
 */
export async function disputeMoney(
  tx: Tx,
  d: { paymentIntentId: string; disputeId: string; amount_micro_eur: number; won: boolean },
): Promise<MovementResult | null> {
  const payment = await paymentOf(tx, d.paymentIntentId);
  if (!payment) return null;
  await lockWorkspaceBalance(tx, payment.workspace_id);
  const seen = await tx.query<{ action: StripeAction; amount_micro_eur: number }>(
    `SELECT action, amount_micro_eur FROM stripe_objects WHERE stripe_id = $1 AND action IN ('dispute', 'dispute_won')`,
    [d.disputeId],
  );
  const taken = seen.rows.find((row) => row.action === 'dispute');
  const alreadyWon = seen.rows.some((row) => row.action === 'dispute_won');
  const amount = Math.min(d.amount_micro_eur, payment.amount_micro_eur);
  return moveStripeMoney(tx, {
    workspaceId: payment.workspace_id,
    action: d.won ? 'dispute_won' : 'dispute',
    objectKey: d.disputeId,
    stripeId: d.disputeId,
    // Won: what its opening took, if it was handled; opened after it was won: nothing.
    amount_micro_eur: d.won ? -(taken?.amount_micro_eur ?? 0) : alreadyWon ? 0 : -amount,
  });
}
