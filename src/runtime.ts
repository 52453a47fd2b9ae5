// Builds the parts a process runs (API server, worker) from config and the infrastructure addresses.
// Used by `npm start` (everything in one process tree) and by the scale-out entry points.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { Client } from '@temporalio/client';
import { ConfigError, type Config } from './config.js';
import { createPool, type Db } from './db/pool.js';
import { migrate } from './db/migrate.js';
import { LocalStorage, type Storage } from './storage/local.js';
import { UrlSigner, type DownloadUrlSigner } from './storage/signed-urls.js';
import { S3Storage } from './storage/s3.js';
import { SimulatedVideoProvider } from './providers/video/simulator.js';
import { googleAuthTokenSource, staticTokenSource, VertexVeoProvider } from './providers/video/vertex-veo.js';
import type { VideoProvider } from './providers/video/types.js';
import { SimulatedVoiceProvider } from './providers/voice/simulator.js';
import { NoVoiceProvider } from './providers/voice/none.js';
import { ElevenLabsVoiceProvider } from './providers/voice/elevenlabs.js';
import type { VoiceProvider } from './providers/voice/types.js';
import { VoicesService } from './services/voices.js';
import { SpeechService } from './services/speech.js';
import { WebhooksService } from './services/webhooks.js';
import { findVideoModel, providerModelIdFor, videoModelBackendFor } from './catalog.js';
import { FalVideoProvider } from './providers/video/fal.js';
import { ReplicateVideoProvider } from './providers/video/replicate.js';
import { VideoJobsService } from './video-jobs/service.js';
import { VideoJobLifecycle } from './video-jobs/lifecycle.js';
import { createApp } from './http/app.js';
import { FfmpegWasm } from './media/ffmpeg-wasm.js';
import { VoiceConsentsService } from './services/voice-consents.js';
import { connectClient } from './temporal/client.js';
import { createWorker } from './temporal/worker.js';
import { videoJobWorkflowStates } from './temporal/workflow-states.js';
import { ensureReconcileSchedule } from './temporal/reconcile-schedule.js';
import { webhookTaskQueue } from './webhooks/dispatch.js';
import { checkSearchAttributes } from './temporal/search-attributes.js';
import { createActivities } from '../activities/index.js';
import { OperationPoller } from './video-jobs/operation-poller.js';
import { nudgePollForCallback } from './video-jobs/operation-polls.js';

export interface Secrets {
  adminToken: string;
  urlSigningSecret: string;
  /** The admin token was generated (development) rather than given. */
  adminTokenGenerated: boolean;
}

/**
 * ADMIN_TOKEN and URL_SIGNING_SECRET from the environment; in development, generated once and kept
 * in DATA_DIR/secrets.json (mode 0600) so they survive restarts and the admin CLI can read them.
 */
export function loadSecrets(config: Config): Secrets {
  if (config.adminToken && config.urlSigningSecret) {
    return { adminToken: config.adminToken, urlSigningSecret: config.urlSigningSecret, adminTokenGenerated: false };
  }
  if (config.production) throw new ConfigError('ADMIN_TOKEN and URL_SIGNING_SECRET must be set when NODE_ENV=production');
  const file = path.join(config.dataDir, 'secrets.json');
  let stored: { admin_token?: string; url_signing_secret?: string } = {};
  if (fs.existsSync(file)) stored = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!stored.admin_token || !stored.url_signing_secret) {
    stored = {
      admin_token: stored.admin_token ?? `adm_${randomBytes(24).toString('base64url')}`,
      url_signing_secret: stored.url_signing_secret ?? randomBytes(32).toString('base64url'),
    };
    fs.mkdirSync(config.dataDir, { recursive: true });
    fs.writeFileSync(file, JSON.stringify(stored, null, 2), { mode: 0o600 });
  }
  return {
    adminToken: config.adminToken ?? stored.admin_token!,
    urlSigningSecret: config.urlSigningSecret ?? stored.url_signing_secret!,
    adminTokenGenerated: !config.adminToken,
  };
}

