// POST/GET /v2/webhooks, GET/DELETE /v2/webhooks/{id}, GET /v2/webhooks/{id}/deliveries. Each
// operation's contract, then its handler: parse, call the service, present.
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { principalOf } from '../http/auth.js';
import { jsonBody } from '../http/json-body.js';
import {
  CreateWebhookBody,
  DeliveryPageQuery,
  WebhookDeliveryAttemptList,
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookEndpointDeleted,
  WebhookEndpointList,
} from './schemas.js';
import { ApiRouter, json, PAGE_400, type RouteContract } from '../http/openapi.js';
import { webhookUrlPattern } from './target-policy.js';
import { DELIVERY_ATTEMPT_ID_PREFIX, type DeliveryAttemptRecord, type WebhookEndpointRecord, type WebhooksService } from './service.js';

const seconds = (ms: number) => Math.floor(ms / 1000);

export function presentWebhookEndpoint(e: WebhookEndpointRecord) {
  return { id: e.id, object: 'webhook_endpoint' as const, url: e.url, events: e.events, created: seconds(e.created_at_ms) };
}

export function presentDeliveryAttempt(a: DeliveryAttemptRecord) {
  return {
    id: `${DELIVERY_ATTEMPT_ID_PREFIX}${a.id}`,
    object: 'webhook_delivery_attempt' as const,
    delivery_id: a.delivery_id,
    event_id: a.event_id,
    event_type: a.event_type,
    attempt: a.attempt,
    created: seconds(a.attempted_at_ms),
    status: a.succeeded ? ('succeeded' as const) : ('failed' as const),
    http_status: a.http_status,
    error: a.error,
    duration_ms: a.duration_ms,
    delivery_status: a.delivery_status,
  };
}

const ENDPOINT_ID = z.object({ id: z.string().describe('The endpoint id.') });
const NO_ENDPOINT = 'No such endpoint in this workspace (webhook_endpoint_not_found).';

const createWebhookEndpoint = {
  method: 'post',
  path: '/v2/webhooks',
  operationId: 'createWebhookEndpoint',
  tag: 'Webhooks',
  summary: 'Register a webhook endpoint',
  description:
    'Events of this workspace (`events`, default all) are POSTed to `url`, signed with the `secret` of this answer, which is shown only here. ' +
    'The URL must be a public https URL (loopback http too, in development); its host is resolved and every address checked, now and before each delivery.',
  security: 'apiKey',
  body: {
    component: 'CreateWebhookBody',
    schema: CreateWebhookBody,
    example: { url: 'http://127.0.0.1:9000/hooks/video', events: ['video.generation.succeeded', 'video.generation.failed'] },
    // The URL rule of this mode (production or not), as the service checks it.
    override: (generated, ctx) => ({
      ...generated,
      properties: {
        ...generated.properties,
        url: { ...generated.properties['url'], pattern: webhookUrlPattern({ production: ctx.production ?? false }) },
      },
    }),
  },
  responses: { '201': json(WebhookEndpointCreated, 'The new endpoint, with its signing secret.') },
  errors: {
    400:
      'Invalid request: `url` not allowed (url_not_allowed), unresolvable (url_unresolvable) or malformed ' +
      '(invalid_url), an unknown event type, or the workspace already has its maximum of 20 endpoints ' +
      '(webhook_endpoint_limit_reached).',
    429: undefined,
    503: "The URL's host could not be resolved right now (temporarily_unavailable); nothing was registered.",
  },
} satisfies RouteContract;

const listWebhookEndpoints = {
  method: 'get',
  path: '/v2/webhooks',
  operationId: 'listWebhookEndpoints',
  tag: 'Webhooks',
  summary: "List this workspace's webhook endpoints",
  description: 'At most 20, newest first; secrets are never shown again.',
  security: 'apiKey',
  responses: { '200': json(WebhookEndpointList, 'The endpoints.') },
} satisfies RouteContract;

const getWebhookEndpoint = {
  method: 'get',
  path: '/v2/webhooks/{id}',
  operationId: 'getWebhookEndpoint',
  tag: 'Webhooks',
  summary: 'Get a webhook endpoint',
  security: 'apiKey',
  requestParams: { path: ENDPOINT_ID },
  responses: { '200': json(WebhookEndpoint, 'The endpoint.') },
  errors: { 404: NO_ENDPOINT },
} satisfies RouteContract;

const deleteWebhookEndpoint = {
  method: 'delete',
  path: '/v2/webhooks/{id}',
  operationId: 'deleteWebhookEndpoint',
  tag: 'Webhooks',
  summary: 'Delete a webhook endpoint',
  description: 'Nothing more is sent to it; deliveries still being retried stop at their next attempt.',
  security: 'apiKey',
  requestParams: { path: ENDPOINT_ID },
  responses: { '200': json(WebhookEndpointDeleted, 'Deleted.') },
  errors: { 404: NO_ENDPOINT, 429: undefined },
} satisfies RouteContract;

const listWebhookDeliveries = {
  method: 'get',
  path: '/v2/webhooks/{id}/deliveries',
  operationId: 'listWebhookDeliveries',
  tag: 'Webhooks',
  summary: "List an endpoint's delivery attempts",
  description:
    'Every HTTP attempt to deliver an event to this endpoint, newest first: its time, attempt number, HTTP status or error, and the state of its delivery.',
  security: 'apiKey',
  requestParams: { path: ENDPOINT_ID, query: DeliveryPageQuery },
  responses: { '200': json(WebhookDeliveryAttemptList, 'A page of attempts.') },
  errors: { 400: PAGE_400, 404: NO_ENDPOINT },
} satisfies RouteContract;

export function webhookRoutes(deps: { auth: RequestHandler; limit: RequestHandler; webhooks: WebhooksService }): ApiRouter {
  const api = new ApiRouter();

  api.route(createWebhookEndpoint, deps.auth, deps.limit, jsonBody, async ({ body }, _req, res) => {
    const endpoint = await deps.webhooks.create(principalOf(res), body);
    res.status(201).json({ ...presentWebhookEndpoint(endpoint), secret: endpoint.secret });
  });

  api.route(listWebhookEndpoints, deps.auth, async (_input, _req, res) => {
    const endpoints = await deps.webhooks.list(principalOf(res));
    res.json({ object: 'list', data: endpoints.map(presentWebhookEndpoint) });
  });

  api.route(getWebhookEndpoint, deps.auth, async (input, _req, res) => {
    res.json(presentWebhookEndpoint(await deps.webhooks.get(principalOf(res), input.params.id)));
  });

  api.route(deleteWebhookEndpoint, deps.auth, deps.limit, async (input, _req, res) => {
    const { id } = await deps.webhooks.delete(principalOf(res), input.params.id);
    res.json({ id, object: 'webhook_endpoint', deleted: true });
  });

  api.route(listWebhookDeliveries, deps.auth, async (input, _req, res) => {
    const page = await deps.webhooks.listAttempts(principalOf(res), input.params.id, input.query);
    res.json({ object: 'list', data: page.data.map(presentDeliveryAttempt), has_more: page.has_more });
  });

  return api;
}
