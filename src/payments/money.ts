// Stripe counts EUR in cents; this service in micro-euros.
export const MICRO_EUR_PER_CENT = 10_000;
