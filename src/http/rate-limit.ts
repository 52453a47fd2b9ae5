// Per-API-key token bucket (in process memory; each API process limits on its own), or per whatever
// `keyOf` names (the provider callbacks' source address).
// Bounded: at most TRACKED_KEYS_MAX buckets, the least recently used evicted first.
import type { Request, RequestHandler, Response } from 'express';
import { ApiError } from '../errors.js';

const TRACKED_KEYS_MAX = 100_000;

/** Token buckets of `perMinute` tokens each, refilled continuously, by key. */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at_ms: number }>();
  private readonly refill_per_ms: number;
  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.refill_per_ms = perMinute / 60_000;
  }

  /** Takes `n` tokens (0: only looks) of `key`'s bucket: 0 when it had them, else seconds until it will. */
  take(key: string, n = 1): number {
    const t = this.now();
    const b = this.buckets.get(key) ?? { tokens: this.perMinute, at_ms: t };
    this.buckets.delete(key);
    b.tokens = Math.min(this.perMinute, b.tokens + (t - b.at_ms) * this.refill_per_ms);
    b.at_ms = t;
    if (this.buckets.size >= TRACKED_KEYS_MAX) this.buckets.delete(this.buckets.keys().next().value!);
    this.buckets.set(key, b);
    if (b.tokens < Math.max(n, 1)) return Math.ceil((Math.max(n, 1) - b.tokens) / this.refill_per_ms / 1000);
    b.tokens -= n;
    return 0;
  }
}

export const rateLimited = (retry_after_s: number, message = `too many requests; retry after ${retry_after_s}s`) =>
  new ApiError(429, 'rate_limit_error', 'rate_limited', message, null, { 'Retry-After': String(retry_after_s) });

/** Limits requests per minute per `keyOf` (an API key: auth.ts's keyIdOf; a source address, ...). */
export function rateLimit(perMinute: number, keyOf: (req: Request, res: Response) => string, now: () => number = Date.now): RequestHandler {
  const buckets = new TokenBuckets(perMinute, now);
  return (req, res, next) => {
    const retry_after_s = buckets.take(keyOf(req, res));
    next(retry_after_s > 0 ? rateLimited(retry_after_s) : undefined);
  };
}
