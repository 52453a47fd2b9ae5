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
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Db } from '../src/db/pool.js';
import { createFloorActivities, createFloorWorkspace } from './floor-charge.js';
import { acceptFloorJob, floorOperationEnded, type floorJobWorkflow, type floorWholeJobWorkflow } from './floor-workflow.js';
import { listen } from './listen.js';
import type { RunningSubject } from './subject.js';

export const FLOOR_CREATE_PATH = '/floor/jobs';
/** The engine running a whole job of the product's shape (phase 5). */
export const FLOOR_WHOLE_JOB_PATH = '/floor/whole-jobs';
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
    activities: createFloorActivities(db, {
      first_poll_after_ms: config.video.pollIntervalMs,
      storage_dir: path.join(config.dataDir, 'storage'),
    }),
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
  app.post(FLOOR_WHOLE_JOB_PATH, express.json(), async (_req, res) => {
    const job_id = randomUUID();
    const start = new WithStartWorkflowOperation<typeof floorWholeJobWorkflow>('floorWholeJobWorkflow', {
      workflowId: `floor-whole-${job_id}`,
      taskQueue,
      args: [{ job_id, workspace_id, amount_micro_eur: FLOOR_CHARGE_MICRO_EUR }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    const charged = await client.workflow.executeUpdateWithStart(acceptFloorJob, { startWorkflowOperation: start });
    res.status(202).json({ object: 'floor_job', id: job_id, balance_micro_eur: charged.balance_micro_eur });
  });
  const poller = floorPoller(db, client, config.video.pollIntervalMs);
  const server = await listen(app);
  return {
    url: server.url,
    async stop() {
      await server.close();
      await poller.stop();
      worker.shutdown();
      await running;
      await client.connection.close();
      await connection.close();
      await db.end();
    },
  };
}

/** Rows a claim of the floor's poller takes at once (the product's WORKER_MAX_CONCURRENT_POLLS default). */
const FLOOR_CLAIM_MAX = 50;

/**
 * The floor's poller: claims due operations (SKIP LOCKED, moving them 30 s ahead), signals each one's
 * workflow that it ended (a floor operation ends at its first poll), and forgets it; idle, it waits a
 * tenth of the poll interval between claims, between 20 and 200 ms, as the product's poller does.
 */
function floorPoller(db: Db, client: Client, poll_interval_ms: number): { stop(): Promise<void> } {
  const idle_ms = Math.min(Math.max(Math.floor(poll_interval_ms / 10), 20), 200);
  let stopping = false;
  const loop = (async () => {
    while (!stopping) {
      const claimed = await db
        .query<{ job_id: string; operation_id: string }>(
          `UPDATE floor_polls SET next_poll_at = now() + interval '30 seconds'
            WHERE job_id IN (SELECT job_id FROM floor_polls WHERE next_poll_at <= now() ORDER BY next_poll_at LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING job_id, operation_id`,
          [FLOOR_CLAIM_MAX],
        )
        .catch(() => ({ rows: [] as { job_id: string; operation_id: string }[] }));
      await Promise.all(
        claimed.rows.map(async (row) => {
          await client.workflow
            .getHandle(`floor-whole-${row.job_id}`)
            .signal(floorOperationEnded, { operation_id: row.operation_id })
            .catch(() => {});
        }),
      );
      if (claimed.rows.length === 0) await new Promise((r) => setTimeout(r, idle_ms));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
    },
  };
}
