// The money reconciler, run by a Temporal Schedule every RECONCILE_INTERVAL_MS (one schedule per task
// queue: durable, single-instance, overlapping runs skipped). Orchestration only: the activity finds jobs
// whose money is unsettled although their workflow ended or vanished, restarts them to settle,
// releases speech holds whose request died, and starts webhook deliveries recorded but never started
// (src/temporal/reconcile-schedule.ts sets it up).
import { proxyActivities } from '@temporalio/workflow';
import type { ReconcilerActivities, ReconcileReport } from '../activities/reconciler.js';

// The activity heartbeats at every job and step. A run the schedule started blocks the next ones (they are
// skipped while it runs): an attempt whose worker died is given to another after the heartbeat timeout,
// seconds, not minutes (a faults test kills a worker in the middle of a reconcile). An attempt slow for
// longer is run again beside it: the reconciler is idempotent.
const reconciling = proxyActivities<ReconcilerActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});

export async function reconcileWorkflow(): Promise<ReconcileReport> {
  return reconciling.reconcileMoney();
}
