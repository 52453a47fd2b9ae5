// The OpenAI-compatible API under /v1: the openai SDKs work against this service by setting their base
// URL to <service>/v1 and their API key to one of ours. Same keys, workspaces, jobs, voices and money as
// /v2; OpenAI's shapes and error format (./errors.ts) on every answer under /v1, errors included.
import { Router } from 'express';
import type { Logger } from 'pino';
import { openAiErrorHandler, openAiNotFoundRoute } from './errors.js';
import { openAiVideoRoutes } from './videos.js';
import { openAiModelRoutes } from './models.js';

export type OpenAiDeps = Parameters<typeof openAiVideoRoutes>[0] &
  Parameters<typeof openAiModelRoutes>[0] & {
    logger: Logger;
    /** Further /v1 routers (speech, voices), mounted before the 404. */
    more?: Router[];
  };

export function openAiRoutes(deps: OpenAiDeps): Router {
  const v1 = Router();
  v1.use(openAiVideoRoutes(deps));
  v1.use(openAiModelRoutes(deps));
  for (const r of deps.more ?? []) v1.use(r);
  v1.use(openAiNotFoundRoute);
  v1.use(openAiErrorHandler(deps.logger));
  const r = Router();
  r.use('/v1', v1);
  return r;
}
