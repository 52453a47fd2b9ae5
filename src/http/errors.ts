// How /v2 answers errors: the one error shape of src/errors.ts. Routes and services throw ApiError (or let
// zod and body-parser errors through); `errorHandler` maps them all here, and anything unmapped is a 500.
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ZodError } from 'zod';
import type { Logger } from 'pino';
import { NotFoundError } from '../billing/ledger.js';
import { RETRY_AFTER_S, unreachableDependency } from '../dependency-errors.js';
import { ApiError, fromZodError, notFound } from '../errors.js';

export function errorBody(err: ApiError) {
  return { error: { type: err.type, code: err.code, message: err.message, param: err.param } };
}

/** Maps body-parser and multer errors, which carry `type`/`code`/`status`, to API errors. */
function fromFrameworkError(err: unknown): ApiError | null {
  if (typeof err !== 'object' || err === null) return null;
  const e = err as { type?: string; status?: number; code?: string; message?: string; field?: string; limit?: number };
  switch (e.type) {
    case 'entity.too.large':
      return new ApiError(413, 'invalid_request_error', 'request_too_large', `request body exceeds ${e.limit} bytes`);
    case 'entity.parse.failed':
      return new ApiError(400, 'invalid_request_error', 'invalid_json', 'request body is not valid JSON');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new ApiError(415, 'invalid_request_error', 'unsupported_encoding', e.message ?? 'unsupported content encoding');
    case 'request.aborted':
      return new ApiError(400, 'invalid_request_error', 'request_aborted', 'the request body was not received in full');
    case 'request.size.invalid':
      return new ApiError(400, 'invalid_request_error', 'request_size_invalid', 'the request body does not match its Content-Length');
  }
  if (typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
    return new ApiError(e.status, 'invalid_request_error', 'bad_request', e.message ?? 'bad request');
  }
  return null;
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let apiError: ApiError;
    if (err instanceof ApiError) apiError = err;
    else if (err instanceof ZodError) apiError = fromZodError(err);
    else if (err instanceof NotFoundError) apiError = notFound('not_found', err.message);
    else {
      apiError =
        fromFrameworkError(err) ??
        textRefused(err) ??
        dependencyDown(err) ??
        new ApiError(500, 'api_error', 'internal_error', 'an internal error occurred; it has been logged');
    }
    // An answer the service chose (an ApiError: a dependency down, a provider failing) is a warning; an
    // error nobody mapped (a 500) is a bug, logged with its stack.
    if (apiError.status >= 500 && err instanceof ApiError)
      logger.warn(
        { code: apiError.code, message: apiError.message, request_id: res.locals['requestId'], path: req.path },
        'request answered with a 5xx',
      );
    else if (apiError.code === 'service_unavailable')
      logger.warn({ err_message: (err as Error)?.message, request_id: res.locals['requestId'], path: req.path }, 'dependency unreachable');
    else if (apiError.status >= 500) logger.error({ err, request_id: res.locals['requestId'], path: req.path }, 'request failed');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.status(apiError.status).set(apiError.headers).json(errorBody(apiError));
  };
}

/**
 * PostgreSQL refusing a character of the request's text (22021 character_not_in_repertoire: a NUL or
 * bytes that are not UTF-8; 22P05 untranslatable_character): the client's input, a 400, wherever it came
 * from. The routes refuse such input first; this is what answers if a value gets past them.
 */
function textRefused(err: unknown): ApiError | null {
  const e = err as { code?: unknown; severity?: unknown } | null;
  if (typeof e !== 'object' || e === null || typeof e.severity !== 'string') return null;
  if (e.code !== '22021' && e.code !== '22P05') return null;
  return new ApiError(
    400,
    'invalid_request_error',
    'invalid_text',
    'the request holds a character that cannot be stored (NUL or not UTF-8)',
  );
}

/** PostgreSQL or Temporal unreachable: a 503 the client may retry, never a 500. */
export function dependencyDown(err: unknown): ApiError | null {
  const dependency = unreachableDependency(err);
  if (!dependency) return null;
  const what = dependency === 'postgres' ? 'the database' : 'the workflow service';
  return new ApiError(503, 'api_error', 'service_unavailable', `${what} is unreachable right now; retry later`, null, {
    'Retry-After': String(RETRY_AFTER_S),
  });
}

export const notFoundRoute: RequestHandler = (req) => {
  throw notFound('route_not_found', `no route for ${req.method} ${req.path}`);
};
