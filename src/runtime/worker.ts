// A worker process's parts: the Temporal workers (jobs, webhook deliveries), their activities, the
// poller of submitted operations and the reconciler's schedule.
import type { Logger } from 'pino';
import { Client } from '@temporalio/client';
import { ConfigError, type Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { S3Storage } from '../storage/s3.js';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { createWorker, installTemporalRuntime, openNativeConnection } from '../temporal/worker.js';
import { SwappableClient } from '../temporal/client.js';
import { temporalConnectOptions, type TemporalConnectOptions } from '../temporal/connection-config.js';
import { CredentialWatcher, RetiredConnections } from '../temporal/credentials.js';
import { checkNamespace } from '../temporal/startup-errors.js';
import { ensureReconcileSchedule } from '../temporal/reconcile-schedule.js';
import { dispatchAlertWebhooks, webhookTaskQueue } from '../webhooks/dispatch.js';
import { AutoTopUpStarter } from '../payments/auto-top-up.js';
import { createStripeClient } from '../payments/service.js';
import { checkSearchAttributes } from '../temporal/search-attributes.js';
import { createActivities } from '../../activities/index.js';
import { OperationPoller } from '../video-jobs/operation-poller.js';
import { loadSecrets } from './secrets.js';
import { createStorage, checkStorage, closeStorage, createDownloads } from './storage.js';
import { createVideoProviders, createVoiceProviders } from './providers.js';
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

interface StartWorkerOptions {
  config: Config;
  db: Db;
  temporalAddress: string;
  logger: Logger;
  urlSigningSecret?: string;
  /** Workflow code bundled elsewhere (another release's, in the upgrade test); else this code's workflows. */
  workflowBundle?: { code: string };
}

/**
 * Starts a worker process: checks the storage, builds the activities, connects to Temporal (refusing to
 * start without its namespace and search attributes), creates both workers, watches the credentials,
 * makes sure of the reconciler's Schedule and starts the operation poller last. `run` settles when the
 * workers stop, after the watcher, the poller, the storage and the connection are closed.
 */
export async function startWorker(opts: StartWorkerOptions): Promise<RunningWorker> {
  const storage = createStorage(opts.config);
  await checkStorage(storage);
  const { activities, videoProviders } = createWorkerActivities(opts, storage);
  const temporal = await connectTemporal(opts.config, opts.temporalAddress);
  const workers = await createWorkers(opts, temporal, activities);
  const swappable = new SwappableClient(
    new Client({ connection: temporal.connection, namespace: temporal.namespace, ...temporalClientOptions() }),
  );
  const client = swappable.client;
  const retired = new RetiredConnections();
  const credentials = watchCredentials(opts, temporal, workers, swappable, retired);
  if (temporal.connect === opts.config.temporal.connection.connect) credentials.start();
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
  // Automatic top-ups recorded by charges: their PaymentIntents are started here (with Stripe configured), at
  // once when the database notifies one (a connection of the pool listens), and by a poll every second.
  const autoTopUps = autoTopUpStarter(opts, client);
  // Started last: a start that fails above leaves no poller running.
  poller.start();
  autoTopUps?.start();
  const run = Promise.all(workers.map((w) => w.run()))
    .then(() => undefined)
    .finally(async () => {
      credentials.stop();
      await poller.shutdown();
      await autoTopUps?.shutdown();
      closeStorage(storage);
      await retired.closeAll();
      return temporal.connection.close();
    });
  run.catch((err) => opts.logger.error({ err }, 'worker stopped with an error'));
  return {
    run,
    /** Ready: every worker of the process is running, and PostgreSQL and Temporal answer (within 2 s). */
    async ready(): Promise<boolean> {
      if (!workers.every((w) => w.getState() === 'RUNNING')) return false;
      await opts.db.query('SELECT 1');
      const { connection } = temporal;
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

/** The starter of automatic top-ups' PaymentIntents (../payments/auto-top-up.ts), when Stripe is configured. */
function autoTopUpStarter(opts: StartWorkerOptions, client: Client): AutoTopUpStarter | null {
  const stripe = opts.config.stripe;
  if (!stripe) return null;
  const dispatch = {
    client,
    db: opts.db,
    taskQueue: opts.config.temporal.taskQueue,
    retry_initial_ms: opts.config.webhooks.retryInitialMs,
  };
  return new AutoTopUpStarter({
    db: opts.db,
    stripe: createStripeClient(stripe),
    logger: opts.logger,
    interval_ms: 1_000,
    afterFailure: (workspaceId) => {
      dispatchAlertWebhooks(dispatch, workspaceId).catch((err: Error) =>
        opts.logger.warn(
          { workspace_id: workspaceId, err: err.message },
          'auto top-up failure delivery not started; the reconciler starts it',
        ),
      );
    },
  });
}

type WorkerActivities = ReturnType<typeof createActivities>;

/**
 * The activities every workflow of this process orders, over this configuration's storage, provider
 * adapters and webhook settings; the video adapters are returned too, for the operation poller.
 */
function createWorkerActivities(opts: StartWorkerOptions, storage: Storage) {
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
    voiceProviders: createVoiceProviders(opts.db, opts.config),
    logger: opts.logger,
    taskQueue: opts.config.temporal.taskQueue,
    video: opts.config.video,
    callbackBaseUrl: apiBaseUrl(opts.config),
    webhookEvents: { context: { downloadUrls, baseUrl: apiBaseUrl(opts.config) }, retry_initial_ms: opts.config.webhooks.retryInitialMs },
    webhookPolicy: { production: opts.config.production },
    retention: { speech_audio_ms: opts.config.speechAudioRetentionMs },
    webhookAttemptsPerWorkspace: opts.config.webhooks.concurrentAttemptsPerWorkspaceMax,
    batchConcurrency: opts.config.batchConcurrency,
  });
  return { activities, videoProviders };
}

/** The process's one connection to Temporal; `connection` changes when a certificate rotation replaces it. */
interface TemporalLink {
  connect: TemporalConnectOptions;
  namespace: string;
  metricsBindAddress: string | undefined;
  connection: NativeConnection;
}

/**
 * Installs the SDK's runtime (with its Prometheus exporter when WORKER_METRICS_PORT is set), opens the
 * connection and checks that the namespace and search attributes exist, closing the connection before
 * refusing to start.
 */
async function connectTemporal(config: Config, temporalAddress: string): Promise<TemporalLink> {
  const { host } = config;
  const connect = temporalConnectOptions(config, temporalAddress);
  const namespace = config.temporal.namespace;
  const metricsBindAddress = config.workerMetricsPort
    ? `${host.includes(':') ? `[${host}]` : host}:${config.workerMetricsPort}`
    : undefined;
  installTemporalRuntime({ metricsBindAddress }); // before any connection: the first one would install a default runtime
  const connection = await openNativeConnection(connect);
  try {
    await checkNamespace(connection.workflowService, connect, namespace);
    await checkSearchAttributes(connection, namespace, connect);
  } catch (err) {
    await connection.close().catch(() => {});
    throw err;
  }
  return { connect, namespace, metricsBindAddress, connection };
}

/** The jobs' worker and the webhook deliveries' worker, both on the one connection. */
async function createWorkers(opts: StartWorkerOptions, temporal: TemporalLink, activities: WorkerActivities): Promise<Worker[]> {
  const { connect, connection, namespace, metricsBindAddress } = temporal;
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
  return [worker, webhookWorker];
}

/**
 * Rotation: a new API key is set on the connection; a new certificate opens a new connection that
 * both workers switch to while running (Worker.connection: polls and completions go to it from then
 * on, nothing is dropped), and the old one is retired: closed once what was begun on it has ended
 * (`retired`). Returned unstarted.
 */
function watchCredentials(
  opts: StartWorkerOptions,
  temporal: TemporalLink,
  workers: Worker[],
  swappable: SwappableClient,
  retired: RetiredConnections,
): CredentialWatcher {
  return new CredentialWatcher({
    env: opts.config.temporal.env,
    settings: opts.config.temporal.connection,
    intervalMs: opts.config.temporal.credentialsCheckIntervalMs,
    logger: opts.logger,
    apply: async (change) => {
      if (!change.tls && change.next.connect.apiKey !== undefined) {
        await temporal.connection.setApiKey(change.next.connect.apiKey);
        return;
      }
      const next = await openNativeConnection({ ...change.next.connect, address: temporal.connect.address });
      for (const w of workers) w.connection = next;
      swappable.swap(new Client({ connection: next, namespace: temporal.namespace, ...temporalClientOptions() }));
      // Drained like the API's: the polls and completions begun on the old connection end before it closes.
      retired.retire(temporal.connection);
      temporal.connection = next;
    },
  });
}
