// Job reads (a job, a list of jobs) in flight at once per API process, and their yielding to writes. A
// status read is one short PostgreSQL read, but many clients polling at once would otherwise hold every
// connection of the process's pool and most of its event loop, and the creates, cancels and, with
// `npm start`, the worker's charges and settlements sharing them would wait behind the reads. Beyond the
// gate's permits a read waits its turn (in arrival order, holding nothing); beyond the waiting bound it
// is a 503.
//
// Writes come first: while any authenticated request that is not a read (a create, a cancel, a delete:
// any method but GET, HEAD and OPTIONS) is in flight in the process, the gate admits fewer reads at once
// (JOB_READS_IN_FLIGHT_UNDER_WRITES_MAX), and a read it admits starts only after the I/O callbacks
// already due have run (setImmediate), which are the writes' database and Temporal answers among
// others, and no sooner than JOB_READS_SPACING_UNDER_WRITES_MS after the read before it began: with
// creates running, a process answers at most 500 job reads a second, and the CPU the rest would take
// goes to the creates. Reads keep moving (one at a time at least), so a stream of writes never starves
// them; once no write is in flight the gate opens to its full number and pace again.
import type { Request, RequestHandler } from 'express';
import { ApiError } from '../errors.js';
import { RETRY_AFTER_S } from '../dependency-errors.js';

/**
 * Connections of the process's pool that job reads leave to everything else (creates, cancels, and
 * with `npm start` the worker's charges and settlements): reads run at most the pool's size less this
 * many at once (DATABASE_POOL_MAX 10: 8), and never fewer than one.
 */
export const JOB_READS_POOL_RESERVE = 2;
/** Job reads running at once per API process with a pool of `pool_max` connections. */
export const jobReadsInFlightMax = (pool_max: number): number => Math.max(1, pool_max - JOB_READS_POOL_RESERVE);
/** Job reads running at once when no pool size is given: as with the default pool (DATABASE_POOL_MAX 10). */
export const JOB_READS_IN_FLIGHT_MAX = jobReadsInFlightMax(10);
/** Job reads running at once while a write is in flight in the process. */
export const JOB_READS_IN_FLIGHT_UNDER_WRITES_MAX = 1;
/** While a write is in flight, a job read starts at least this long after the one before it began. */
export const JOB_READS_SPACING_UNDER_WRITES_MS = 2;
/** Job reads waiting for a turn, at most; beyond, 503 server_busy. */
export const JOB_READS_WAITING_MAX = 10_000;
/** The share of the waiting places one API key may hold; beyond, its reads are a 429 (the others still queue). */
export const JOB_READS_WAITING_SHARE_PER_KEY = 0.1;

/** What a route gated by it documents for its 503. */
export const READS_BUSY = 'Too many reads are waiting in this API process (server_busy); retry after `Retry-After` seconds.';

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const isWrite = (req: Request) => !READ_METHODS.has(req.method);

export interface JobReadGateOptions {
  /** Reads running at once while no write is in flight. */
  permits?: number;
  /** Reads running at once while a write is in flight (at least 1: reads are slowed, never stopped). */
  permits_under_writes?: number;
  /** While a write is in flight, the least time between the starts of two reads. */
  spacing_under_writes_ms?: number;
  /** Reads waiting, at most. */
  waiting_max?: number;
  /** Reads waiting of one API key (res.locals.principal), at most; default a tenth of waiting_max. */
  waiting_per_key_max?: number;
}

export interface JobReadGate {
  /** Every write passes it once authenticated: it counts the writes in flight (unauthenticated requests and provider callbacks are not writes). */
  writes: RequestHandler;
  /** Runs the rest of a job read (authentication included) holding one of the gate's permits until the answer is sent. */
  reads: RequestHandler;
  /** What the gate holds now. */
  state(): { writes_in_flight: number; reads_in_flight: number; reads_waiting: number };
}

const serverBusy = () =>
  new ApiError(503, 'api_error', 'server_busy', 'too many reads are waiting; retry shortly', null, {
    'Retry-After': String(RETRY_AFTER_S),
  });
