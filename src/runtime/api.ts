// An API process's parts: the services behind the HTTP API and the server itself.
import http from 'node:http';
import type { Logger } from 'pino';
import { Client, type Connection } from '@temporalio/client';
import { ConfigError, type Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { VoicesService } from '../voices/service.js';
import { FilesService } from '../batches/files.js';
import { BatchesService } from '../batches/service.js';
import { SpeechService } from '../voices/speech.js';
import { SpeechTokens } from '../voices/speech-tokens.js';
import { SpeechSocketServer } from '../voices/speech-socket.js';
import { WebhooksService } from '../webhooks/service.js';
import { dispatchAlertWebhooks } from '../webhooks/dispatch.js';
import { VideoJobsService } from '../video-jobs/service.js';
import { VideoJobLifecycle } from '../video-jobs/lifecycle.js';
import { PaymentsService } from '../payments/service.js';
import { createApp } from './app.js';
import { FfmpegWasm } from '../media/ffmpeg-wasm.js';
import { VoiceConsentsService } from '../voices/consents.js';
import { openConnection, SwappableClient } from '../temporal/client.js';
import { temporalConnectOptions } from '../temporal/connection-config.js';
import { CredentialWatcher, RetiredConnections } from '../temporal/credentials.js';
import { checkNamespace } from '../temporal/startup-errors.js';
import { videoJobWorkflowStates } from '../temporal/workflow-states.js';
import { checkSearchAttributes } from '../temporal/search-attributes.js';
import { nudgePollForCallback } from '../video-jobs/operation-polls.js';
import { Secrets } from './secrets.js';
import { createStorage, checkStorage, closeStorage, createDownloads } from './storage.js';
import { configuredBackends, createVideoProviders, createVoiceProviders } from './providers.js';
import { voiceProviderNames } from '../providers/registry.js';
import { temporalClientOptions } from '../telemetry/index.js';
import { traceProviderCallback } from '../telemetry/job-trace.js';
import type { Storage } from '../storage/local.js';
import { Readiness } from '../service/readiness.js';
import type { VideoProvider } from '../providers/video/types.js';
import type { VoiceProviderSet } from '../providers/voice/types.js';

export interface RunningApi {
  url: string;
  /** The operators' API's own listener (ADMIN_PORT), when configured. */
  adminUrl?: string;
  temporal: Client;
  close(): Promise<void>;
}

/**
 * Starts an API process: checks the storage, builds the provider adapters, connects to Temporal
 * (refusing to start without its namespace and search attributes), builds the app and listens.
 * `close` stops in reverse: the server (requests in flight end first), the Temporal connections,
 * FFmpeg, the storage.
 */
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
  const voiceProviders = createVoiceProviders(opts.db, config);
  // The adapters verify their providers' callbacks (POST /v2/provider-callbacks/...).
  const callbackProviders = createVideoProviders(opts.db, config);
  const connected = await connectTemporal(config, opts.temporalAddress, opts.logger);
  const { temporal } = connected;
  // FFmpeg (WebAssembly, one worker thread): thumbnails and compressed speech formats.
  const ffmpeg = new FfmpegWasm();
  // Ready: PostgreSQL answers. Temporal is checked in the background, for the temporal_reachable gauge.
  const readiness = new Readiness({
    database: () => opts.db.query('SELECT 1'),
    temporal: (timeout_ms) =>
      temporal.connection.withDeadline(Date.now() + timeout_ms, () =>
        temporal.workflowService.describeNamespace({ namespace: config.temporal.namespace }),
      ),
  });
  readiness.start();
  const speechTokens = new SpeechTokens(opts.secrets.urlSigningSecret, config.speechTokenTtlS);
  const { app, speech } = buildApp({ ...opts, storage, voiceProviders, callbackProviders, temporal, ffmpeg, readiness, speechTokens });
  // With ADMIN_PORT, the operators' API is served on a listener of its own and not on PORT.
  const split = config.adminPort !== undefined;
  const server = await listen(split ? only(app, (p) => !isAdminPath(p)) : app, config.port, config.host, 'PORT');
  const adminServer = split ? await listen(only(app, isAdminListenerPath), config.adminPort!, config.host, 'ADMIN_PORT') : null;
  // Speech over a WebSocket: the upgrades of the public listener.
  const speechSocket = new SpeechSocketServer({
    db: opts.db,
    speech,
    tokens: speechTokens,
    limits: config.speechSocket,
    logger: opts.logger,
  });
  speechSocket.attach(server);
  const portOf = (s: http.Server, configured: number) => {
    const address = s.address();
    return typeof address === 'object' && address ? address.port : configured;
  };
  return {
    url: `http://${config.host}:${portOf(server, config.port)}`,
    ...(adminServer ? { adminUrl: `http://${config.host}:${portOf(adminServer, config.adminPort!)}` } : {}),
    temporal,
    async close() {
      readiness.stop();
      // Sockets first (each context settled for what was spoken): the server waits for its connections.
      await speechSocket.close();
      await Promise.all(
        [server, ...(adminServer ? [adminServer] : [])].map(
          (s) =>
            new Promise<void>((r) => {
              s.close(() => r());
              s.closeIdleConnections();
            }),
        ),
      );
      await connected.close();
      await ffmpeg.close();
      closeStorage(storage);
    },
  };
}

