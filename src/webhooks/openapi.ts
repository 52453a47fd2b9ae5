// What this service POSTs to webhook endpoints, as the OpenAPI document's `webhooks`: one operation per
// event type (the body is the WebhookEvent component of ./schemas.ts).
import type { ZodOpenApiOperationObject } from 'zod-openapi';
import { WebhookEventType } from './schemas.js';

/** Each event type's operation and body (a batch's event is the BatchEvent component of ../batches/schemas.ts). */
const OPERATIONS: Record<string, { operationId: string; summary: string; body: string }> = {
  'video.generation.succeeded': {
    operationId: 'videoGenerationSucceededEvent',
    summary: 'A video generation job succeeded',
    body: 'WebhookEvent',
  },
  'video.generation.failed': {
    operationId: 'videoGenerationFailedEvent',
    summary: 'A video generation job failed (or was cancelled)',
    body: 'WebhookEvent',
  },
  'batch.completed': {
    operationId: 'batchCompletedEvent',
    summary: 'A batch ended (completed, cancelled, expired or failed)',
    body: 'BatchEvent',
  },
};

/** What this service POSTs to a webhook endpoint for an event type (the document's `webhooks`). */
function webhookOperation(type: string): ZodOpenApiOperationObject {
  const h = (name: string, description: string) => ({
    name,
    in: 'header' as const,
    required: true,
    description,
    schema: { type: 'string' as const },
  });
  const described = OPERATIONS[type] ?? OPERATIONS['video.generation.failed']!;
  return {
    operationId: described.operationId,
    tags: ['Webhooks'],
    summary: described.summary,
    parameters: [
      h('webhook-id', 'The event id (`evt_...`), the same on every attempt: process each event once.'),
      h('webhook-timestamp', 'Unix seconds of this attempt; refuse one too far from now (e.g. 5 minutes).'),
      h('webhook-signature', '`v1,<base64 HMAC-SHA256>` over "<webhook-id>.<webhook-timestamp>.<raw body>" with the endpoint secret.'),
    ],
    requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${described.body}` } } } },
    responses: { '200': { description: 'Any 2xx within 10 s accepts the event; anything else is retried.' } },
  };
}

/** The document's `webhooks`: every event type, by its name. */
export function webhookOperations(): Record<string, { post: ZodOpenApiOperationObject }> {
  return Object.fromEntries(WebhookEventType.options.map((type) => [type, { post: webhookOperation(type) }]));
}
