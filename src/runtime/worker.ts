// A worker process's parts: the Temporal workers (jobs, webhook deliveries), their activities, the
// poller of submitted operations and the reconciler's schedule.
import type { Logger } from 'pino';
import { Client } from '@temporalio/client';
import { ConfigError, type Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { S3Storage } from '../storage/s3.js';
import { createWorker, installTemporalRuntime, openNativeConnection } from '../temporal/worker.js';
import { SwappableClient } from '../temporal/client.js';
import { temporalConnectOptions } from '../temporal/connection-config.js';
import { CredentialWatcher } from '../temporal/credentials.js';
import { checkNamespace } from '../temporal/startup-errors.js';
import { ensureReconcileSchedule } from '../temporal/reconcile-schedule.js';
import { webhookTaskQueue } from '../webhooks/dispatch.js';
import { checkSearchAttributes } from '../temporal/search-attributes.js';
import { createActivities } from '../../activities/index.js';
import { OperationPoller } from '../video-jobs/operation-poller.js';
import { loadSecrets } from './secrets.js';
import { createStorage, checkStorage, closeStorage, createDownloads } from './storage.js';
import { createVideoProviders, createVoiceProvider } from './providers.js';
import { temporalClientOptions } from '../telemetry/index.js';
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
  if (config.production)
    throw new ConfigError('URL_SIGNING_SECRET must be set when NODE_ENV=production (workers sign the video URLs in webhook events)');
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
  const { downloadUrls } = createDownloads(
    storage,
    workerUrlSigningSecret(opts.config, storage, opts.urlSigningSecret),
    opts.config.signedUrlTtlS,
  );
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
    webhookAttemptsPerWorkspace: opts.config.webhooks.concurrentAttemptsPerWorkspaceMax,
  });
  const { host } = opts.config;
  const connect = temporalConnectOptions(opts.config, opts.temporalAddress);
  const namespace = opts.config.temporal.namespace;
  const metricsBindAddress = opts.config.workerMetricsPort
    ? `${host.includes(':') ? `[${host}]` : host}:${opts.config.workerMetricsPort}`
    : undefined;
  installTemporalRuntime({ metricsBindAddress }); // before any connection: the first one would install a default runtime
  let connection = await openNativeConnection(connect);
  try {
    await checkNamespace(connection.workflowService, connect, namespace);
    await checkSearchAttributes(connection, namespace, connect);
  } catch (err) {
    await connection.close().catch(() => {});
    throw err;
  }
  const { worker } = await createWorker({
    connect,
    connection,
    namespace,
    taskQueue: opts.config.temporal.taskQueue,
    activities,
    limits: opts.config.workerLimits,
    ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : {}),
    metricsBindAddress,
  });
  // Webhook deliveries: their own task queue and worker (slots, a rate limit), sharing the connection.
  const { worker: webhookWorker } = await createWorker({
    connect,
    namespace,
    taskQueue: webhookTaskQueue(opts.config.temporal.taskQueue),
    activities,
    connection,
    limits: {
      maxCachedWorkflows: 100,
      maxConcurrentWorkflowTaskExecutions: 10,
      maxConcurrentActivityTaskExecutions: opts.config.webhooks.concurrentAttemptsMax,
      maxConcurrentLocalActivityExecutions: 2,
    },
    maxTaskQueueActivitiesPerSecond: opts.config.webhooks.attemptsPerSecondMax,
  });
  const workers = [worker, webhookWorker];
  const swappable = new SwappableClient(new Client({ connection, namespace, ...temporalClientOptions() }));
  const client = swappable.client;
  // Rotation: a new API key is set on the connection; a new certificate opens a new connection that
  // both workers switch to while running (Worker.connection: polls and completions go to it from then
  // on, nothing is dropped), then the old one is closed.
  const credentials = new CredentialWatcher({
    env: opts.config.temporal.env,
    settings: opts.config.temporal.connection,
    intervalMs: opts.config.temporal.credentialsCheckIntervalMs,
    logger: opts.logger,
    apply: async (change) => {
      if (!change.tls && change.next.connect.apiKey !== undefined) {
        await connection.setApiKey(change.next.connect.apiKey);
        return;
      }
      const next = await openNativeConnection({ ...change.next.connect, address: connect.address });
      for (const w of workers) w.connection = next;
      swappable.swap(new Client({ connection: next, namespace, ...temporalClientOptions() }));
      const previous = connection;
      connection = next;
      await previous
        .close()
        .catch((err) => opts.logger.warn({ error: (err as Error).message }, 'closing the replaced Temporal connection failed'));
    },
  });
  if (connect === opts.config.temporal.connection.connect) credentials.start();
  // Polls the jobs' provider operations and signals their workflows when they end (a pending job is a row).
  const poller = new OperationPoller({
    db: opts.db,
    temporal: client,
    providers: videoProviders,
    logger: opts.logger,
    concurrent_max: opts.config.workerConcurrentPollsMax,
    idle_ms: pollerIdleMs(opts.config.video.pollIntervalMs),
  });
  // The reconciler's schedule, with this configuration's interval (every worker makes sure of it).
  await ensureReconcileSchedule(client, {
    taskQueue: opts.config.temporal.taskQueue,
    interval_ms: opts.config.reconcileIntervalMs,
  });
  // Started last: a start that fails above leaves no poller running.
  poller.start();
  const run = Promise.all(workers.map((w) => w.run()))
    .then(() => undefined)
    .finally(async () => {
      credentials.stop();
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
      await connection.withDeadline(Date.now() + 2_000, () =>
        connection.workflowService.describeNamespace({ namespace: opts.config.temporal.namespace }),
      );
      return true;
    },
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await run.catch(() => {});
    },
  };
}
