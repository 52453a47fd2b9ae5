// What a request that needs PostgreSQL or Temporal answers while either is unreachable: 503 with the
// error shape and Retry-After, never a 500. Recognises the errors pg and the Temporal
// client raise when the server is down, restarting or unreachable.
import { ServiceError } from '@temporalio/client';

/** Seconds a client is asked to wait before retrying after a 503. */
export const RETRY_AFTER_S = 5;

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
// SQLSTATE: class 08 (connection exception), admin/crash shutdown, cannot connect now, too many connections;
// and a server too busy or not writable right now: a statement cancelled by statement_timeout (57014), a
// lock not granted within lock_timeout (55P03), a read-only transaction (25006: a standby, or a primary
// during failover). None of them is the request's fault: a retry later can succeed.
const PG_UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '57014', '55P03', '25006']);
const PG_UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'Connection terminated unexpectedly',
  'terminating connection',
  // node-postgres' query_timeout (src/db/pool.ts): the server went silent.
  'Query read timeout',
];
// gRPC status codes (grpc.io/docs/guides/status-codes): CANCELLED 1, DEADLINE_EXCEEDED 4, RESOURCE_EXHAUSTED 8,
// UNAVAILABLE 14; and PERMISSION_DENIED 7, UNAUTHENTICATED 16: Temporal refusing this process's credentials
// (an API key revoked or expired, a client certificate no longer accepted), which the operator fixes, not
// the request's sender.
const GRPC_UNAVAILABLE = new Set<number>([1, 4, 7, 8, 14, 16]);

export type Dependency = 'postgres' | 'temporal';

/** Which dependency an error says is unreachable, if it says so. */
export function unreachableDependency(err: unknown): Dependency | null {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof ServiceError) {
      const code = (e.cause as { code?: number } | undefined)?.code;
      if (code === undefined || GRPC_UNAVAILABLE.has(code)) return 'temporal';
    }
    const x = e as { code?: unknown; message?: unknown; name?: unknown };
    if (typeof x.code === 'number' && GRPC_UNAVAILABLE.has(x.code) && typeof x.message === 'string' && /^\d+ [A-Z_]+:/.test(x.message))
      return 'temporal';
    if (typeof x.code === 'string' && (NETWORK_CODES.has(x.code) || PG_UNAVAILABLE_STATES.has(x.code) || x.code.startsWith('08')))
      return 'postgres';
    if (typeof x.message === 'string' && PG_UNAVAILABLE_MESSAGES.some((m) => (x.message as string).includes(m))) return 'postgres';
  }
  return null;
}

export const isDependencyDown = (err: unknown) => unreachableDependency(err) !== null;
