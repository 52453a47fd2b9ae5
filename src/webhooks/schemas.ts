// Webhooks' schemas: the endpoint a workspace registers, its delivery attempts and their pages, and the
// event this service POSTs.
import { z } from 'zod';
import { serialPageQuery, UnixSeconds, Uuid } from '../http/schemas.js';
import { VideoJob } from '../video-jobs/schemas.js';
import { WEBHOOK_EVENT_TYPES } from './event-types.js';
import { WEBHOOK_URL_CHARS_MAX } from './target-policy.js';

/** The public id of a delivery attempt: this prefix and its serial number. */
export const DELIVERY_ATTEMPT_ID_PREFIX = 'whatt_';
export const DeliveryPageQuery = serialPageQuery(DELIVERY_ATTEMPT_ID_PREFIX);

export const WebhookEventType = z
  .enum(WEBHOOK_EVENT_TYPES)
  .describe('video.generation.failed includes cancelled jobs; batch.completed is sent when a batch ends, however it ended.');
export const CreateWebhookBody = z
  .object({
    url: z
      .string()
      .min(1)
      .max(WEBHOOK_URL_CHARS_MAX)
      .describe(
        'Where events are POSTed: an https URL naming its host by a DNS name (not an IP address), without credentials or fragment; ' +
          'in development (not NODE_ENV=production) also a loopback URL (localhost, 127.x.x.x, [::1]) over http or https. ' +
          'The name is resolved at every delivery attempt, and an attempt to a host resolving to a private, ' +
          'loopback, link-local or otherwise non-public address is refused (its deliveries show why).',
      ),
    events: z
      .array(WebhookEventType)
      .min(1)
      .max(WEBHOOK_EVENT_TYPES.length)
      .refine((a) => new Set(a).size === a.length, 'must not repeat an event type')
      .meta({ uniqueItems: true })
      .optional()
      .describe('The event types sent to this endpoint; default all of them.'),
  })
  .strict();

export const WebhookEndpoint = z
  .strictObject({
    id: Uuid,
    object: z.literal('webhook_endpoint'),
    url: z.string(),
    events: z.array(WebhookEventType),
    created: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe("An endpoint of the caller's workspace (its secret is shown only when it is created).");
export const WebhookEndpointCreated = WebhookEndpoint.extend({
  secret: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/)
    .describe('The signing secret, `whsec_` + base64 of 32 random bytes; shown this once only.'),
}).describe('The new endpoint, with its signing secret.');
export const WebhookEndpointList = z.strictObject({ object: z.literal('list'), data: z.array(WebhookEndpoint).describe('Newest first.') });
export const WebhookEndpointDeleted = z.strictObject({ id: Uuid, object: z.literal('webhook_endpoint'), deleted: z.literal(true) });
export const WebhookDeliveryAttempt = z
  .strictObject({
    id: z
      .string()
      .regex(/^whatt_\d+$/)
      .describe('The attempt id; `after` of the next page.'),
    object: z.literal('webhook_delivery_attempt'),
    delivery_id: Uuid.describe('The delivery (one event to this endpoint) the attempt belongs to.'),
    event_id: z.string().describe('The event sent: the `webhook-id` header and the body `id`, the same on every attempt.'),
    event_type: WebhookEventType,
    attempt: z.int().positive().describe('1 for the first attempt of the delivery, then 2, 3, ...'),
    created: UnixSeconds.describe('Unix time (seconds) of the attempt (its `webhook-timestamp`).'),
    status: z.enum(['succeeded', 'failed']).describe('succeeded: answered 2xx within 10 s.'),
    http_status: z.int().nullable().describe("The endpoint's HTTP status; null when none was received."),
    error: z
      .string()
      .nullable()
      .describe(
        'Why the attempt failed (e.g. HTTP 500, redirect (302) not followed, timeout, connection refused); null when it succeeded.',
      ),
    duration_ms: z.int().nonnegative(),
    delivery_status: z
      .enum(['pending', 'succeeded', 'failed'])
      .describe('The delivery now: pending while retried, failed once given up (after 24 hours) or the endpoint deleted.'),
  })
  .describe('One HTTP attempt to deliver an event to the endpoint.');
export const WebhookDeliveryAttemptList = z.strictObject({
  object: z.literal('list'),
  data: z.array(WebhookDeliveryAttempt).describe('Newest first.'),
  has_more: z.boolean(),
});
export const WebhookEvent = z
  .strictObject({
    id: z
      .string()
      .regex(/^evt_[0-9a-f]{32}$/)
      .describe('The event id, also sent as the `webhook-id` header: the same on every retry; use it to process an event once.'),
    object: z.literal('event'),
    type: z.enum(['video.generation.succeeded', 'video.generation.failed']).describe("A job's event (a batch's is a BatchEvent)."),
    created: UnixSeconds.describe('Unix time (seconds) the event happened.'),
    data: VideoJob,
  })
  .describe(
    'The body of every webhook delivery (POST, application/json), signed per Standard Webhooks. `data` is the job as GET /v2/videos/generations/{id} ' +
      'answered when the event happened; its video URLs expire: fetch the job again for fresh ones.',
  );

/** What the API answers, as its clients read it (z.output of the response schemas). */
export type WebhookEndpoint = z.output<typeof WebhookEndpoint>;
export type WebhookEndpointCreated = z.output<typeof WebhookEndpointCreated>;
export type WebhookEndpointList = z.output<typeof WebhookEndpointList>;
export type WebhookEndpointDeleted = z.output<typeof WebhookEndpointDeleted>;
export type WebhookDeliveryAttempt = z.output<typeof WebhookDeliveryAttempt>;
export type WebhookDeliveryAttemptList = z.output<typeof WebhookDeliveryAttemptList>;
export type WebhookEvent = z.output<typeof WebhookEvent>;

export const RESPONSE_COMPONENTS = {
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookEndpointList,
  WebhookEndpointDeleted,
  WebhookDeliveryAttempt,
  WebhookDeliveryAttemptList,
  WebhookEvent,
} satisfies Record<string, z.ZodType>;
