// Job reads (a job, a list of jobs) in flight at once per API process. A status read is one short
// PostgreSQL read, but many clients polling at once would otherwise hold every connection of the
// process's pool and most of its event loop, and the creates, cancels and, with `npm start`, the
// worker's charges and settlements sharing them would wait behind the reads. Beyond the gate's permits
// a read waits its turn (in arrival order, holding nothing); beyond the waiting bound it is a 503.
import type { RequestHandler } from 'express';
import { ApiError } from '../errors.js';
import { Semaphore } from '../semaphore.js';
import { RETRY_AFTER_S } from '../dependency-errors.js';

/** Job reads running at once per API process: under half of the default pool (DATABASE_POOL_MAX 10). */
export const JOB_READS_IN_FLIGHT_MAX = 4;
/** Job reads waiting for a turn, at most; beyond, 503 server_busy. */
export const JOB_READS_WAITING_MAX = 10_000;

/** What a route gated by it documents for its 503. */
export const READS_BUSY = 'Too many reads are waiting in this API process (server_busy); retry after `Retry-After` seconds.';

/** Runs the rest of the request (authentication included) holding one of the gate's permits until the answer is sent. */
export function jobReadGate(permits = JOB_READS_IN_FLIGHT_MAX, waiting_max = JOB_READS_WAITING_MAX): RequestHandler {
  const gate = new Semaphore(permits, waiting_max);
  return (req, res, next) => {
    let admitted = false;
    gate
      .with(
        () =>
          new Promise<void>((release) => {
            admitted = true;
            res.once('close', release);
            // A client that went away while waiting has nothing to read.
            if (req.destroyed || res.destroyed || res.writableEnded) return release();
            next();
          }),
      )
      .catch(() => {
        if (!admitted) next(new ApiError(503, 'api_error', 'server_busy', 'too many reads are waiting; retry shortly', null, { 'Retry-After': String(RETRY_AFTER_S) }));
      });
  };
}
