// POST/GET /v2/webhooks, GET/DELETE /v2/webhooks/{id}, GET /v2/webhooks/{id}/deliveries: parse,
// call the service, present.
import { Router, type RequestHandler } from 'express';
import { principalOf } from '../auth.js';
import { jsonBody } from '../json-body.js';
import { CreateWebhookBody, DeliveryPageQuery } from '../schemas.js';
import { pageQueryOf } from '../page-query.js';
import { DELIVERY_ATTEMPT_ID_PREFIX, type DeliveryAttemptRecord, type WebhookEndpointRecord, type WebhooksService } from '../../services/webhooks.js';

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

export function webhookRoutes(deps: { auth: RequestHandler; limit: RequestHandler; webhooks: WebhooksService }): Router {
  const r = Router();

  r.post('/v2/webhooks', deps.auth, deps.limit, jsonBody, async (req, res) => {
    const body = CreateWebhookBody.parse(req.body);
    const endpoint = await deps.webhooks.create(principalOf(res), body);
    res.status(201).json({ ...presentWebhookEndpoint(endpoint), secret: endpoint.secret });
  });

  r.get('/v2/webhooks', deps.auth, async (_req, res) => {
    const endpoints = await deps.webhooks.list(principalOf(res));
    res.json({ object: 'list', data: endpoints.map(presentWebhookEndpoint) });
  });

  r.get('/v2/webhooks/:id', deps.auth, async (req, res) => {
    res.json(presentWebhookEndpoint(await deps.webhooks.get(principalOf(res), String(req.params['id']))));
  });

  r.delete('/v2/webhooks/:id', deps.auth, deps.limit, async (req, res) => {
    const { id } = await deps.webhooks.delete(principalOf(res), String(req.params['id']));
    res.json({ id, object: 'webhook_endpoint', deleted: true });
  });

  r.get('/v2/webhooks/:id/deliveries', deps.auth, async (req, res) => {
    const page = await deps.webhooks.listAttempts(principalOf(res), String(req.params['id']), pageQueryOf(req, DeliveryPageQuery));
    res.json({ object: 'list', data: page.data.map(presentDeliveryAttempt), has_more: page.has_more });
  });

  return r;
}
