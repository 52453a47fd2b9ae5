// The money reconciler, run by a Temporal Schedule every RECONCILE_INTERVAL_MS (one schedule per task
// queue: durable, single-instance, overlapping runs skipped). Orchestration only: the activity finds jobs
// whose money is unsettled although their workflow ended or vanished, restarts them to settle,
// releases speech holds whose request died, and starts webhook deliveries recorded but never started
// (src/temporal/reconcile-schedule.ts sets it up).
import { proxyActivities } from '@temporalio/workflow';
import type { ReconcilerActivities, ReconcileReport } from '../activities/reconciler.js';

const reconciling = proxyActivities<ReconcilerActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 3 },
});

export async function reconcileWorkflow(): Promise<ReconcileReport> {
  return reconciling.reconcileMoney();
}
