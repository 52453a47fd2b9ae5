// A batch's reservation (batches.remaining_micro_eur): the money its creation took from the balance as one
// ledger charge, from which its requests' charges are drawn and into which their refunds go back, until
// the batch ends and what remains is released (../batches/billing.ts). Here are the two moves a request
// makes, inside its own charge's or settlement's transaction, so that a video job's or a speech's money
// code reaches a batch's without depending on the batches feature.
import type { Tx } from '../db/pool.js';
import { assertMicroEur } from '../money.js';

/** Takes a request's charge from the batch's reservation; the reservation must cover it. */
export async function drawFromReservation(tx: Tx, batchId: string, amount_micro_eur: number, what: string): Promise<void> {
  assertMicroEur(amount_micro_eur);
  const drawn = await tx.query(
    'UPDATE batches SET remaining_micro_eur = remaining_micro_eur - $2 WHERE id = $1 AND remaining_micro_eur >= $2',
    [batchId, amount_micro_eur],
  );
  if (drawn.rowCount !== 1) throw new Error(`invariant: the reservation of batch ${batchId} covers ${what}`);
}

/** Puts a request's refund back into the batch's reservation (released with the batch, not to the balance). */
export async function refundIntoReservation(tx: Tx, batchId: string, amount_micro_eur: number): Promise<void> {
  assertMicroEur(amount_micro_eur);
  const r = await tx.query('UPDATE batches SET remaining_micro_eur = remaining_micro_eur + $2 WHERE id = $1', [batchId, amount_micro_eur]);
  if (r.rowCount !== 1) throw new Error(`invariant: batch ${batchId} of a settled job exists`);
}
