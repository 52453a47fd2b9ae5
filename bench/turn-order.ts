// The order in which the subjects of phase 1 take their turns, round after round.

export type CreateSubject = 'bare' | 'floor' | 'product' | 'product_keyed';

/** The subjects that run on Temporal, compared with each other. */
export const ON_TEMPORAL: readonly CreateSubject[] = ['floor', 'product', 'product_keyed'];

/** Rounds after which the order repeats: three rotations, then the same three run backwards. */
export const BALANCED_ROUNDS = 2 * ON_TEMPORAL.length;

/**
 * The order of the subjects' turns in round `r` (from 1): bare Express first, then the three subjects
 * that run on Temporal. A turn is measured right after another's, whose work the servers may still be
 * finishing (the floor's workflows close, the product's cancelled jobs settle), and which subject came
 * before shows in the figures: turns of the product that followed the floor's were the slowest. Rounds
 * 1-3 rotate the three by one each round, so each takes each place once; rounds 4-6 run the orders of
 * rounds 3, 2 and 1 backwards (a Williams design). Over six rounds each subject takes each place twice and
 * follows each other subject twice; over three rounds alone the product followed the floor twice and the
 * floor never followed the product.
 */
export function turnOrder(r: number): CreateSubject[] {
  if (!Number.isInteger(r) || r < 1) throw new Error(`round ${r}: rounds count from 1`);
  const n = ON_TEMPORAL.length;
  const rotated = (k: number) => [...ON_TEMPORAL.slice(k), ...ON_TEMPORAL.slice(0, k)];
  const i = (r - 1) % BALANCED_ROUNDS;
  return ['bare', ...(i < n ? rotated(i) : rotated(BALANCED_ROUNDS - 1 - i).reverse())];
}
