// The webhook event types (a leaf module: the request schemas import it without the event machinery).
// A job's two events are recorded with its settlement (./events.ts); the budget alerts by the database
// with the ledger entry that crossed the line (migration 024_budget_alerts.sql).
export const JOB_EVENT_TYPES = ['video.generation.succeeded', 'video.generation.failed'] as const;
export const ALERT_EVENT_TYPES = ['balance.low', 'api_key.spend_threshold'] as const;
export const WEBHOOK_EVENT_TYPES = [...JOB_EVENT_TYPES, ...ALERT_EVENT_TYPES] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
