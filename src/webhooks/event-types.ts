// The webhook event types (a leaf module: the request schemas import it without the event machinery).
// A job's two events are recorded with its settlement (./events.ts); the budget alerts by the database
// with the ledger entry that crossed the line (migration 024_budget_alerts.sql); a batch's when it ends
// (src/batches/).
export const JOB_EVENT_TYPES = ['video.generation.succeeded', 'video.generation.failed'] as const;
export const ALERT_EVENT_TYPES = ['balance.low', 'api_key.spend_threshold'] as const;
export const BATCH_EVENT_TYPES = ['batch.completed'] as const;
/** Buying credits: an automatic top-up's payment failed (recorded by src/payments/auto-top-up.ts, turning it off). */
export const BILLING_EVENT_TYPES = ['billing.auto_top_up_failed'] as const;
export const WEBHOOK_EVENT_TYPES = [...JOB_EVENT_TYPES, ...ALERT_EVENT_TYPES, ...BATCH_EVENT_TYPES, ...BILLING_EVENT_TYPES] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
