// JSON bodies: application/json only (415 otherwise), at most JSON_BODY_BYTES_MAX (413), or a larger
// limit for a route that takes files inline (base64), whose large bodies are also limited in number.
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { ApiError } from '../errors.js';
import { inFlightLimit } from './in-flight.js';

export const JSON_BODY_BYTES_MAX = 64 * 1024;

export interface JsonBodyLimits {
  bytes_max: number;
  /** Bodies over JSON_BODY_BYTES_MAX being received or handled at once in this process; beyond, 503 server_busy. */
  concurrent_large_bodies_max?: number;
}

/** A body parser for a route with its own limits. */
export function jsonBodyParser(limits: JsonBodyLimits): RequestHandler {
  const parser = express.json({ limit: limits.bytes_max, strict: true });
  const large =
    limits.concurrent_large_bodies_max !== undefined ? inFlightLimit(limits.concurrent_large_bodies_max, 'large requests') : null;
  return (req, res, next) => {
    if (!req.is('application/json')) {
      return next(new ApiError(415, 'invalid_request_error', 'unsupported_media_type', 'send the request body as application/json'));
    }
    const declared = req.get('content-length');
    // A compressed body is large whatever it declares: it is inflated (up to `bytes_max`) before parsing.
    const encoded = (req.get('content-encoding') ?? 'identity').trim().toLowerCase() !== 'identity';
    try {
      if (large && (encoded || declared === undefined || Number(declared) > JSON_BODY_BYTES_MAX)) large.acquire(res, keyOf(res));
    } catch (err) {
      return next(err);
    }
    parse(parser, req, res, next);
  };
}

/** The API key a request authenticated with, if any (admin routes have none). */
export const keyOf = (res: Response): string | undefined => (res.locals['principal'] as { key_id?: string } | undefined)?.key_id;

export const jsonBody: RequestHandler = jsonBodyParser({ bytes_max: JSON_BODY_BYTES_MAX });

function parse(parser: RequestHandler, req: Request, res: Response, next: NextFunction): void {
  parser(req, res, (err?: unknown) => {
    if (err) return next(err);
    if (typeof req.body !== 'object' || req.body === null || Array.isArray(req.body)) {
      return next(new ApiError(400, 'invalid_request_error', 'invalid_json', 'the request body must be a JSON object'));
    }
    const bad = findNulString(req.body, '', 0);
    if (bad !== null) {
      return next(
        new ApiError(
          400,
          'invalid_request_error',
          'invalid_parameter',
          `${bad || 'the body'} must not contain NUL characters`,
          bad || null,
        ),
      );
    }
    next();
  });
}

/**
 * The path of the first string (value or key) holding a NUL character, which no text column can
 * store: such input is a 400 here rather than an error deep in a transaction. Depth-bounded (a 64 KiB
 * body cannot nest much anyway).
 */
function findNulString(value: unknown, path: string, depth: number): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (typeof value !== 'object' || value === null || depth > 64) return null;
  for (const [k, v] of Object.entries(value)) {
    const p = path ? `${path}.${k}` : k;
    if (k.includes('\u0000')) return p;
    const found = findNulString(v, p, depth + 1);
    if (found !== null) return found;
  }
  return null;
}
