// The Express application: middleware order is auth -> rate limit -> body -> route -> one error handler.
import express from 'express';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import type { DownloadUrlSigner, UrlSigner } from '../storage/signed-urls.js';
import type { VideoJobsService } from '../services/video-jobs.js';
import type { VideoJobLifecycle } from '../services/video-job-lifecycle.js';
import type { VoicesService } from '../services/voices.js';
import type { SpeechService } from '../services/speech.js';
import type { WebhooksService } from '../services/webhooks.js';
import { errorHandler, notFoundRoute } from './errors.js';
import type { AuditOptions } from '../billing/audit.js';
import { requireAdmin, requireApiKey } from './auth.js';
import { rateLimit } from './rate-limit.js';
import { videoRoutes } from './routes/videos.js';
import { modelRoutes } from './routes/models.js';
import { fileRoutes } from './routes/files.js';
import { adminRoutes } from './routes/admin.js';
import { voiceRoutes } from './routes/voices.js';
import { speechRoutes } from './routes/speech.js';
import { docsRoutes } from './routes/docs.js';
import { webhookRoutes } from './routes/webhooks.js';
import { statementRoutes } from './routes/statement.js';
import { buildOpenApiDocument } from './openapi.js';
import { methodNotAllowed, optionsAllow } from './method-not-allowed.js';
import { handleMetricsRequest, observeHttpRequest } from '../metrics.js';

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
  webhooks: WebhooksService;
  logger: Logger;
  adminToken: string;
  simulator: boolean;
  /** Vertex AI is configured (it serves the reference family). */
  vertex?: boolean;
  /** The configured voice provider (VOICE_PROVIDER). */
  voiceProvider: string;
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
  /** Whether the process is ready (Postgres and Temporal reachable). */
  ready: () => Promise<boolean>;
}

/** `auth`, then for GET and HEAD requests the read limit. */
function withReadLimit(auth: express.RequestHandler, readLimit: express.RequestHandler): express.RequestHandler {
  return (req, res, next) =>
    auth(req, res, (err?: unknown) => {
      if (err !== undefined || (req.method !== 'GET' && req.method !== 'HEAD')) return next(err as Error | undefined);
      readLimit(req, res, next);
    });
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use((req, res, next) => {
    const requestId = randomUUID();
    res.locals['requestId'] = requestId;
    res.set('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const duration_ms = Number(process.hrtime.bigint() - started) / 1e6;
      observeHttpRequest(req, res.statusCode, duration_ms / 1000);
      deps.logger.info(
        { request_id: requestId, method: req.method, path: req.path, status: res.statusCode, duration_ms, workspace_id: res.locals['principal']?.workspace_id, job_id: res.locals['jobId'] },
        'request',
      );
    });
    next();
  });

  app.use(optionsAllow(app));
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/readyz', async (_req, res) => {
    const ok = await deps.ready().catch(() => false);
    res.status(ok ? 200 : 503).json({ ok });
  });
  app.get('/metrics', (req, res, next) => {
    // In production the business figures are not public: served only behind METRICS_TOKEN.
    if (deps.production && !deps.metricsToken) return next();
    handleMetricsRequest(req, res, deps.metricsToken).catch(next);
  });

  // Every authenticated read is rate limited per key after authentication (its own budget: a client
  // polling its jobs never uses up its creates); writes take `limit` in their routes.
  const auth = withReadLimit(requireApiKey(deps.db), rateLimit(deps.rateLimitReadsPerMinute ?? 600));
  const limit = rateLimit(deps.rateLimitPerMinute);
  app.use(videoRoutes({ auth, limit, jobs: deps.jobs, lifecycle: deps.lifecycle, downloadUrls: deps.downloadUrls, publicBaseUrl: deps.publicBaseUrl }));
  app.use(modelRoutes({ auth, simulator: deps.simulator, vertex: deps.vertex ?? false, voiceProvider: deps.voiceProvider }));
  app.use(voiceRoutes({ auth, limit, voices: deps.voices }));
  app.use(speechRoutes({ auth, limit, speech: deps.speech }));
  app.use(webhookRoutes({ auth, limit, webhooks: deps.webhooks }));
  app.use(statementRoutes({ auth, db: deps.db }));
  if (deps.files) app.use(fileRoutes(deps.files));
  app.use(adminRoutes({ db: deps.db, admin: requireAdmin(deps.adminToken), audit: deps.audit }));
  app.use(docsRoutes(buildOpenApiDocument({ simulator: deps.simulator, vertex: deps.vertex ?? false, voiceProvider: deps.voiceProvider, production: deps.production ?? false })));
  app.use(methodNotAllowed(app));
  app.use(notFoundRoute);
  app.use(errorHandler(deps.logger));
  return app;
}
