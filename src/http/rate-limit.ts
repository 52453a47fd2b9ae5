// Per-API-key token bucket (in process memory; each API process limits on its own), or per whatever
// `keyOf` names (the provider callbacks' source address).
// Bounded: at most TRACKED_KEYS_MAX buckets, the least recently used evicted first.
import type { Request, RequestHandler, Response } from 'express';
import { ApiError } from '../errors.js';
import { principalOf } from './auth.js';

const TRACKED_KEYS_MAX = 100_000;

export function rateLimit(
  perMinute: number,
  now: () => number = Date.now,
  keyOf: (req: Request, res: Response) => string = (_req, res) => principalOf(res).key_id,
): RequestHandler {
  const buckets = new Map<string, { tokens: number; at_ms: number }>();
  const refill_per_ms = perMinute / 60_000;
  return (req, res, next) => {
    const key = keyOf(req, res);
    const t = now();
    const b = buckets.get(key) ?? { tokens: perMinute, at_ms: t };
    buckets.delete(key);
    b.tokens = Math.min(perMinute, b.tokens + (t - b.at_ms) * refill_per_ms);
    b.at_ms = t;
    if (buckets.size >= TRACKED_KEYS_MAX) buckets.delete(buckets.keys().next().value!);
    buckets.set(key, b);
    if (b.tokens < 1) {
      const retry_after_s = Math.ceil((1 - b.tokens) / refill_per_ms / 1000);
      return next(
        new ApiError(429, 'rate_limit_error', 'rate_limited', `too many requests; retry after ${retry_after_s}s`, null, {
          'Retry-After': String(retry_after_s),
        }),
      );
    }
    b.tokens -= 1;
    next();
  };
}
