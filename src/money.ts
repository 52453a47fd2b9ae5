// Money is integer micro-euros everywhere inside; euros (JSON numbers) only at the API edge.
export const MICRO_EUR_PER_EUR = 1_000_000;

/** Largest amount accepted in one operation: 1,000,000 EUR. */
export const AMOUNT_MICRO_EUR_MAX = 1_000_000 * MICRO_EUR_PER_EUR;

export function microEurToEur(amount_micro_eur: number): number {
  assertMicroEur(amount_micro_eur);
  return amount_micro_eur / MICRO_EUR_PER_EUR;
}

/** Converts a euro amount with at most 6 decimals; returns null if it is not representable exactly (catalog prices). */
export function eurToMicroEur(amount_eur: number): number | null {
  if (!Number.isFinite(amount_eur)) return null;
  const micro = Math.round(amount_eur * MICRO_EUR_PER_EUR);
  if (Math.abs(micro / MICRO_EUR_PER_EUR - amount_eur) > 1e-9) return null;
  if (!Number.isSafeInteger(micro)) return null;
  return micro;
}

/** A euro amount (at most AMOUNT_MICRO_EUR_MAX) rounded to the nearest micro-euro; null if not a finite number in range. */
export function eurToMicroEurRounded(amount_eur: number): number | null {
  if (!Number.isFinite(amount_eur)) return null;
  const micro = Math.round(amount_eur * MICRO_EUR_PER_EUR);
  return Number.isSafeInteger(micro) && Math.abs(micro) <= AMOUNT_MICRO_EUR_MAX ? micro : null;
}

export function assertMicroEur(amount_micro_eur: number): void {
  if (!Number.isSafeInteger(amount_micro_eur)) throw new Error(`not an integer micro-euro amount: ${amount_micro_eur}`);
}
