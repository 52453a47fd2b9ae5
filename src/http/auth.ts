// Bearer authentication for API keys (public API) and the admin token (operators). A read of one thing
// by id may look its key up in the same query as the thing (requireApiKeyReading).
import { timingSafeEqual, createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import type { Db } from '../db/pool.js';
import { apiKeyDigest, authenticateApiKeyDigestCached, type ApiKeyPrincipal } from '../account/workspaces.js';
import { ApiError } from '../errors.js';
import { rateLimited, TokenBuckets } from './rate-limit.js';

function bearer(req: Request): string | null {
  return bearerOf(req.get('authorization'));
}

function bearerOf(h: string | undefined): string | null {
  if (!h) return null;
  const m = /^Bearer +(\S+) *$/i.exec(h);
  return m ? m[1]! : null;
}

const unauthorized = (message: string) =>
  new ApiError(401, 'authentication_error', 'invalid_api_key', message, null, { 'WWW-Authenticate': 'Bearer' });

const missingKey = () => unauthorized('missing API key: send Authorization: Bearer <API_KEY>');
const invalidKey = () => unauthorized('invalid API key');

/** Failed key lookups per client address and minute, by default: beyond, a 429 without any lookup. */
export const AUTH_FAILURES_PER_ADDRESS_PER_MINUTE = 600;

/**
 * The API key, looked up by its digest among the keys this process found active in the last few seconds,
 * else in PostgreSQL (../account/workspaces.ts). A key that names no active key costs a lookup each time:
 * those are limited per client address (`failuresPerMinute`), checked before the lookup.
 */
export function requireApiKey(db: Db, opts: { failuresPerMinute?: number } = {}): RequestHandler {
  const failures = new TokenBuckets(opts.failuresPerMinute ?? AUTH_FAILURES_PER_ADDRESS_PER_MINUTE);
  return async (req, res, next) => {
    const key = bearer(req);
    if (!key) return next(missingKey());
    const digest = apiKeyDigest(key);
    if (!digest) return next(invalidKey());
    const address = req.socket.remoteAddress ?? '';
    const wait_s = failures.take(address, 0);
    if (wait_s > 0) return next(rateLimited(wait_s, `too many failed authentications from this address; retry after ${wait_s}s`));
    const principal = await authenticateApiKeyDigestCached(db, digest);
    if (!principal) {
      failures.take(address);
      return next(invalidKey());
    }
    res.locals['principal'] = principal;
    next();
  };
}

/**
 * The principal of the bearer key of an `Authorization` header, for what is not an Express request (the
 * upgrade of a WebSocket); throws the 401 the middleware answers.
 */
export async function principalOfBearer(db: Db, authorization: string | undefined): Promise<ApiKeyPrincipal> {
  const key = bearerOf(authorization);
  if (!key) throw missingKey();
  const digest = apiKeyDigest(key);
  const principal = digest ? await authenticateApiKeyDigestCached(db, digest) : null;
  if (!principal) throw invalidKey();
  return principal;
}

/**
 * After authentication: what the path's `id` names in the key's workspace (null: nothing), read by `read`
 * and handed to the route (foundWithKey), so that the read can run where the route's guards want it (after
 * the read gate). The id is as the client sent it: `read` looks up only what can be an id (the route's
 * contract refuses the rest after this, as on any route).
 */
export function readingByPathId<T>(read: (id: string, principal: ApiKeyPrincipal) => Promise<T | null>): RequestHandler {
  return async (req, res, next) => {
    res.locals['foundWithKey'] = await read(String(req.params['id'] ?? ''), principalOf(res));
    next();
  };
}

/** What readingByPathId found with the request's key (null: nothing in the key's workspace). */
export function foundWithKey<T>(res: Response): T | null {
  const found = res.locals['foundWithKey'] as T | null | undefined;
  if (found === undefined) throw new Error('route reached without readingByPathId');
  return found;
}

/** The authenticated request's API key id: what per-key limits count by. */
export const keyIdOf = (_req: Request, res: Response): string => principalOf(res).key_id;

export function principalOf(res: Response): ApiKeyPrincipal {
  const p = res.locals['principal'] as ApiKeyPrincipal | undefined;
  if (!p) throw new Error('route reached without authentication');
  return p;
}

export function requireAdmin(adminToken: string): RequestHandler {
  const expected = createHash('sha256').update(adminToken).digest();
  return (req, _res, next) => {
    const token = bearer(req);
    const given = createHash('sha256')
      .update(token ?? '')
      .digest();
    if (!token || !timingSafeEqual(expected, given)) {
      return next(
        new ApiError(401, 'authentication_error', 'invalid_admin_token', 'missing or invalid admin token', null, {
          'WWW-Authenticate': 'Bearer',
        }),
      );
    }
    next();
  };
}
