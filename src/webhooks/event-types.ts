// The webhook event types (a leaf module: the request schemas import it without the event machinery).
export const WEBHOOK_EVENT_TYPES = ['video.generation.succeeded', 'video.generation.failed', 'batch.completed'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
