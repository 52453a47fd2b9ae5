// Activities of the webhook delivery workflow: one signed HTTP attempt, recorded; and giving up.
// Idempotent: a delivery that already succeeded or failed is not sent again, and an attempt is
// recorded once under its Temporal attempt number.
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
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
  /** Attempts of one workspace in progress at once across all workers (WEBHOOK_MAX_CONCURRENT_ATTEMPTS_PER_WORKSPACE), one per endpoint. */
  webhookAttemptsPerWorkspace?: number;
  /** WEBHOOK_RETRY_INITIAL_MS: the first wait after a failed attempt, doubled per attempt up to an hour. */
  webhookEvents?: { retry_initial_ms: number };
}

type DeliveryStatus = 'succeeded' | 'failed';

const ERROR_CHARS_MAX = 500;
/**
 * A slot outlives its attempt's HTTP request (10 s at most) by at most this much more: a dead worker's
 * slot comes back within it.
 */
const SLOT_LEASE_S = 20;
/** Attempts of one workspace in progress at once, by default (WEBHOOK_MAX_CONCURRENT_ATTEMPTS_PER_WORKSPACE). */
export const DEFAULT_ATTEMPTS_PER_WORKSPACE = 4;
/** How long an attempt deferred for its workspace's slots waits before trying again (plus up to as much jitter). */
const DEFER_MS = 1_000;
const RETRY_INTERVAL_MS_MAX = 3_600_000;

/** A delivery as one attempt sends it: its status, endpoint and event. */
interface DeliveryToSend {
  status: 'pending' | DeliveryStatus;
  endpoint_id: string;
  workspace_id: string;
  attempts: number;
  url: string;
  secret: string;
  endpoint_deleted: boolean;
  event_id: string;
  payload: string;
}

function markFailed(db: Db, delivery_id: string, reason: string) {
  return db.query(
    "UPDATE webhook_deliveries SET status = 'failed', completed_at = now(), last_error = $2 WHERE id = $1 AND status = 'pending'",
    [delivery_id, reason.slice(0, ERROR_CHARS_MAX)],
  );
}

/** Records an attempt under its number (once), and the delivery's outcome when it succeeded. */
async function recordAttempt(
  db: Db,
  delivery_id: string,
  endpoint_id: string,
  attempt: number,
  attempted_at_ms: number,
  result: WebhookAttemptResult,
): Promise<void> {
  const http_status = result.http_status !== null && result.http_status >= 100 && result.http_status <= 599 ? result.http_status : null;
  const error = result.error === null ? null : result.error.slice(0, ERROR_CHARS_MAX);
  await inTransaction(db, async (tx) => {
    await tx.query(
      `INSERT INTO webhook_delivery_attempts (delivery_id, endpoint_id, attempt, attempted_at, duration_ms, succeeded, http_status, error)
       VALUES ($1, $2, $3, to_timestamp($4 / 1000.0), $5, $6, $7, $8) ON CONFLICT (delivery_id, attempt) DO NOTHING`,
      [
        delivery_id,
        endpoint_id,
        attempt,
        attempted_at_ms,
        result.duration_ms,
        result.succeeded && http_status !== null,
        http_status,
        error,
      ],
    );
    await tx.query(
      `UPDATE webhook_deliveries SET attempts = GREATEST(attempts, $2), last_error = $3,
              status = CASE WHEN $4 THEN 'succeeded' ELSE status END, completed_at = CASE WHEN $4 THEN now() ELSE completed_at END
        WHERE id = $1 AND status = 'pending'`,
      [delivery_id, attempt, error, result.succeeded],
    );
  });
}

/**
 * Leases one of the workspace's attempt slots for this delivery; null when all are held by others, or
 * when another delivery to the same endpoint holds one (an endpoint takes one slot at a time). Leases of
 * one workspace are decided one at a time (its advisory lock), so neither bound is passed by a race.
 */
async function leaseSlot(
  deps: WebhookActivityDeps,
  workspace_id: string,
  endpoint_id: string,
  delivery_id: string,
): Promise<number | null> {
  return inTransaction(deps.db, async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('webhook_slots:' || $1, 0))", [workspace_id]);
    const r = await tx.query<{ slot: number }>(
      `WITH free AS (
         SELECT s FROM generate_series(0, $3::int - 1) s
          WHERE NOT EXISTS (SELECT 1 FROM webhook_attempt_slots t
                             WHERE t.workspace_id = $1 AND t.slot = s AND t.held_until > now() AND t.delivery_id <> $2)
            AND NOT EXISTS (SELECT 1 FROM webhook_attempt_slots t
                             WHERE t.workspace_id = $1 AND t.endpoint_id = $5 AND t.held_until > now() AND t.delivery_id <> $2)
          ORDER BY s LIMIT 1)
       INSERT INTO webhook_attempt_slots (workspace_id, slot, delivery_id, held_until, endpoint_id)
       SELECT $1, s, $2, now() + make_interval(secs => $4), $5 FROM free
       ON CONFLICT (workspace_id, slot) DO UPDATE SET delivery_id = EXCLUDED.delivery_id, held_until = EXCLUDED.held_until, endpoint_id = EXCLUDED.endpoint_id
        WHERE webhook_attempt_slots.held_until <= now() OR webhook_attempt_slots.delivery_id = EXCLUDED.delivery_id
       RETURNING slot`,
      [workspace_id, delivery_id, deps.webhookAttemptsPerWorkspace ?? DEFAULT_ATTEMPTS_PER_WORKSPACE, SLOT_LEASE_S, endpoint_id],
    );
    return r.rows[0]?.slot ?? null;
  });
}

