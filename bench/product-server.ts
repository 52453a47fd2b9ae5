// Subject (c) of the create benchmark, and the process of the other phases: the product's API and
// worker in one process, built by src/runtime.ts exactly as `npm start` builds them when DATABASE_URL
// and TEMPORAL_ADDRESS name running servers (src/main.ts).
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { loadSecrets } from '../src/runtime/secrets.js';
import { openDatabase } from '../src/runtime/database.js';
import { startApi } from '../src/runtime/api.js';
import { startWorker } from '../src/runtime/worker.js';
import { deleteReconcileSchedule } from '../src/temporal/reconcile-schedule.js';
import type { RunningSubject } from './subject.js';

export const PRODUCT_CREATE_PATH = '/v2/videos/generations';

/**
 * The product's parts in this process: both (as `npm start`), or only the API (`npm run api`) or only
 * the worker (`npm run worker`), so that each one's CPU and memory can be read apart. A worker alone
 * answers no HTTP: its url is empty.
 */
export async function startProduct(env: NodeJS.ProcessEnv, parts: 'both' | 'api' | 'worker' = 'both'): Promise<RunningSubject> {
  const config = loadConfig(env);
  const logger = createLogger(config.logLevel, 'video-voice-api');
  const secrets = loadSecrets(config);
  const db = await openDatabase(config.databaseUrl!, config);
  const worker =
    parts === 'api'
      ? null
      : await startWorker({ config, db, temporalAddress: config.temporal.address!, logger, urlSigningSecret: secrets.urlSigningSecret });
  const api = parts === 'worker' ? null : await startApi({ config, db, temporalAddress: config.temporal.address!, secrets, logger });
  return {
    url: api?.url ?? '',
    async stop() {
      // The reconciler's schedule would otherwise outlive this process on the shared Temporal.
      if (api) await deleteReconcileSchedule(api.temporal, config.temporal.taskQueue).catch(() => {});
      await api?.close();
      await worker?.shutdown();
      await db.end();
    },
  };
}
