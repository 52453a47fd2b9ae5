// Euros and times as people read them. Amounts come from the API as euros with at most six decimals
// (exact micro-euros); they are shown with at least two decimals and as many more as they carry.

const EURO = new Intl.NumberFormat('en-IE', { style: 'currency', currency: 'EUR', minimumFractionDigits: 2, maximumFractionDigits: 6 });

export function euros(amount: number): string {
  return EURO.format(amount);
}

/** Euros to integer micro-euros, so that sums and products of prices stay exact. */
export function microEur(amount_in_euro: number): number {
  return Math.round(amount_in_euro * 1_000_000);
}

export function fromMicroEur(amount_micro_eur: number): number {
  return amount_micro_eur / 1_000_000;
}

const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

export function when(unix_s: number): string {
  return DATE.format(new Date(unix_s * 1000));
}
