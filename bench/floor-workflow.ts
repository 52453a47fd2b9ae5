// The engine's floor (subject b of the create benchmark): the least a workflow can do to answer a
// create the way the product does. Started with update-with-start; the update waits for the first
// workflow task's local activity, a PostgreSQL charge, and returns its result (early return). Then the
// run ends: nothing else is part of the floor. Below it, the engine's whole job (phase 5): the same
// charge followed by the rest of the product's job shape, with none of the product's code.
import {
  ActivityCancellationType,
  allHandlersFinished,
  CancellationScope,
  condition,
  defineSignal,
  defineUpdate,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import type { FloorActivities, FloorCharge } from './floor-charge.js';

export const acceptFloorJob = defineUpdate<{ balance_micro_eur: number }>('acceptFloorJob');

// The product's charge options (workflows/video-job.ts, chargingWithin).
const charging = proxyLocalActivities<Pick<FloorActivities, 'chargeFloorJob'>>({
  startToCloseTimeout: '5 seconds',
  scheduleToCloseTimeout: '20 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '2 seconds' },
});

export async function floorJobWorkflow(charge: FloorCharge): Promise<number> {
  // eslint-disable-next-line prefer-const -- the update handler reads it before the charge assigns it
  let balance_micro_eur: number | undefined;
  setHandler(acceptFloorJob, async () => {
    await condition(() => balance_micro_eur !== undefined);
    return { balance_micro_eur: balance_micro_eur! };
  });
  balance_micro_eur = await charging.chargeFloorJob(charge);
  await condition(allHandlersFinished);
  return balance_micro_eur;
}

/** The operation of an engine whole job has ended (sent by the floor's poller). */
export const floorOperationEnded = defineSignal<[{ operation_id: string }]>('floorOperationEnded');

// The product's options for each step (workflows/video-job.ts): submit, copy, settle.
const submitting = proxyActivities<Pick<FloorActivities, 'submitFloorJob'>>({
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  heartbeatTimeout: '15 seconds',
  startToCloseTimeout: '2 minutes',
  scheduleToCloseTimeout: '30 minutes',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});
const copying = proxyActivities<Pick<FloorActivities, 'copyFloorOutput'>>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});
const settling = proxyLocalActivities<Pick<FloorActivities, 'settleFloorJob'>>({
  startToCloseTimeout: '40 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * The engine running a job of the product's shape with none of its code: the charge (as the floor's
 * create), a submit activity that records an operation for the poller, a wait for the poller's signal
 * with the deadline as a timer, a copy activity that stores a video file, and a settling local activity.
 */
export async function floorWholeJobWorkflow(charge: FloorCharge): Promise<string> {
  // eslint-disable-next-line prefer-const -- the update handler reads it before the charge assigns it
  let balance_micro_eur: number | undefined;
  let ended: string | undefined;
  setHandler(acceptFloorJob, async () => {
    await condition(() => balance_micro_eur !== undefined);
    return { balance_micro_eur: balance_micro_eur! };
  });
  setHandler(floorOperationEnded, (report) => {
    ended ??= report.operation_id;
  });
  balance_micro_eur = await CancellationScope.nonCancellable(() => charging.chargeFloorJob(charge));
  const outcome = await CancellationScope.cancellable(async () => {
    const operation_id = await submitting.submitFloorJob(charge.job_id);
    const deadline = sleep(30 * 60_000).then(() => 'deadline' as const);
    const report = await Promise.race([condition(() => ended !== undefined).then(() => ended!), deadline]);
    if (report === 'deadline') return 'failed';
    await copying.copyFloorOutput({ job_id: charge.job_id, operation_id });
    return 'succeeded';
  });
  await CancellationScope.nonCancellable(() => settling.settleFloorJob({ job_id: charge.job_id, status: outcome }));
  await condition(allHandlersFinished);
  return outcome;
}
