// The engine's floor (subject b of the create benchmark): the least a workflow can do to answer a
// create the way the product does. Started with update-with-start; the update waits for the first
// workflow task's local activity, a PostgreSQL charge, and returns its result (early return). Then the
// run ends: nothing else is part of the floor.
import { allHandlersFinished, condition, defineUpdate, proxyLocalActivities, setHandler } from '@temporalio/workflow';
import type { FloorActivities, FloorCharge } from './floor-charge.js';

export const acceptFloorJob = defineUpdate<{ balance_micro_eur: number }>('acceptFloorJob');

// The product's charge options (workflows/video-job.ts, chargingWithin).
const charging = proxyLocalActivities<FloorActivities>({
  startToCloseTimeout: '5 seconds',
  scheduleToCloseTimeout: '20 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '2 seconds' },
});

export async function floorJobWorkflow(charge: FloorCharge): Promise<number> {
  let balance_micro_eur: number | undefined;
  setHandler(acceptFloorJob, async () => {
    await condition(() => balance_micro_eur !== undefined);
    return { balance_micro_eur: balance_micro_eur! };
  });
  balance_micro_eur = await charging.chargeFloorJob(charge);
  await condition(allHandlersFinished);
  return balance_micro_eur;
}
