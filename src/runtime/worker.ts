// A worker process's parts: the Temporal workers (jobs, webhook deliveries), their activities, the
// poller of submitted operations and the reconciler's schedule.
import type { Logger } from 'pino';
import { Client } from '@temporalio/client';
import { ConfigError, type Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { S3Storage } from '../storage/s3.js';
import { createWorker } from '../temporal/worker.js';
import { ensureReconcileSchedule } from '../temporal/reconcile-schedule.js';
import { webhookTaskQueue } from '../webhooks/dispatch.js';
import { checkSearchAttributes } from '../temporal/search-attributes.js';
import { createActivities } from '../../activities/index.js';
import { OperationPoller } from '../video-jobs/operation-poller.js';
import { loadSecrets } from './secrets.js';
import { createStorage, checkStorage, closeStorage, createDownloads } from './storage.js';
import { createVideoProviders, createVoiceProvider } from './providers.js';
import { apiBaseUrl } from './base-url.js';

export interface RunningWorker {
  run: Promise<void>;
  ready(): Promise<boolean>;
  shutdown(): Promise<void>;
}

/**
 * The secret of the download URLs a worker puts in webhook events (local storage): the one the API
 * processes use, URL_SIGNING_SECRET, or in development the one kept in DATA_DIR/secrets.json.
 */
function workerUrlSigningSecret(config: Config, storage: Storage, given: string | undefined): string {
  if (storage instanceof S3Storage) return ''; // presigned by the bucket's credentials instead
  if (given ?? config.urlSigningSecret) return (given ?? config.urlSigningSecret)!;
  if (config.production) throw new ConfigError('URL_SIGNING_SECRET must be set when NODE_ENV=production (workers sign the video URLs in webhook events)');
  return loadSecrets(config).urlSigningSecret;
}

/**
 * The poller's wait when no job is due: a tenth of the poll interval, between 20 and 200 ms (a job a
 * provider's callback made due is polled within it; each wait ends with one claim query).
 */
const pollerIdleMs = (poll_interval_ms: number) => Math.min(Math.max(Math.floor(poll_interval_ms / 10), 20), 200);

export async function startWorker(opts: {
  config: Config;
  db: Db;
  temporalAddress: string;
  logger: Logger;
  urlSigningSecret?: string;
  /** Workflow code bundled elsewhere (another release's, in the upgrade test); else this code's workflows. */
  workflowBundle?: { code: string };
}): Promise<RunningWorker> {
  const storage = createStorage(opts.config);
  await checkStorage(storage);
  const { downloadUrls } = createDownloads(storage, workerUrlSigningSecret(opts.config, storage, opts.urlSigningSecret), opts.config.signedUrlTtlS);
  const videoProviders = createVideoProviders(opts.db, opts.config);
  const activities = createActivities({
    db: opts.db,
    storage,
    videoProviders,
    voiceProvider: createVoiceProvider(opts.db, opts.config),
    logger: opts.logger,
    taskQueue: opts.config.temporal.taskQueue,
    video: opts.config.video,
    callbackBaseUrl: apiBaseUrl(opts.config),
    webhookEvents: { context: { downloadUrls, baseUrl: apiBaseUrl(opts.config) }, retry_initial_ms: opts.config.webhooks.retryInitialMs },
    webhookPolicy: { production: opts.config.production },
    retention: { speech_audio_ms: opts.config.speechAudioRetentionMs },
    webhookAttemptsPerWorkspace: opts.config.webhooks.maxConcurrentAttemptsPerWorkspace,
  });
  const { host } = opts.config;
  const { worker, connection } = await createWorker({
    address: opts.temporalAddress,
    namespace: opts.config.temporal.namespace,
    taskQueue: opts.config.temporal.taskQueue,
    activities,
    limits: opts.config.workerLimits,
    ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : {}),
    metricsBindAddress: opts.config.workerMetricsPort ? `${host.includes(':') ? `[${host}]` : host}:${opts.config.workerMetricsPort}` : undefined,
  });
  // Webhook deliveries: their own task queue and worker (slots, a rate limit), sharing the connection.
  const { worker: webhookWorker } = await createWorker({
    address: opts.temporalAddress,
    namespace: opts.config.temporal.namespace,
    taskQueue: webhookTaskQueue(opts.config.temporal.taskQueue),
    activities,
    connection,
    limits: {
      maxCachedWorkflows: 100,
      maxConcurrentWorkflowTaskExecutions: 10,
      maxConcurrentActivityTaskExecutions: opts.config.webhooks.maxConcurrentAttempts,
      maxConcurrentLocalActivityExecutions: 2,
    },
    maxTaskQueueActivitiesPerSecond: opts.config.webhooks.maxAttemptsPerSecond,
  });
  await checkSearchAttributes(connection.operatorService, opts.config.temporal.namespace);
  const client = new Client({ connection, namespace: opts.config.temporal.namespace });
  // Polls the jobs' provider operations and signals their workflows when they end (a pending job is a row).
  const poller = new OperationPoller({
    db: opts.db,
    temporal: client,
    providers: videoProviders,
    logger: opts.logger,
    max_concurrent: opts.config.workerMaxConcurrentPolls,
    idle_ms: pollerIdleMs(opts.config.video.pollIntervalMs),
  });
  // The reconciler's schedule, with this configuration's interval (every worker makes sure of it).
  await ensureReconcileSchedule(client, {
    taskQueue: opts.config.temporal.taskQueue,
    interval_ms: opts.config.reconcileIntervalMs,
  });
  // Started last: a start that fails above leaves no poller running.
  poller.start();
  const workers = [worker, webhookWorker];
  const run = Promise.all(workers.map((w) => w.run()))
    .then(() => undefined)
    .finally(async () => {
      await poller.shutdown();
      closeStorage(storage);
      return connection.close();
    });
  run.catch((err) => opts.logger.error({ err }, 'worker stopped with an error'));
  return {
    run,
    /** Ready: every worker of the process is running, and PostgreSQL and Temporal answer (within 2 s). */
    async ready(): Promise<boolean> {
      if (!workers.every((w) => w.getState() === 'RUNNING')) return false;
      await opts.db.query('SELECT 1');
      await connection.withDeadline(Date.now() + 2_000, () => connection.workflowService.describeNamespace({ namespace: opts.config.temporal.namespace }));
      return true;
    },
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await run.catch(() => {});
    },
  };
}
