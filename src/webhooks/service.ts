// Webhook endpoints of a workspace (POST/GET/DELETE /v2/webhooks) and the attempts made to deliver
// to them (GET /v2/webhooks/{id}/deliveries). An endpoint exists only for its workspace: from any
// other, every operation on it answers 404, as for an id that never existed. The target URL is
// checked (./target-policy.ts) when registered, and again at every delivery.
import { randomUUID } from 'node:crypto';
import { inTransaction, type Db } from '../db/pool.js';
import { ApiError, invalidParam, notFound } from '../errors.js';
import type { PageQuery } from '../http/schemas.js';
import { DELIVERY_ATTEMPT_ID_PREFIX } from './schemas.js';
import { generateWebhookSecret } from './signature.js';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from './events.js';
import { parseWebhookUrl, WebhookTargetError, type TargetPolicy } from './target-policy.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { isUuid } from '../ids.js';
import { cursorOf, pageOf, type Page } from '../db/pagination.js';

/** Live endpoints a workspace may have: keeps the (unpaginated) listing and the fan-out per event bounded. */
export const WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX = 20;
export { DELIVERY_ATTEMPT_ID_PREFIX };
const WEBHOOK_LOCK_CLASS = 724_301_119;

export interface WebhookEndpointRecord {
  id: string;
  url: string;
  events: WebhookEventType[];
  created_at_ms: number;
}

export interface DeliveryAttemptRecord {
  id: number;
  delivery_id: string;
  event_id: string;
  event_type: WebhookEventType;
  attempt: number;
  attempted_at_ms: number;
  succeeded: boolean;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
  delivery_status: 'pending' | 'succeeded' | 'failed';
}

const SELECT_ENDPOINT = `SELECT id, url, events, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms FROM webhook_endpoints`;

const endpointNotFound = (id: string) => notFound('webhook_endpoint_not_found', `no webhook endpoint ${id}`, 'id');

function refusedTarget(err: WebhookTargetError): ApiError {
  return invalidParam('url', err.message, err.code);
}

export class WebhooksService {
  constructor(private readonly deps: { db: Db; policy: TargetPolicy }) {}

  /** Registers an endpoint; answers it with its secret, which is never shown again. */
  async create(
    principal: ApiKeyPrincipal,
    input: { url: string; events?: WebhookEventType[] | undefined },
  ): Promise<WebhookEndpointRecord & { secret: string }> {
    let url: URL;
    try {
      // Its host is resolved and checked at every delivery attempt (a name may move; see target-policy.ts).
      url = parseWebhookUrl(input.url, this.deps.policy);
    } catch (err) {
      if (err instanceof WebhookTargetError) throw refusedTarget(err);
      throw err;
    }
    const events = input.events ?? [...WEBHOOK_EVENT_TYPES];
    const secret = generateWebhookSecret();
    return inTransaction(this.deps.db, async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [WEBHOOK_LOCK_CLASS, principal.workspace_id]);
      const live = await tx.query<{ n: number }>(
        'SELECT count(*)::bigint AS n FROM webhook_endpoints WHERE workspace_id = $1 AND deleted_at IS NULL',
        [principal.workspace_id],
      );
      if (live.rows[0]!.n >= WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX) {
        throw new ApiError(
          409,
          'invalid_request_error',
          'webhook_endpoint_limit_reached',
          `this workspace already has ${WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX} webhook endpoints, the most it may have; delete one first`,
        );
      }
      const r = await tx.query<WebhookEndpointRecord>(
        `INSERT INTO webhook_endpoints (id, workspace_id, url, events, secret) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, url, events, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms`,
        [randomUUID(), principal.workspace_id, url.href, events, secret],
      );
      return { ...r.rows[0]!, secret };
    });
  }

  async list(principal: ApiKeyPrincipal): Promise<WebhookEndpointRecord[]> {
    const r = await this.deps.db.query<WebhookEndpointRecord>(
      `${SELECT_ENDPOINT} WHERE workspace_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id LIMIT $2`,
      [principal.workspace_id, WEBHOOK_ENDPOINTS_PER_WORKSPACE_MAX],
    );
    return r.rows;
  }

  async get(principal: ApiKeyPrincipal, id: string): Promise<WebhookEndpointRecord> {
    const r = isUuid(id)
      ? await this.deps.db.query<WebhookEndpointRecord>(`${SELECT_ENDPOINT} WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL`, [
          id,
          principal.workspace_id,
        ])
      : null;
    const endpoint = r?.rows[0];
    if (!endpoint) throw endpointNotFound(id);
    return endpoint;
  }

  /** Deletes the endpoint: nothing more is sent to it (deliveries still being retried stop at their next attempt). */
  async delete(principal: ApiKeyPrincipal, id: string): Promise<{ id: string }> {
    const r = isUuid(id)
      ? await this.deps.db.query(
          'UPDATE webhook_endpoints SET deleted_at = now() WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL',
          [id, principal.workspace_id],
        )
      : null;
    if (!r || r.rowCount !== 1) throw endpointNotFound(id);
    return { id };
  }

  /** The endpoint's delivery attempts, newest first. */
  async listAttempts(principal: ApiKeyPrincipal, endpointId: string, query: PageQuery): Promise<Page<DeliveryAttemptRecord>> {
    await this.get(principal, endpointId);
    const after = cursorOf(DELIVERY_ATTEMPT_ID_PREFIX, query);
    const r = await this.deps.db.query<DeliveryAttemptRecord>(
      `SELECT a.id, a.delivery_id, d.event_id, e.type AS event_type, a.attempt, (extract(epoch FROM a.attempted_at) * 1000)::bigint AS attempted_at_ms,
              a.succeeded, a.http_status, a.error, a.duration_ms, d.status AS delivery_status
         FROM webhook_delivery_attempts a
         JOIN webhook_deliveries d ON d.id = a.delivery_id
         JOIN webhook_events e ON e.id = d.event_id
        WHERE a.endpoint_id = $1 AND ($2::bigint IS NULL OR a.id < $2)
        ORDER BY a.id DESC LIMIT $3`,
      [endpointId, after, query.limit + 1],
    );
    return pageOf(r.rows, query.limit);
  }
}
