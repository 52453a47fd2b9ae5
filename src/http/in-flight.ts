// A per-process cap on requests holding large bodies in memory at once (uploads, inline images): a
// request takes a slot until its response is finished or its connection is gone, whichever is first
// (an early answer, e.g. a 413, can finish long before the client stops sending); beyond the cap it is
// refused with 503 server_busy and Retry-After.
import type { Response } from 'express';
import { ApiError } from './errors.js';

export interface InFlightLimit {
  /** Takes a slot for the request of `res`; throws the 503 when none is free. */
  acquire(res: Response): void;
}

export function inFlightLimit(max: number, what: string): InFlightLimit {
  let inFlight = 0;
  return {
    acquire(res) {
      if (inFlight >= max) {
        throw new ApiError(503, 'api_error', 'server_busy', `too many ${what} in progress; retry shortly`, null, { 'Retry-After': '1', Connection: 'close' });
      }
      inFlight++;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        inFlight--;
      };
      res.once('finish', release);
      res.once('close', release);
    },
  };
}
