// The Express application: middleware order is auth -> rate limit -> body -> route -> one error handler.
import express from 'express';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import type { DownloadUrlSigner, UrlSigner } from '../storage/signed-urls.js';
import type { VideoJobsService } from '../video-jobs/service.js';
import { readVideoJob } from '../video-jobs/records.js';
import { isUuid } from '../ids.js';
import type { VideoJobLifecycle } from '../video-jobs/lifecycle.js';
import type { VoicesService } from '../voices/service.js';
import type { SpeechService } from '../voices/speech.js';
import type { SpeechTokens } from '../voices/speech-tokens.js';
import type { WebhooksService } from '../webhooks/service.js';
import { errorHandler, notFoundRoute } from '../http/errors.js';
import type { AuditOptions } from '../billing/audit.js';
import { keyIdOf, readingByPathId, requireAdmin, requireApiKey } from '../http/auth.js';
import { rateLimit } from '../http/rate-limit.js';
import { jobReadGate, jobReadsInFlightMax } from '../http/read-gate.js';
import { videoRoutes } from '../video-jobs/routes.js';
import { modelRoutes } from '../models/routes.js';
import type { ConfiguredVoiceProvider } from '../models/present.js';
import type { ConfiguredBackends } from '../models/catalog.js';
import { fileRoutes } from '../video-jobs/file-routes.js';
import { adminRoutes } from '../admin/routes.js';
import { voiceRoutes } from '../voices/routes.js';
import { speechRoutes } from '../voices/speech-routes.js';
import { docsRoutes } from '../service/docs-routes.js';
import { webhookRoutes } from '../webhooks/routes.js';
import { statementRoutes } from '../account/statement-routes.js';
import { accountRoutes } from '../account/account-routes.js';
import { usageRoutes } from '../usage/routes.js';
import { checkoutRoutes, stripeWebhookRoutes } from '../payments/routes.js';
import { AUTO_TOP_UP_NOT_CONFIGURED, type PaymentsService } from '../payments/service.js';
import * as PaymentSchemas from '../payments/schemas.js';
import { consoleRoutes } from '../service/console-routes.js';
import { providerCallbackRoutes, type ProviderCallbackDeps } from '../video-jobs/callback-routes.js';
import { voiceDescriptorOf } from '../providers/registry.js';
import { healthRoutes } from '../service/health-routes.js';
import { buildOpenApiDocument, type ApiRouter, type OpenApiDocument } from '../http/openapi.js';
import * as SharedSchemas from '../http/schemas.js';
import * as SharedOpenAiSchemas from '../http/openai/schemas.js';
import * as VideoJobSchemas from '../video-jobs/schemas.js';
import * as VideoJobOpenAiSchemas from '../video-jobs/openai-schemas.js';
import * as ModelSchemas from '../models/schemas.js';
import * as ModelOpenAiSchemas from '../models/openai-schemas.js';
import * as VoiceSchemas from '../voices/schemas.js';
import * as VoiceOpenAiSchemas from '../voices/openai-schemas.js';
import * as ServiceSchemas from '../service/schemas.js';
import * as AdminSchemas from '../admin/schemas.js';
import * as AccountSchemas from '../account/schemas.js';
import * as WebhookSchemas from '../webhooks/schemas.js';
import * as UsageSchemas from '../usage/schemas.js';
import { webhookOperations } from '../webhooks/openapi.js';
import { methodNotAllowed, optionsAllow } from '../http/method-not-allowed.js';
import { handleMetricsRequest, observeHttpRequest } from '../metrics.js';
import { FfmpegWasm } from '../media/ffmpeg-wasm.js';
import { Thumbnails } from '../media/thumbnails.js';
import { openAiRoutes } from './openai-app.js';
import { openAiSpeechRoutes } from '../voices/openai-speech-routes.js';
import { openAiVoiceRoutes } from '../voices/openai-routes.js';
import type { VoiceConsentsService } from '../voices/consents.js';
import type { BatchesService } from '../batches/service.js';
import type { FilesService } from '../batches/files.js';
import { batchRoutes } from '../batches/routes.js';
import { openAiBatchRoutes } from '../batches/openai-routes.js';
import * as BatchSchemas from '../batches/schemas.js';
import * as BatchOpenAiSchemas from '../batches/openai-schemas.js';