const keyShareTaken = () =>
  new ApiError(429, 'rate_limit_error', 'rate_limited', 'too many reads of this API key are waiting; retry shortly', null, {
    'Retry-After': '1',
  });

/** Waiting places held by each API key, at most `max` each. */
function waitingShares(max: number) {
  const by_key = new Map<string, number>();
  return {
    /** Takes a place for `key`; false when it holds its share already. */
    take(key: string): boolean {
      const n = by_key.get(key) ?? 0;
      if (n >= max) return false;
      by_key.set(key, n + 1);
      return true;
    },
    release(key: string): void {
      const n = (by_key.get(key) ?? 1) - 1;
      if (n > 0) by_key.set(key, n);
      else by_key.delete(key);
    },
  };
}

export function jobReadGate(opts: JobReadGateOptions = {}): JobReadGate {
  const permits = opts.permits ?? JOB_READS_IN_FLIGHT_MAX;
  const permits_under_writes = Math.min(permits, opts.permits_under_writes ?? JOB_READS_IN_FLIGHT_UNDER_WRITES_MAX);
  const waiting_max = opts.waiting_max ?? JOB_READS_WAITING_MAX;
  const waiting_per_key_max = opts.waiting_per_key_max ?? Math.max(1, Math.floor(waiting_max * JOB_READS_WAITING_SHARE_PER_KEY));
  const shares = waitingShares(waiting_per_key_max);
  const spacing_under_writes_ms = opts.spacing_under_writes_ms ?? JOB_READS_SPACING_UNDER_WRITES_MS;
  if (!Number.isInteger(permits_under_writes) || permits_under_writes < 1) throw new RangeError('the read gate needs at least one permit');
  let writes_in_flight = 0;
  let reads_in_flight = 0;
  const waiting: Array<() => void> = [];

  let last_start_ms = -Infinity;
  let spacing_timer: NodeJS.Timeout | undefined;

  const capacity = () => (writes_in_flight > 0 ? permits_under_writes : permits);
  /** How long the next read must still wait for its turn under writes (0: it may start now). */
  const spacingLeftMs = () => (writes_in_flight > 0 ? Math.max(0, last_start_ms + spacing_under_writes_ms - performance.now()) : 0);
  /** Hands free permits to waiting reads, first come first served, paced while a write is in flight. */
  const admit = () => {
    while (reads_in_flight < capacity() && waiting.length > 0) {
      const left_ms = spacingLeftMs();
      if (left_ms > 0) {
        spacing_timer ??= setTimeout(() => {
          spacing_timer = undefined;
          admit();
        }, Math.ceil(left_ms)).unref();
        return;
      }
      reads_in_flight++;
      last_start_ms = performance.now();
      const start = waiting.shift()!;
      if (writes_in_flight > 0) setImmediate(start);
      else start();
    }
  };

  const writes: RequestHandler = (req, res, next) => {
    if (!isWrite(req)) return next();
    writes_in_flight++;
    res.once('close', () => {
      writes_in_flight--;
      admit();
    });
    next();
  };

  const reads: RequestHandler = (req, res, next) => {
    const start = () => {
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        reads_in_flight--;
        admit();
      };
      res.once('close', release);
      // A client that went away while waiting has nothing to read.
      if (req.destroyed || res.destroyed || res.writableEnded) return release();
      next();
    };
    if (waiting.length === 0 && reads_in_flight < capacity() && spacingLeftMs() === 0) {
      reads_in_flight++;
      last_start_ms = performance.now();
      return start();
    }
    if (waiting.length >= waiting_max) return next(serverBusy());
    // One key holds at most its share of the waiting places: a client flooding reads waits behind its own.
    const key = (res.locals['principal'] as { key_id?: string } | undefined)?.key_id ?? '';
    if (!shares.take(key)) return next(keyShareTaken());
    waiting.push(() => {
      shares.release(key);
      start();
    });
    admit();
  };

  return { writes, reads, state: () => ({ writes_in_flight, reads_in_flight, reads_waiting: waiting.length }) };
}