/** The API's Temporal client, and what closes it. */
interface ConnectedTemporal {
  temporal: Client;
  /** Stops the credential watcher, then closes the retired connections and the current one. */
  close(): Promise<void>;
}

/**
 * Opens the Temporal client, checks that its namespace and search attributes exist (closing the
 * connection before refusing to start), and watches the credentials: a rotated API key is set on the
 * open connection; rotated TLS files swap in a client on a new connection, the old one kept open for
 * the calls begun on it. Only the configured connection is watched (not a dev server's).
 */
async function connectTemporal(config: Config, temporalAddress: string, logger: Logger): Promise<ConnectedTemporal> {
  const connect = temporalConnectOptions(config, temporalAddress);
  const namespace = config.temporal.namespace;
  const swappable = new SwappableClient(new Client({ connection: await openConnection(connect), namespace, ...temporalClientOptions() }));
  const temporal = swappable.client;
  // The connections a certificate rotation replaced: closed once calls begun on them have ended.
  const retired = new RetiredConnections();
  const credentials = new CredentialWatcher({
    env: config.temporal.env,
    settings: config.temporal.connection,
    intervalMs: config.temporal.credentialsCheckIntervalMs,
    logger,
    apply: async (change) => {
      if (!change.tls && change.next.connect.apiKey !== undefined) {
        (swappable.connection as Connection).setApiKey(change.next.connect.apiKey);
        return;
      }
      retired.retire(
        swappable.swap(
          new Client({
            connection: await openConnection({ ...change.next.connect, address: connect.address }),
            namespace,
            ...temporalClientOptions(),
          }),
        ),
      );
    },
  });
  try {
    await checkNamespace(temporal.workflowService, connect, namespace);
    await checkSearchAttributes(temporal.connection, namespace, connect);
  } catch (err) {
    await temporal.connection.close().catch(() => {});
    throw err;
  }
  if (connect === config.temporal.connection.connect) credentials.start();
  return {
    temporal,
    async close() {
      credentials.stop();
      await retired.closeAll();
      await temporal.connection.close();
    },
  };
}

/** The parts `buildApp` is given: the process's wiring and what `startApi` has already opened. */
interface AppParts {
  config: Config;
  db: Db;
  secrets: Secrets;
  logger: Logger;
  storage: Storage;
  voiceProviders: VoiceProviderSet;
  callbackProviders: Map<string, VideoProvider>;
  temporal: Client;
  ffmpeg: FfmpegWasm;
  readiness: Readiness;
  speechTokens: SpeechTokens;
}

/**
 * The services that start workflows: creating video jobs, listing, cancelling and deleting them
 * (with recovery of lost runs), and cloned voices (whose deletion is a workflow).
 */
function createWorkflowServices(parts: AppParts) {
  const { config, db, storage, temporal, voiceProviders, logger } = parts;
  const jobs = new VideoJobsService({
    db,
    storage,
    temporal,
    taskQueue: config.temporal.taskQueue,
    backends: configuredBackends(parts.callbackProviders),
    job_timeout_ms: config.video.jobTimeoutMs,
    create_timeout_ms: config.video.createTimeoutMs,
  });
  const lifecycle = new VideoJobLifecycle({
    db,
    temporal,
    storage,
    recovery: { taskQueue: config.temporal.taskQueue, job_timeout_ms: config.video.jobTimeoutMs },
  });
  const voices = new VoicesService({
    db,
    providers: voiceProviders,
    temporal,
    taskQueue: config.temporal.taskQueue,
    logger,
    voices_per_workspace_max: config.voiceClonesPerWorkspace,
  });
  return { jobs, lifecycle, voices };
}

/**
 * Builds the Express app over the services the routes call; readiness asks the database and the
 * Temporal namespace.
 */
