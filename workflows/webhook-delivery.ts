// Durable delivery of one webhook event to one endpoint (workflow id `webhook-delivery-<delivery id>`,
// started once: see src/webhooks/dispatch.ts). Orchestration only. Each HTTP attempt is one run of
// the attempt activity, which records it; Temporal's retry policy is the delivery schedule: backoff
// from retry_initial_ms (WEBHOOK_RETRY_INITIAL_MS), doubling up to an hour, for give_up_after_ms
// (24 hours), across restarts and crashes of every process. A delivery not accepted by then is
// marked failed. The activity's attempt number is the attempt shown to customers.
import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import type { WebhookActivities } from '../activities/webhook.js';

export interface WebhookDeliveryInput {
  delivery_id: string;
  retry_initial_ms: number;
  give_up_after_ms: number;
}

export interface WebhookDeliveryResult {
  delivery_id: string;
  status: 'succeeded' | 'failed';
}

export const webhookDeliveryWorkflowId = (delivery_id: string) => `webhook-delivery-${delivery_id}`;

/** The longest wait between two attempts. */
export const WEBHOOK_RETRY_INTERVAL_MS_MAX = 3_600_000;
/** How long a delivery is retried before it is marked failed. */
export const WEBHOOK_GIVE_UP_AFTER_MS = 24 * 3_600_000;
/** Bounds one attempt: DNS (5 s) and the HTTP exchange (10 s), then recording it. */
const ATTEMPT_TIMEOUT = '30 seconds';

// Marking a delivery failed is idempotent and retried until it succeeds.
const finishing = proxyActivities<Pick<WebhookActivities, 'failWebhookDelivery'>>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** 24 hours, 90 minutes, 1.5 seconds. */
function duration(ms: number): string {
  const [unit, size] = ms >= 3_600_000 ? ['hours', 3_600_000] : ms >= 60_000 ? ['minutes', 60_000] : ['seconds', 1_000];
  return `${Math.round((ms / (size as number)) * 10) / 10} ${unit}`;
}

export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const delivering = proxyActivities<Pick<WebhookActivities, 'attemptWebhookDelivery'>>({
    startToCloseTimeout: ATTEMPT_TIMEOUT,
    scheduleToCloseTimeout: input.give_up_after_ms,
    retry: {
      initialInterval: input.retry_initial_ms,
      backoffCoefficient: 2,
      maximumInterval: Math.max(input.retry_initial_ms, WEBHOOK_RETRY_INTERVAL_MS_MAX),
    },
  });
  try {
    const status = await delivering.attemptWebhookDelivery({ delivery_id: input.delivery_id });
    return { delivery_id: input.delivery_id, status };
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err;
    await finishing.failWebhookDelivery({
      delivery_id: input.delivery_id,
      reason: `not accepted within ${duration(input.give_up_after_ms)}; not retried any more`,
    });
    return { delivery_id: input.delivery_id, status: 'failed' };
  }
}
