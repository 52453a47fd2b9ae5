// What this service POSTs to webhook endpoints, as the OpenAPI document's `webhooks`: one operation per
// event type, its body a component of ./schemas.ts (WebhookEvent for a job's events; BatchEvent of
// ../batches/schemas.ts for a batch's).
import type { ZodOpenApiOperationObject } from 'zod-openapi';
import type { WebhookEventType } from './event-types.js';
import { WebhookEventType as EventTypes } from './schemas.js';

/** Per event type: its operation id, summary and body component. */
const EVENTS: Record<WebhookEventType, { operationId: string; summary: string; component: string }> = {
  'video.generation.succeeded': {
    operationId: 'videoGenerationSucceededEvent',
    summary: 'A video generation job succeeded',
    component: 'WebhookEvent',
  },
  'video.generation.failed': {
    operationId: 'videoGenerationFailedEvent',
    summary: 'A video generation job failed (or was cancelled)',
    component: 'WebhookEvent',
  },
  'balance.low': {
    operationId: 'balanceLowEvent',
    summary: 'A charge left the balance below the low balance alert',
    component: 'BalanceLowEvent',
  },
  'api_key.spend_threshold': {
    operationId: 'apiKeySpendThresholdEvent',
    summary: "An API key's charges reached 50, 80 or 100 % of its spend limit",
    component: 'ApiKeySpendThresholdEvent',
  },
  'batch.completed': {
    operationId: 'batchCompletedEvent',
    summary: 'A batch ended (completed, cancelled, expired or failed)',
    component: 'BatchEvent',
  },
  'billing.auto_top_up_failed': {
    operationId: 'autoTopUpFailedEvent',
    summary: 'An automatic top-up was not paid; automatic top-up is off',
    component: 'AutoTopUpFailedEvent',
  },
};

/** What this service POSTs to a webhook endpoint for an event type (the document's `webhooks`). */
function webhookOperation(type: WebhookEventType): ZodOpenApiOperationObject {
  const h = (name: string, description: string) => ({
    name,
    in: 'header' as const,
    required: true,
    description,
    schema: { type: 'string' as const },
  });
  return {
    operationId: EVENTS[type].operationId,
    tags: ['Webhooks'],
    summary: EVENTS[type].summary,
    parameters: [
      h('webhook-id', 'The event id (`evt_...`), the same on every attempt: process each event once.'),
      h('webhook-timestamp', 'Unix seconds of this attempt; refuse one too far from now (e.g. 5 minutes).'),
      h('webhook-signature', '`v1,<base64 HMAC-SHA256>` over "<webhook-id>.<webhook-timestamp>.<raw body>" with the endpoint secret.'),
    ],
    requestBody: {
      required: true,
      content: { 'application/json': { schema: { $ref: `#/components/schemas/${EVENTS[type].component}` } } },
    },
    responses: { '200': { description: 'Any 2xx within 10 s accepts the event; anything else is retried.' } },
  };
}

/** The document's `webhooks`: every event type, by its name. */
export function webhookOperations(): Record<string, { post: ZodOpenApiOperationObject }> {
  return Object.fromEntries(EventTypes.options.map((type) => [type, { post: webhookOperation(type) }]));
}
