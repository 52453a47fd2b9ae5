// The Temporal Schedule that runs the money reconciler (workflows/reconciler.ts) every
// RECONCILE_INTERVAL_MS: durable and single-instance whatever the number of processes (the schedule
// lives in Temporal, not in a timer of one process; overlapping runs are skipped). Every worker process
// makes sure it exists with the configured interval at startup.
import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client } from '@temporalio/client';

export const reconcileScheduleId = (taskQueue: string) => `money-reconciler-${taskQueue}`;

/** A reconciler run that takes longer than this is cut short (the next one starts over). */
const RUN_TIMEOUT_MS = 10 * 60_000;

export async function ensureReconcileSchedule(client: Client, opts: { taskQueue: string; interval_ms: number }): Promise<void> {
  const scheduleId = reconcileScheduleId(opts.taskQueue);
  const action = {
    type: 'startWorkflow' as const,
    workflowType: 'reconcileWorkflow',
    workflowId: `money-reconciler-run-${opts.taskQueue}`,
    taskQueue: opts.taskQueue,
    args: [],
    workflowExecutionTimeout: RUN_TIMEOUT_MS,
  };
  const spec = { intervals: [{ every: opts.interval_ms }] };
  try {
    await client.schedule.create({
      scheduleId,
      spec,
      action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
    });
    return;
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  const handle = client.schedule.getHandle(scheduleId);
  const current = await handle.describe();
  const every = current.spec.intervals?.[0]?.every;
  const sameAction = current.action.type === 'startWorkflow' && current.action.taskQueue === opts.taskQueue;
  if (every === opts.interval_ms && sameAction && !current.state.paused) return;
  await handle.update((previous) => ({ ...previous, spec, action, state: { ...previous.state, paused: false } }));
}

/** Removes the schedule (tests; an operator retiring a task queue). */
export async function deleteReconcileSchedule(client: Client, taskQueue: string): Promise<void> {
  await client.schedule
    .getHandle(reconcileScheduleId(taskQueue))
    .delete()
    .catch((err) => {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    });
}
