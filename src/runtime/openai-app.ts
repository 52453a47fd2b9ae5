// The OpenAI-compatible API under /v1: the openai SDKs work against this service by setting their base
// URL to <service>/v1 and their API key to one of ours. Same keys, workspaces, jobs, voices and money as
// /v2; OpenAI's shapes and error format (../http/openai/errors.ts) on every answer under /v1, errors included. Its
// routes are mounted from their contracts (../http/openapi.ts), so the OpenAPI document lists them.
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { ApiRouter } from '../http/openapi.js';
import { openAiErrorHandler, openAiNotFoundRoute } from '../http/openai/errors.js';
import { openAiVideoRoutes } from '../video-jobs/openai-routes.js';
import { openAiModelRoutes } from '../models/openai-routes.js';

export type OpenAiDeps = Parameters<typeof openAiVideoRoutes>[0] &
  Parameters<typeof openAiModelRoutes>[0] & {
    logger: Logger;
    /** Further /v1 routers (speech, voices), mounted before the 404. */
    more?: ApiRouter[];
    /** The 405 of a known path asked with a method none of its routes has (../http/method-not-allowed.ts), before the 404. */
    methodNotAllowed?: RequestHandler;
  };

export function openAiRoutes(deps: OpenAiDeps): ApiRouter {
  const v1 = new ApiRouter();
  for (const api of [openAiVideoRoutes(deps), openAiModelRoutes(deps), ...(deps.more ?? [])]) v1.include(api);
  // Under /v1 only: a known path asked with another method is a 405, a path no route answered a 404,
  // and every error is in OpenAI's shape.
  if (deps.methodNotAllowed) v1.router.use('/v1', deps.methodNotAllowed);
  v1.router.use('/v1', openAiNotFoundRoute);
  v1.router.use('/v1', openAiErrorHandler(deps.logger));
  return v1;
}