export async function openDatabase(url: string, config: Config): Promise<Db> {
  const db = createPool(url, config.databasePoolMax, { 'video_api.max_pending_jobs': config.maxPendingJobsPerWorkspace });
  try {
    await db.query('SELECT 1');
  } catch (err) {
    await db.end().catch(() => {});
    throw new ConfigError(`cannot reach PostgreSQL at ${redactUrl(url)}: ${(err as Error).message}`);
  }
  await migrate(db);
  return db;
}

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/** The storage of STORAGE_BACKEND: DATA_DIR/storage, or the S3 bucket (presigned URLs live SIGNED_URL_TTL_S). */
export function createStorage(config: Config): Storage {
  if (config.s3) {
    return new S3Storage({
      bucket: config.s3.bucket,
      region: config.s3.region,
      endpoint: config.s3.endpoint,
      publicEndpoint: config.s3.publicEndpoint,
      forcePathStyle: config.s3.forcePathStyle,
      credentials: config.s3.credentials,
      urlTtlS: config.signedUrlTtlS,
    });
  }
  return new LocalStorage(path.join(config.dataDir, 'storage'));
}

/** Startup check: a bucket that cannot be reached is a one-line ConfigError, not a failed job later. */
export async function checkStorage(storage: Storage): Promise<void> {
  if (storage instanceof S3Storage) {
    await storage.check().catch((err: Error) => {
      throw new ConfigError(err.message);
    });
  }
}

export function closeStorage(storage: Storage): void {
  if (storage instanceof S3Storage) storage.destroy();
}

/**
 * How customers download stored outputs. S3 hands out its own presigned URLs; local storage is
 * served by GET /v2/files behind our HMAC-signed URLs (`files`), which is mounted only then.
 */
export function createDownloads(storage: Storage, urlSigningSecret: string, ttl_s: number): {
  downloadUrls: DownloadUrlSigner;
  files: { storage: Storage; signer: UrlSigner } | null;
} {
  if (storage instanceof S3Storage) return { downloadUrls: storage, files: null };
  const signer = new UrlSigner(urlSigningSecret, ttl_s);
  return { downloadUrls: signer, files: { storage, signer } };
}

export function createVideoProviders(db: Db, config: Config): Map<string, VideoProvider> {
  const providers = new Map<string, VideoProvider>();
  if (config.simulator) {
    providers.set('simulator', new SimulatedVideoProvider(db, (model) => findVideoModel(model)?.accepts_parameters === true));
  }
  if (config.vertex) {
    const v = config.vertex;
    providers.set(
      'vertex',
      new VertexVeoProvider({
        projectId: v.projectId,
        // A retired id resolves to its replacement: Vertex never sees it (it answers 404 for those).
        modelIdFor: (id) => providerModelIdFor(id, 'vertex'),
        location: v.location,
        apiEndpoint: v.apiEndpoint,
        gcsApiEndpoint: v.gcsApiEndpoint,
        ...(v.outputGcsUri !== undefined ? { outputGcsUri: v.outputGcsUri } : {}),
        tokenSource: v.accessToken ? staticTokenSource(v.accessToken) : googleAuthTokenSource(),
      }),
    );
  }
  if (config.fal) {
    const { key, queueUrl, jwksUrl } = config.fal;
    providers.set('fal', new FalVideoProvider({ key, queueUrl, jwksUrl, backendFor: (id) => videoModelBackendFor(id, 'fal') }));
  }
  if (config.replicate) {
    const { token, apiUrl, webhookSecret } = config.replicate;
    providers.set(
      'replicate',
      new ReplicateVideoProvider({ token, apiUrl, ...(webhookSecret ? { webhookSecret } : {}), backendFor: (id) => videoModelBackendFor(id, 'replicate') }),
    );
  }
  return providers;
}

/** The voice provider of VOICE_PROVIDER (ElevenLabs: its key, base URL and model from ELEVENLABS_*). */
export function createVoiceProvider(db: Db, config: Config): VoiceProvider {
  switch (config.voiceProvider) {
    case 'simulator':
      return new SimulatedVoiceProvider(db);
    case 'none':
      return new NoVoiceProvider();
    case 'elevenlabs': {
      const { apiKey, baseUrl, modelId } = config.elevenlabs;
      if (!apiKey) throw new ConfigError('ELEVENLABS_API_KEY must be set when VOICE_PROVIDER=elevenlabs');
      return new ElevenLabsVoiceProvider({ apiKey, baseUrl, modelId });
    }
  }
}

