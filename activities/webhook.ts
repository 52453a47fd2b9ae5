// Activities of the webhook delivery workflow: one signed HTTP attempt, recorded; and giving up.
// Idempotent: a delivery that already succeeded or failed is not sent again, and an attempt is
// recorded once under its Temporal attempt number.
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { inTransaction, type Db } from '../src/db/pool.js';
import { signWebhook } from '../src/webhooks/signature.js';
import { sendWebhook, type WebhookAttemptResult } from '../src/webhooks/sender.js';
import type { Resolver, TargetPolicy } from '../src/webhooks/target-policy.js';

export interface WebhookActivityDeps {
  db: Db;
  /** Which targets deliveries may reach (NODE_ENV=production: public https only). */
  webhookPolicy: TargetPolicy;
  /** DNS for delivery targets; the system's by default. */
  webhookResolver?: Resolver;
  logger?: Logger;
}

type DeliveryStatus = 'succeeded' | 'failed';

const ERROR_MAX_CHARS = 500;

export function createWebhookActivities(deps: WebhookActivityDeps) {
  const markFailed = (delivery_id: string, reason: string) =>
    deps.db.query(
      "UPDATE webhook_deliveries SET status = 'failed', completed_at = now(), last_error = $2 WHERE id = $1 AND status = 'pending'",
      [delivery_id, reason.slice(0, ERROR_MAX_CHARS)],
    );

  async function record(delivery_id: string, endpoint_id: string, attempt: number, attempted_at_ms: number, result: WebhookAttemptResult) {
    const http_status = result.http_status !== null && result.http_status >= 100 && result.http_status <= 599 ? result.http_status : null;
    const error = result.error === null ? null : result.error.slice(0, ERROR_MAX_CHARS);
    await inTransaction(deps.db, async (tx) => {
      await tx.query(
        `INSERT INTO webhook_delivery_attempts (delivery_id, endpoint_id, attempt, attempted_at, duration_ms, succeeded, http_status, error)
         VALUES ($1, $2, $3, to_timestamp($4 / 1000.0), $5, $6, $7, $8) ON CONFLICT (delivery_id, attempt) DO NOTHING`,
        [delivery_id, endpoint_id, attempt, attempted_at_ms, result.duration_ms, result.succeeded && http_status !== null, http_status, error],
      );
      await tx.query(
        `UPDATE webhook_deliveries SET attempts = GREATEST(attempts, $2), last_error = $3,
                status = CASE WHEN $4 THEN 'succeeded' ELSE status END, completed_at = CASE WHEN $4 THEN now() ELSE completed_at END
          WHERE id = $1 AND status = 'pending'`,
        [delivery_id, attempt, error, result.succeeded],
      );
    });
  }

  return {
    /**
     * Sends the delivery's event to its endpoint once, signed for this attempt (Standard Webhooks:
     * the same webhook-id every time, a fresh timestamp and signature). Answers the delivery's final
     * status; throws (a retryable failure) when this attempt was not accepted.
     */
    async attemptWebhookDelivery(input: { delivery_id: string }): Promise<DeliveryStatus> {
      const r = await deps.db.query<{
        status: 'pending' | DeliveryStatus;
        endpoint_id: string;
        url: string;
        secret: string;
        endpoint_deleted: boolean;
        event_id: string;
        payload: string;
      }>(
        `SELECT d.status, d.endpoint_id, ep.url, ep.secret, ep.deleted_at IS NOT NULL AS endpoint_deleted, ev.id AS event_id, ev.payload
           FROM webhook_deliveries d JOIN webhook_endpoints ep ON ep.id = d.endpoint_id JOIN webhook_events ev ON ev.id = d.event_id
          WHERE d.id = $1`,
        [input.delivery_id],
      );
      const d = r.rows[0];
      if (!d) throw ApplicationFailure.nonRetryable(`webhook delivery ${input.delivery_id} does not exist`, 'WebhookDeliveryUnknown');
      if (d.status !== 'pending') return d.status;
      if (d.endpoint_deleted) {
        await markFailed(input.delivery_id, 'the endpoint was deleted');
        return 'failed';
      }
      const attempt = Context.current().info.attempt;
      const attempted_at_ms = Date.now();
      const timestamp_s = Math.floor(attempted_at_ms / 1000);
      const result = await sendWebhook({
        url: d.url,
        headers: {
          'webhook-id': d.event_id,
          'webhook-timestamp': String(timestamp_s),
          'webhook-signature': signWebhook(d.secret, d.event_id, timestamp_s, d.payload),
        },
        body: d.payload,
        policy: deps.webhookPolicy,
        ...(deps.webhookResolver ? { resolver: deps.webhookResolver } : {}),
      });
      await record(input.delivery_id, d.endpoint_id, attempt, attempted_at_ms, result);
      deps.logger?.info(
        { delivery_id: input.delivery_id, event_id: d.event_id, attempt, http_status: result.http_status, error: result.error, duration_ms: result.duration_ms },
        'webhook attempt',
      );
      if (result.succeeded) return 'succeeded';
      // An endpoint not accepting is an expected outcome, recorded above: BENIGN keeps it out of the
      // worker's warning logs and failure metrics. Temporal's retry policy schedules the next attempt.
      throw ApplicationFailure.create({ message: `attempt ${attempt}: ${result.error}`, type: 'WebhookAttemptFailed', category: ApplicationFailureCategory.BENIGN });
    },

    /** Gives the delivery up (its retry window has passed). */
    async failWebhookDelivery(input: { delivery_id: string; reason: string }): Promise<void> {
      await markFailed(input.delivery_id, input.reason);
    },
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