export interface AppDeps {
  db: Db;
  /** Expiring download URLs of stored videos (HMAC-signed /v2/files URLs, or S3 presigned URLs). */
  downloadUrls: DownloadUrlSigner;
  /** GET /v2/files (local storage only); null = not mounted, so /v2/files/... answers 404. */
  files: { storage: Storage; signer: UrlSigner } | null;
  jobs: VideoJobsService;
  lifecycle: VideoJobLifecycle;
  voices: VoicesService;
  speech: SpeechService;
  /** The speech WebSocket's tokens (POST /v2/audio/speech/tokens); unset = that route answers 503. */
  speechTokens?: SpeechTokens;
  /** Batches and their files (/v2/batches, /v2/files/{id}); unset = not mounted. */
  batches?: { batches: BatchesService; files: FilesService };
  webhooks: WebhooksService;
  logger: Logger;
  adminToken: string;
  /** The video backends this process serves: one set for /v2/models, /v1/models and the OpenAPI document (the create has the same). */
  backends: ConfiguredBackends;
  /** POST /v2/provider-callbacks/...: the adapters that verify callbacks and what a verified one does; unset = not mounted. */
  providerCallbacks?: ProviderCallbackDeps;
  /** The configured voice providers' names (VOICE_PROVIDERS), in their order: the first is a clone's default. */
  voiceProviders: readonly string[];
  /** Buying credits with Stripe; null or unset = not configured (the billing routes answer 503). */
  payments?: PaymentsService | null;
  publicBaseUrl: string | undefined;
  rateLimitPerMinute: number;
  /** Reads (GET, HEAD) per API key and minute, a budget apart from rateLimitPerMinute; unset = 600. */
  rateLimitReadsPerMinute?: number;
  /** Bearer token GET /metrics requires (METRICS_TOKEN); unset = open, like /healthz. */
  metricsToken?: string | undefined;
  /** NODE_ENV=production. */
  production?: boolean;
  /** How the ledger audit looks up job workflows in Temporal. */
  audit: AuditOptions;
  /** Where videos and speech are kept (the OpenAI-compatible API streams them from here). */
  storage?: Storage;
  /** Voice consents (the /v1 consent routes, and the `consent` part of /v2 clones). */
  voiceConsents?: VoiceConsentsService;
  /** FFmpeg (WebAssembly) for thumbnails; one is made when not given. */
  ffmpeg?: FfmpegWasm;
  /** Whether the process is ready (PostgreSQL reachable; ../service/readiness.ts). */
  ready: () => Promise<boolean>;
  /** Connections of `db`'s pool (DATABASE_POOL_MAX, default 10): the job reads run at once follow it (../http/read-gate.ts). */
  databasePoolMax?: number;
}

/** What the configured voice providers' descriptors say the model lists show: each one's preset voices. */
const configuredVoiceProviders = (deps: AppDeps): ConfiguredVoiceProvider[] =>
  deps.voiceProviders.map((name) => ({ name, preset_voices: voiceDescriptorOf(name)?.capabilities.preset_voices ?? [] }));

/** The voice the API document's examples name: the first provider's example voice, if it has one. */
const exampleVoice = (deps: AppDeps): string | undefined =>
  (deps.voiceProviders[0] === undefined ? null : voiceDescriptorOf(deps.voiceProviders[0])?.capabilities.example_voice) ?? undefined;

/** `first`, then (unless it failed) `then`. */
const chain =
  (first: express.RequestHandler, then: express.RequestHandler): express.RequestHandler =>
  (req, res, next) =>
    Promise.resolve(
      first(req, res, (err?: unknown) => {
        if (err !== undefined) return next(err as Error);
        Promise.resolve(then(req, res, next)).catch(next);
      }),
    ).catch(next);

/** `auth`, then for GET and HEAD requests the read limit, and for any other the count of writes in flight. */
function withReadLimit(
  auth: express.RequestHandler,
  readLimit: express.RequestHandler,
  writes: express.RequestHandler,
): express.RequestHandler {
  return chain(auth, (req, res, next) => (req.method === 'GET' || req.method === 'HEAD' ? readLimit : writes)(req, res, next));
}

/**
 * Gives every request an id (the X-Request-Id header) and, once answered, records its duration in the
 * metrics and logs one `request` line with its status, workspace and job.
 */
function requestLog(logger: Logger): express.RequestHandler {
  return (req, res, next) => {
    const requestId = randomUUID();
    res.locals['requestId'] = requestId;
    res.setHeader('X-Request-Id', requestId);
    const started_ms = performance.now();
    res.on('finish', () => {
      const duration_ms = performance.now() - started_ms;
      observeHttpRequest(req, res.statusCode, duration_ms / 1000);
      // Status polls are most requests: with the line off, nothing of it is built.
      if (!logger.isLevelEnabled('info')) return;
      logger.info(
        {
          request_id: requestId,
          method: req.method,
          path: req.path,
          status: res.statusCode,
          duration_ms,
          workspace_id: res.locals['principal']?.workspace_id,
          job_id: res.locals['jobId'],
        },
        'request',
      );
    });
    next();
  };
}

