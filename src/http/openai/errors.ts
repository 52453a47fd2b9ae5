// Errors under /v1 in OpenAI's shape: {"error": {"message", "type", "param", "code"}}, with the status
// codes the openai SDKs map to their error classes (400 BadRequestError, 401 AuthenticationError, 403
// PermissionDeniedError, 404 NotFoundError, 409 ConflictError, 422, 429 RateLimitError, 5xx
// InternalServerError; any other status, such as 402, is their generic APIError with `status` set).
// The same ApiError the /v2 routes throw is mapped here, so a job or a voice fails the same way on both.
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { errorHandler } from '../errors.js';
import { ApiError, notFound } from '../../errors.js';

/** OpenAI's error types where ours differ (the SDKs read status, code and param; type is informative). */
const OPENAI_TYPES: Partial<Record<ApiError['type'], string>> = {
  insufficient_credits_error: 'insufficient_quota',
  provider_error: 'server_error',
  api_error: 'server_error',
};

export function openAiErrorBody(err: ApiError) {
  return { error: { message: err.message, type: OPENAI_TYPES[err.type] ?? err.type, param: err.param, code: err.code } };
}

/**
 * The /v1 error handler: answers like the service's own (same status, headers and logging, mapped by
 * `errorHandler`), then rewrites the body into OpenAI's shape.
 */
export function openAiErrorHandler(logger: Logger): ErrorRequestHandler {
  const inner = errorHandler(logger);
  return (err, req, res, next) => {
    const json = res.json.bind(res);
    res.json = (body: { error?: { type: ApiError['type']; code: string; message: string; param: string | null } }) => {
      const e = body?.error;
      if (!e) return json(body);
      return json(openAiErrorBody(new ApiError(res.statusCode, e.type, e.code, e.message, e.param)));
    };
    inner(err, req, res, next);
  };
}

/** What every /v1 operation's contract (../openapi.ts) says alike: its tag, an API key, and errors in OpenAI's shape. */
export const OPENAI_OPERATION = { tag: 'OpenAI-compatible', security: 'apiKey', errorShape: 'openai' } as const;

/** The 402 of an operation that charges, as the SDKs see it. */
export const INSUFFICIENT_CREDITS_402 =
  'Insufficient credits (insufficient_credits; the SDKs raise their generic APIError with status 402). Nothing was charged.';

export const openAiNotFoundRoute: RequestHandler = (req) => {
  throw notFound('route_not_found', `no route for ${req.method} ${req.originalUrl.split('?')[0]} in the OpenAI-compatible API`);
};

/** An OpenAI endpoint this service does not offer: a 400 saying so (the SDKs raise BadRequestError). */
export const notOffered =
  (what: string): RequestHandler =>
  () => {
    throw new ApiError(400, 'invalid_request_error', 'unsupported_feature', `${what} is not offered by this service`);
  };
