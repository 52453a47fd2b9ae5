// Bearer authentication for API keys (public API) and the admin token (operators).
import { timingSafeEqual, createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import type { Db } from '../db/pool.js';
import { authenticateApiKey, type ApiKeyPrincipal } from '../account/workspaces.js';
import { ApiError } from '../errors.js';

function bearer(req: Request): string | null {
  const h = req.get('authorization');
  if (!h) return null;
  const m = /^Bearer +(\S+) *$/i.exec(h);
  return m ? m[1]! : null;
}

const unauthorized = (message: string) =>
  new ApiError(401, 'authentication_error', 'invalid_api_key', message, null, { 'WWW-Authenticate': 'Bearer' });

export function requireApiKey(db: Db): RequestHandler {
  return async (req, res, next) => {
    const key = bearer(req);
    if (!key) return next(unauthorized('missing API key: send Authorization: Bearer <API_KEY>'));
    const principal = await authenticateApiKey(db, key);
    if (!principal) return next(unauthorized('invalid API key'));
    res.locals['principal'] = principal;
    next();
  };
}

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