function buildApp(parts: AppParts): { app: http.RequestListener; speech: SpeechService } {
  const { config, db, storage, temporal, ffmpeg } = parts;
  const { jobs, lifecycle, voices } = createWorkflowServices(parts);
  const speech = new SpeechService({ db, voices, storage, ffmpeg, afterCharge: alertDispatcher(parts) });
  const files = new FilesService({ db, storage });
  const batches = new BatchesService({
    db,
    temporal,
    taskQueue: config.temporal.taskQueue,
    jobs,
    speech,
    files,
    job_timeout_ms: config.video.jobTimeoutMs,
  });
  const app = createApp({
    db,
    databasePoolMax: config.databasePoolMax,
    ...createDownloads(storage, parts.secrets.urlSigningSecret, config.signedUrlTtlS),
    jobs,
    lifecycle,
    voices,
    speech,
    speechTokens: parts.speechTokens,
    batches: { batches, files },
    ffmpeg,
    webhooks: new WebhooksService({ db, policy: { production: config.production } }),
    logger: parts.logger,
    adminToken: parts.secrets.adminToken,
    backends: configuredBackends(parts.callbackProviders),
    providerCallbacks: {
      providerFor: (backend) => parts.callbackProviders.get(backend),
      // With tracing, a span of the job's trace.
      nudgeJob: (c) =>
        traceProviderCallback(db, c, () =>
          nudgePollForCallback(db, {
            job_id: c.job_id,
            backend: c.backend,
            delivery_id: c.delivery.delivery_id,
            concerns: c.concerns,
          }),
        ),
      limits: config.providerCallbackLimits,
    },
    voiceProviders: voiceProviderNames(config.providers),
    payments: config.stripe
      ? new PaymentsService({ db, config: config.stripe, logger: parts.logger, afterFailure: (ws) => alertDispatcher(parts)(ws) })
      : null,
    publicBaseUrl: config.publicBaseUrl,
    rateLimitPerMinute: config.rateLimitPerMinute,
    rateLimitReadsPerMinute: config.rateLimitReadsPerMinute,
    metricsToken: config.metricsToken,
    production: config.production,
    audit: { workflowStates: videoJobWorkflowStates(temporal) },
    storage,
    voiceConsents: new VoiceConsentsService({ db, storage, required: config.voiceConsentRequired }),
    ready: () => parts.readiness.ready(),
  });
  return { app, speech };
}

/**
 * Starts the deliveries of the budget alerts a charge made here (a speech capture) recorded, without
 * holding up the answer; one that cannot be started now is started by the reconciler.
 */
function alertDispatcher(parts: AppParts): (workspaceId: string) => void {
  const dispatch = {
    client: parts.temporal,
    db: parts.db,
    taskQueue: parts.config.temporal.taskQueue,
    retry_initial_ms: parts.config.webhooks.retryInitialMs,
  };
  return (workspaceId) => {
    dispatchAlertWebhooks(dispatch, workspaceId).catch((err: Error) =>
      parts.logger.warn({ workspace_id: workspaceId, err: err.message }, 'budget alert deliveries not started; the reconciler starts them'),
    );
  };
}

/** The operators' API (/admin/...). */
export const isAdminPath = (path: string) => path === '/admin' || path.startsWith('/admin/');
/** What the admin listener serves: the operators' API, the probes and the metrics. */
const isAdminListenerPath = (path: string) => isAdminPath(path) || /^\/(livez|readyz|healthz|metrics)$/.test(path);

/** `app` for the requests whose path `serves`; a 404 in the API's error shape for the others. */
function only(app: http.RequestListener, serves: (path: string) => boolean): http.RequestListener {
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (serves(path)) return app(req, res);
    req.resume();
    res.writeHead(404, { 'Content-Type': 'application/json; charset=utf-8' });
    res.end(
      JSON.stringify({
        error: { type: 'not_found_error', code: 'route_not_found', message: `no route for ${req.method} ${path}`, param: null },
      }),
    );
  };
}

/**
 * Serves `app` on `host` and `port`, with limits on slow clients; a port already in use refuses with a
 * one-line configuration error naming `variable`.
 */
async function listen(app: http.RequestListener, port: number, host: string, variable: string): Promise<http.Server> {
  const server = http.createServer(app);
  // Limits on slow clients: headers within 10 s, a whole request within 60 s.
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new ConfigError(`port ${port} is already in use; set ${variable} to a free port`) : err),
    );
    server.listen(port, host, () => resolve());
  });
  return server;
}
