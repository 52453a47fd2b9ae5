// Subject (b) of the create benchmark, the engine's floor: an Express route that starts
// bench/floor-workflow.ts with update-with-start (USE_EXISTING) and answers 202 once the update returns,
// and a worker for it in the same process, on its own task queue and database. Pool size and worker
// limits are the product's (from the same configuration), so only the work differs.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { WithStartWorkflowOperation } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { loadConfig } from '../src/config.js';
import { createPool } from '../src/db/pool.js';
import { connectClient } from '../src/temporal/client.js';
import { installTemporalRuntime, openNativeConnection } from '../src/temporal/worker.js';
import { temporalConnectOptions } from '../src/temporal/connection-config.js';
import { createFloorActivities, createFloorWorkspace } from './floor-charge.js';
import { acceptFloorJob, type floorJobWorkflow } from './floor-workflow.js';
import { listen } from './listen.js';
import type { RunningSubject } from './subject.js';

export const FLOOR_CREATE_PATH = '/floor/jobs';
const FLOOR_CHARGE_MICRO_EUR = 400_000;

export async function startFloor(env: NodeJS.ProcessEnv): Promise<RunningSubject> {
  const config = loadConfig(env);
  const db = createPool(config.databaseUrl!, config.databasePoolMax);
  const workspace_id = randomUUID();
  await createFloorWorkspace(db, workspace_id, 1_000_000_000_000_000);

  installTemporalRuntime();
  // The product's connection settings (TLS, a client certificate, an API key: Temporal's variables).
  const connect = temporalConnectOptions(config, config.temporal.address!);
  const connection = await openNativeConnection(connect);
  const taskQueue = config.temporal.taskQueue;
  const worker = await Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue,
    workflowsPath: fileURLToPath(new URL('./floor-workflow.ts', import.meta.url)),
    activities: createFloorActivities(db),
    ...config.workerLimits,
  });
  const running = worker.run();
  const client = await connectClient({ ...connect, namespace: config.temporal.namespace });

  const app = express();
  app.disable('x-powered-by');
  app.post(FLOOR_CREATE_PATH, express.json(), async (_req, res) => {
    const job_id = randomUUID();
    const start = new WithStartWorkflowOperation<typeof floorJobWorkflow>('floorJobWorkflow', {
      workflowId: `floor-${job_id}`,
      taskQueue,
      args: [{ job_id, workspace_id, amount_micro_eur: FLOOR_CHARGE_MICRO_EUR }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    const charged = await client.workflow.executeUpdateWithStart(acceptFloorJob, { startWorkflowOperation: start });
    res.status(202).json({ object: 'floor_job', id: job_id, balance_micro_eur: charged.balance_micro_eur });
  });
  const server = await listen(app);
  return {
    url: server.url,
    async stop() {
      await server.close();
      worker.shutdown();
      await running;
      await client.connection.close();
      await connection.close();
      await db.end();
    },
  };
}
