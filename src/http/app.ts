// The Express application: middleware order is auth -> rate limit -> body -> route -> one error handler.
import express from 'express';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import type { UrlSigner } from '../storage/signed-urls.js';
import type { VideoJobsService } from '../services/video-jobs.js';
import type { VoicesService } from '../services/voices.js';
import type { SpeechService } from '../services/speech.js';
import { errorHandler, notFoundRoute } from './errors.js';
import { requireAdmin, requireApiKey } from './auth.js';
import { rateLimit } from './rate-limit.js';
import { videoRoutes } from './routes/videos.js';
import { modelRoutes } from './routes/models.js';
import { fileRoutes } from './routes/files.js';
import { adminRoutes } from './routes/admin.js';
import { voiceRoutes } from './routes/voices.js';
import { speechRoutes } from './routes/speech.js';

export interface AppDeps {
  db: Db;
  storage: Storage;
  signer: UrlSigner;
  jobs: VideoJobsService;
  voices: VoicesService;
  speech: SpeechService;
  logger: Logger;
  adminToken: string;
  simulator: boolean;
  /** The configured voice provider (VOICE_PROVIDER). */
  voiceProvider: string;
  publicBaseUrl: string | undefined;
  rateLimitPerMinute: number;
  /** Whether the process is ready (Postgres and Temporal reachable). */
  ready: () => Promise<boolean>;
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
      deps.logger.info(
        { request_id: requestId, method: req.method, path: req.path, status: res.statusCode, duration_ms, workspace_id: res.locals['principal']?.workspace_id },
        'request',
      );
    });
    next();
  });

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/readyz', async (_req, res) => {
    const ok = await deps.ready().catch(() => false);
    res.status(ok ? 200 : 503).json({ ok });
  });

  const auth = requireApiKey(deps.db);
  const limit = rateLimit(deps.rateLimitPerMinute);
  app.use(videoRoutes({ auth, limit, jobs: deps.jobs, signer: deps.signer, publicBaseUrl: deps.publicBaseUrl }));
  app.use(modelRoutes({ auth, simulator: deps.simulator, voiceProvider: deps.voiceProvider }));
  app.use(voiceRoutes({ auth, limit, voices: deps.voices }));
  app.use(speechRoutes({ auth, limit, speech: deps.speech }));
  app.use(fileRoutes({ storage: deps.storage, signer: deps.signer }));
  app.use(adminRoutes({ db: deps.db, admin: requireAdmin(deps.adminToken) }));
  app.use(notFoundRoute);
  app.use(errorHandler(deps.logger));
  return app;
}