/** What the customers' routes put before their handlers. */
interface CustomerGuards {
  /** The API key, then for GET and HEAD the per-key read limit. */
  auth: express.RequestHandler;
  /** Reads of lists of jobs: the read gate, then `auth`. */
  readAuth: express.RequestHandler;
  /** A job's status read: the read gate, then the API key and the job in one query, then the read limit. */
  jobReadAuth: express.RequestHandler;
  /** The per-key limit of writes, which routes take after `auth`. */
  limit: express.RequestHandler;
}

/**
 * Every request authenticates first (a key found active is remembered a few seconds; failed lookups
 * are limited per address), then a read takes its key's read limit (its own budget: a client polling
 * its jobs never uses up its creates) and a write is counted by the read gate; writes take `limit` in
 * their routes. Only then do reads of jobs queue in the gate, each key for a bounded share of it: a
 * flood without a valid key, or over a key's limit, never waits in the gate nor slows others' reads.
 */
function customerGuards(deps: AppDeps, gate: ReturnType<typeof jobReadGate>): CustomerGuards {
  const readLimit = rateLimit(deps.rateLimitReadsPerMinute ?? 600, keyIdOf);
  const auth = withReadLimit(requireApiKey(deps.db), readLimit, gate.writes);
  // A status read's job, read once the gate admits it: what the id names in the key's workspace (null: nothing).
  const readJob = readingByPathId(async (id, principal) => {
    const job = isUuid(id) ? await readVideoJob(deps.db, id) : null;
    return job && job.workspace_id === principal.workspace_id ? job : null;
  });
  const gated = (after: express.RequestHandler) => chain(auth, chain(gate.reads, after));
  return {
    auth,
    readAuth: gated((_req, _res, next) => next()),
    jobReadAuth: gated(readJob),
    limit: rateLimit(deps.rateLimitPerMinute, keyIdOf),
  };
}

/**
 * The features' routers, in the order they are mounted and documented: /v2's, the operators' API, the
 * docs page (serving `document()`), then the OpenAI-compatible /v1 when storage is given.
 */
function featureRouters(app: express.Express, deps: AppDeps, guards: CustomerGuards, document: () => OpenApiDocument): ApiRouter[] {
  const { auth, readAuth, jobReadAuth, limit } = guards;
  // The OpenAI-compatible surface (/v1): the same services, OpenAI's shapes and error format.
  const openAi = (storage: Storage) =>
    openAiRoutes({
      ...deps,
      voiceProviders: configuredVoiceProviders(deps),
      auth,
      readAuth,
      jobReadAuth,
      limit,
      storage,
      thumbnails: new Thumbnails({ storage, ffmpeg: deps.ffmpeg ?? new FfmpegWasm() }),
      methodNotAllowed: methodNotAllowed(app),
      more: [
        openAiSpeechRoutes({ auth, limit, speech: deps.speech }),
        ...(deps.voiceConsents ? [openAiVoiceRoutes({ auth, limit, voices: deps.voices, consents: deps.voiceConsents })] : []),
        ...(deps.batches
          ? [openAiBatchRoutes({ auth, limit, ...deps.batches, downloadUrls: deps.downloadUrls, publicBaseUrl: deps.publicBaseUrl })]
          : []),
      ],
    });
  // The OpenAPI document is built from the contracts of the routers mounted here (../http/openapi.ts).
  return [
    videoRoutes({
      auth,
      readAuth,
      jobReadAuth,
      limit,
      jobs: deps.jobs,
      lifecycle: deps.lifecycle,
      downloadUrls: deps.downloadUrls,
      publicBaseUrl: deps.publicBaseUrl,
    }),
    modelRoutes({ auth, backends: deps.backends, voiceProviders: configuredVoiceProviders(deps) }),
    voiceRoutes({ auth, limit, voices: deps.voices, ...(deps.voiceConsents ? { consents: deps.voiceConsents } : {}) }),
    speechRoutes({ auth, limit, speech: deps.speech, ...(deps.speechTokens ? { tokens: deps.speechTokens } : {}) }),
    webhookRoutes({ auth, limit, webhooks: deps.webhooks }),
    statementRoutes({ auth, db: deps.db }),
    checkoutRoutes({ auth, limit, payments: deps.payments ?? null }),
    accountRoutes({ auth, limit, db: deps.db, autoTopUp: deps.payments ?? AUTO_TOP_UP_NOT_CONFIGURED }),
    usageRoutes({ auth, admin: requireAdmin(deps.adminToken), db: deps.db }),
    // Before the signed downloads' /v2/files/<key>: a batch file's id is one path segment, a storage key never is.
    ...(deps.batches
      ? [batchRoutes({ auth, limit, ...deps.batches, downloadUrls: deps.downloadUrls, publicBaseUrl: deps.publicBaseUrl })]
      : []),
    ...(deps.files ? [fileRoutes(deps.files)] : []),
    adminRoutes({
      db: deps.db,
      admin: requireAdmin(deps.adminToken),
      audit: deps.audit,
      jobs: deps.jobs,
      downloadUrls: deps.downloadUrls,
      publicBaseUrl: deps.publicBaseUrl,
    }),
    docsRoutes(document),
    ...(deps.storage ? [openAi(deps.storage)] : []),
  ];
}