async function readDelivery(db: Db, delivery_id: string): Promise<DeliveryToSend> {
  const r = await db.query<DeliveryToSend>(
    `SELECT d.status, d.endpoint_id, d.workspace_id, d.attempts, ep.url, ep.secret, ep.deleted_at IS NOT NULL AS endpoint_deleted, ev.id AS event_id, ev.payload
       FROM webhook_deliveries d JOIN webhook_endpoints ep ON ep.id = d.endpoint_id JOIN webhook_events ev ON ev.id = d.event_id
      WHERE d.id = $1`,
    [delivery_id],
  );
  const d = r.rows[0];
  if (!d) throw ApplicationFailure.nonRetryable(`webhook delivery ${delivery_id} does not exist`, 'WebhookDeliveryUnknown');
  return d;
}

/** Sends the event once under a leased slot, signed for this attempt, records the attempt and gives the slot back. */
async function sendAttempt(
  deps: WebhookActivityDeps,
  delivery_id: string,
  d: DeliveryToSend,
  slot: number,
  attempt: number,
): Promise<WebhookAttemptResult> {
  const attempted_at_ms = Date.now();
  const timestamp_s = Math.floor(attempted_at_ms / 1000);
  try {
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
    await recordAttempt(deps.db, delivery_id, d.endpoint_id, attempt, attempted_at_ms, result);
    return result;
  } finally {
    await deps.db
      .query('DELETE FROM webhook_attempt_slots WHERE workspace_id = $1 AND slot = $2 AND delivery_id = $3', [
        d.workspace_id,
        slot,
        delivery_id,
      ])
      .catch(() => {}); // the lease runs out by itself
  }
}

/**
 * The failure of an attempt the endpoint did not accept. An expected outcome, recorded already: BENIGN
 * keeps it out of the worker's warning logs and failure metrics. Temporal's retry policy schedules the
 * next attempt on the delivery schedule: WEBHOOK_RETRY_INITIAL_MS doubled per recorded attempt, up to an
 * hour (set here, so deferred runs do not stretch it).
 */
function attemptFailure(deps: WebhookActivityDeps, attempt: number, result: WebhookAttemptResult): ApplicationFailure {
  const initial_ms = deps.webhookEvents?.retry_initial_ms ?? 5_000;
  const nextRetryDelay = Math.min(initial_ms * 2 ** Math.min(attempt - 1, 30), Math.max(initial_ms, RETRY_INTERVAL_MS_MAX));
  return ApplicationFailure.create({
    message: `attempt ${attempt}: ${result.error}`,
    type: 'WebhookAttemptFailed',
    category: ApplicationFailureCategory.BENIGN,
    nextRetryDelay,
  });
}

/**
 * Sends the delivery's event to its endpoint once, signed for this attempt (Standard Webhooks:
 * the same webhook-id every time, a fresh timestamp and signature). Answers the delivery's final
 * status; throws (a retryable failure) when this attempt was not accepted.
 */
async function attemptWebhookDelivery(deps: WebhookActivityDeps, input: { delivery_id: string }): Promise<DeliveryStatus> {
  const d = await readDelivery(deps.db, input.delivery_id);
  if (d.status !== 'pending') return d.status;
  if (d.endpoint_deleted) {
    await markFailed(deps.db, input.delivery_id, 'the endpoint was deleted');
    return 'failed';
  }
  // Fair per workspace and per endpoint: without a slot, this run sends nothing and comes back shortly (not
  // an attempt: nothing is recorded, and the customer's attempt numbers have no gaps).
  const slot = await leaseSlot(deps, d.workspace_id, d.endpoint_id, input.delivery_id);
  if (slot === null) {
    throw ApplicationFailure.create({
      message: "the workspace's other deliveries hold all its attempt slots; deferred",
      type: 'WebhookWorkspaceBusy',
      category: ApplicationFailureCategory.BENIGN,
      nextRetryDelay: DEFER_MS + Math.floor(Math.random() * DEFER_MS),
    });
  }
  // The attempt's number: the ones recorded so far plus one (a run that died before recording its
  // attempt is numbered again by the next).
  const attempt = d.attempts + 1;
  const result = await sendAttempt(deps, input.delivery_id, d, slot, attempt);
  deps.logger?.info(
    {
      delivery_id: input.delivery_id,
      event_id: d.event_id,
      attempt,
      http_status: result.http_status,
      error: result.error,
      duration_ms: result.duration_ms,
    },
    'webhook attempt',
  );
  if (result.succeeded) return 'succeeded';
  throw attemptFailure(deps, attempt, result);
}

/** Gives the delivery up (its retry window has passed). */
async function failWebhookDelivery(deps: WebhookActivityDeps, input: { delivery_id: string; reason: string }): Promise<void> {
  await markFailed(deps.db, input.delivery_id, input.reason);
}

export function createWebhookActivities(deps: WebhookActivityDeps) {
  return {
    attemptWebhookDelivery: (input: { delivery_id: string }): Promise<DeliveryStatus> => attemptWebhookDelivery(deps, input),
    failWebhookDelivery: (input: { delivery_id: string; reason: string }): Promise<void> => failWebhookDelivery(deps, input),
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
