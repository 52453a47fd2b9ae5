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

export async function startProduct(env: NodeJS.ProcessEnv): Promise<RunningSubject> {
  const config = loadConfig(env);
  const logger = createLogger(config.logLevel, 'video-voice-api');
  const secrets = loadSecrets(config);
  const db = await openDatabase(config.databaseUrl!, config);
  const worker = await startWorker({
    config,
    db,
    temporalAddress: config.temporal.address!,
    logger,
    urlSigningSecret: secrets.urlSigningSecret,
  });
  const api = await startApi({ config, db, temporalAddress: config.temporal.address!, secrets, logger });
  return {
    url: api.url,
    async stop() {
      // The reconciler's schedule would otherwise outlive this process on the shared Temporal.
      await deleteReconcileSchedule(api.temporal, config.temporal.taskQueue).catch(() => {});
      await api.close();
      await worker.shutdown();
      await db.end();
    },
  };
}