export interface RunningWorker {
  run: Promise<void>;
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

/** Base of the URLs in webhook events: PUBLIC_BASE_URL, else the API's own address. */
export function apiBaseUrl(config: Config): string {
  return config.publicBaseUrl ?? `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
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
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await run.catch(() => {});
    },
  };
}

export interface RunningApi {
  url: string;
  temporal: Client;
  close(): Promise<void>;
}

export async function startApi(opts: {
  config: Config;
  db: Db;
  temporalAddress: string;
  secrets: Secrets;
  logger: Logger;
}): Promise<RunningApi> {
  const { config } = opts;
  const storage = createStorage(config);
  await checkStorage(storage);
  const voiceProvider = createVoiceProvider(opts.db, config);
  // The adapters verify their providers' callbacks (POST /v2/provider-callbacks/...).
  const callbackProviders = createVideoProviders(opts.db, config);
  const temporal = await connectClient({ address: opts.temporalAddress, namespace: config.temporal.namespace });
  await checkSearchAttributes(temporal.connection.operatorService, config.temporal.namespace);
  const jobs = new VideoJobsService({
    db: opts.db,
    temporal,
    taskQueue: config.temporal.taskQueue,
    simulator: config.simulator,
    vertex: config.vertex !== null,
    fal: config.fal !== null,
    replicate: config.replicate !== null,
    job_timeout_ms: config.video.jobTimeoutMs,
    create_timeout_ms: config.video.createTimeoutMs,
  });
  const lifecycle = new VideoJobLifecycle({
    db: opts.db,
    temporal,
    storage,
    recovery: { taskQueue: config.temporal.taskQueue, job_timeout_ms: config.video.jobTimeoutMs },
  });
  const voices = new VoicesService({
    db: opts.db,
    provider: voiceProvider,
    temporal,
    taskQueue: config.temporal.taskQueue,
    logger: opts.logger,
    max_voices_per_workspace: config.voiceClonesPerWorkspace,
  });
  // FFmpeg (WebAssembly, one worker thread): thumbnails and compressed speech formats.
  const ffmpeg = new FfmpegWasm();
  const app = createApp({
    db: opts.db,
    ...createDownloads(storage, opts.secrets.urlSigningSecret, config.signedUrlTtlS),
    jobs,
    lifecycle,
    voices,
    speech: new SpeechService({ db: opts.db, voices, storage, ffmpeg }),
    ffmpeg,
    webhooks: new WebhooksService({ db: opts.db, policy: { production: config.production } }),
    logger: opts.logger,
    adminToken: opts.secrets.adminToken,
    simulator: config.simulator,
    vertex: config.vertex !== null,
    fal: config.fal !== null,
    replicate: config.replicate !== null,
    providerCallbacks: { providerFor: (backend) => callbackProviders.get(backend), nudgeJob: async (job_id, backend) => void (await nudgePollForCallback(opts.db, job_id, backend)) },
    voiceProvider: config.voiceProvider,
    publicBaseUrl: config.publicBaseUrl,
    rateLimitPerMinute: config.rateLimitPerMinute,
    rateLimitReadsPerMinute: config.rateLimitReadsPerMinute,
    metricsToken: config.metricsToken,
    production: config.production,
    audit: { workflowStates: videoJobWorkflowStates(temporal) },
    storage,
    voiceConsents: new VoiceConsentsService({ db: opts.db, storage, required: config.voiceConsentRequired }),
    ready: async () => {
      await opts.db.query('SELECT 1');
      await temporal.connection.withDeadline(Date.now() + 2_000, () =>
        temporal.workflowService.describeNamespace({ namespace: config.temporal.namespace }),
      );
      return true;
    },
  });
  const server = http.createServer(app);
  // Limits on slow clients: headers within 10 s, a whole request within 60 s.
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new ConfigError(`port ${config.port} is already in use; set PORT to a free port`) : err),
    );
    server.listen(config.port, config.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  return {
    url: `http://${config.host}:${port}`,
    temporal,
    async close() {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeIdleConnections();
      });
      await temporal.connection.close();
      closeStorage(storage);
    },
  };
}
