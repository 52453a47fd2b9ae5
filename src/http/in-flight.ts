// A per-process cap on requests holding large bodies in memory at once (uploads, inline images): a
// request takes a slot until its response is finished or its connection is gone, whichever is first
// (an early answer, e.g. a 413, can finish long before the client stops sending); beyond the cap it is
// refused with 503 server_busy and Retry-After. One API key holds at most `per_key_max` of the slots
// (beyond: 429), so a client trickling large bodies cannot take every slot and starve other tenants.
import type { Response } from 'express';
import { ApiError } from '../errors.js';

export interface InFlightLimit {
  /** Takes a slot for the request of `res` (on behalf of `key`, when known); throws the 503 or 429 when none is free. */
  acquire(res: Response, key?: string): void;
}

/** Slots of one limit that one API key may hold at once. */
export const LARGE_BODIES_PER_KEY_MAX = 2;

/** `holder` names what `key` is in the 429's message (an API key, or a provider callback's source address). */
export function inFlightLimit(max: number, what: string, per_key_max = LARGE_BODIES_PER_KEY_MAX, holder = 'this API key'): InFlightLimit {
  let inFlight = 0;
  const perKey = new Map<string, number>();
  return {
    acquire(res, key) {
      if (key !== undefined && (perKey.get(key) ?? 0) >= per_key_max) {
        throw new ApiError(
          429,
          'rate_limit_error',
          'too_many_concurrent_uploads',
          `${holder} already has ${per_key_max} ${what} in progress, the most it may have at once; retry when one has finished`,
          null,
          { 'Retry-After': '1', Connection: 'close' },
        );
      }
      if (inFlight >= max) {
        throw new ApiError(503, 'api_error', 'server_busy', `too many ${what} in progress; retry shortly`, null, {
          'Retry-After': '1',
          Connection: 'close',
        });
      }
      inFlight++;
      if (key !== undefined) perKey.set(key, (perKey.get(key) ?? 0) + 1);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        inFlight--;
        if (key === undefined) return;
        const left = (perKey.get(key) ?? 1) - 1;
        if (left <= 0) perKey.delete(key);
        else perKey.set(key, left);
      };
      res.once('finish', release);
      res.once('close', release);
    },
  };
}