/** The response components of the OpenAPI document, from every feature: /v2's, then /v1's. */
export const RESPONSE_COMPONENTS = {
  ...SharedSchemas.RESPONSE_COMPONENTS,
  ...VideoJobSchemas.RESPONSE_COMPONENTS,
  ...ModelSchemas.RESPONSE_COMPONENTS,
  ...VoiceSchemas.RESPONSE_COMPONENTS,
  ...ServiceSchemas.RESPONSE_COMPONENTS,
  ...AdminSchemas.RESPONSE_COMPONENTS,
  ...AccountSchemas.RESPONSE_COMPONENTS,
  ...WebhookSchemas.RESPONSE_COMPONENTS,
  ...UsageSchemas.RESPONSE_COMPONENTS,
  ...BatchSchemas.RESPONSE_COMPONENTS,
  ...PaymentSchemas.RESPONSE_COMPONENTS,
  ...SharedOpenAiSchemas.OPENAI_RESPONSE_COMPONENTS,
  ...VideoJobOpenAiSchemas.OPENAI_RESPONSE_COMPONENTS,
  ...ModelOpenAiSchemas.OPENAI_RESPONSE_COMPONENTS,
  ...VoiceOpenAiSchemas.OPENAI_RESPONSE_COMPONENTS,
  ...BatchOpenAiSchemas.OPENAI_RESPONSE_COMPONENTS,
};

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  // No tag computed over every answer: a job's reads carry their own (../http/conditional.ts), and hashing a
  // large answer (a usage read is up to 200 KB) cost more than anything else Express does for it.
  app.set('etag', false);
  app.use(requestLog(deps.logger));

  // Job reads yield to writes: the gate counts the authenticated writes in flight in the process (../http/read-gate.ts).
  const gate = jobReadGate({ permits: jobReadsInFlightMax(deps.databasePoolMax ?? 10) });
  app.use(optionsAllow(app));
  const health = healthRoutes({ ready: deps.ready });
  app.use(health.router);
  app.get('/metrics', (req, res, next) => {
    // In production the business figures are not public: served only behind METRICS_TOKEN.
    if (deps.production && !deps.metricsToken) return next();
    handleMetricsRequest(req, res, deps.metricsToken).catch(next);
  });

  const routers = featureRouters(app, deps, customerGuards(deps, gate), () => document);
  // Provider callbacks are the providers' (verified by their signatures), not the customers' API: undocumented.
  if (deps.providerCallbacks) app.use(providerCallbackRoutes(deps.providerCallbacks));
  // Stripe's events likewise: Stripe's (verified by its signature), not the customers' API.
  app.use(stripeWebhookRoutes({ payments: deps.payments ?? null }));
  for (const r of routers) app.use(r.router);
  app.use(consoleRoutes({ logger: deps.logger }));
  const documentContext = {
    backends: deps.backends,
    voiceProviders: deps.voiceProviders,
    exampleVoice: exampleVoice(deps),
    production: deps.production ?? false,
  };
  const document: OpenApiDocument = buildOpenApiDocument(
    documentContext,
    [...routers, health].flatMap((r) => r.contracts),
    {
      responses: RESPONSE_COMPONENTS,
      webhooks: webhookOperations(),
    },
  );
  app.use(methodNotAllowed(app));
  app.use(notFoundRoute);
  app.use(errorHandler(deps.logger));
  return app;
}
