// The Postgres pool and a transaction helper. Every money movement goes through `inTransaction`.
import pg from 'pg';

// bigint columns (micro-euros) come back as JS numbers: every amount we store stays far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${v} exceeds the safe integer range`);
  return n;
});

export type Db = pg.Pool;

/**
 * A statement every job runs: named, so each pooled connection has the server parse and plan it once
 * (node-postgres prepares a named statement on first use per connection). Query it as
 * `db.query({ ...STATEMENT, values })`; one name, one text.
 */
export interface PreparedStatement {
  name: string;
  text: string;
}
export const prepared = (name: string, text: string): PreparedStatement => ({ name, text });
export type Tx = pg.PoolClient;

/**
 * Settings every session of the pool starts with (custom settings, read by database functions with
 * current_setting): e.g. `video_api.max_pending_jobs`, the pending-job limit the charge applies.
 */
export type SessionSettings = Record<`video_api.${string}`, string | number>;

/** How long the server lets a statement run (statement_timeout) unless a transaction sets its own. */
export const STATEMENT_TIMEOUT_MS = 30_000;
/**
 * How long the client waits for a statement's answer (node-postgres' query_timeout) before it gives up
 * on it and drops the connection: above every statement_timeout a session sets (the charge's refusal
 * path sets 35 s), so it ends only statements whose server went silent (a black-holed network, a
 * frozen host), which statement_timeout cannot end.
 */
export const QUERY_TIMEOUT_MS = 45_000;
/** Idle time before TCP keepalive probes start on a connection: a peer gone without a word is noticed. */
export const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

export interface PoolTimeouts {
  statement_timeout_ms?: number;
  query_timeout_ms?: number;
}

export function createPool(connectionString: string, max: number, settings: SessionSettings = {}, timeouts: PoolTimeouts = {}): Db {
  const options = Object.entries(settings)
    .map(([k, v]) => `-c ${k}=${String(v)}`)
    .join(' ');
  const pool = new pg.Pool({
    connectionString,
    max,
    ...(options ? { options } : {}),
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: timeouts.statement_timeout_ms ?? STATEMENT_TIMEOUT_MS,
    query_timeout: timeouts.query_timeout_ms ?? QUERY_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  return pool;
}

/** node-postgres' error for a statement unanswered within query_timeout. */
export const isQueryTimeout = (err: unknown): boolean => err instanceof Error && err.message === 'Query read timeout';

/**
 * Runs `fn` with a client of its own, returned to the pool afterwards. While it is checked out, a
 * client whose connection the server ends (a restart, an idle-in-transaction timeout) emits 'error'
 * outside of any query: that is caught here (an uncaught one would end the process), and the broken
 * client is destroyed instead of going back to the pool.
 */
export async function withClient<T>(db: Db, fn: (client: Tx) => Promise<T>): Promise<T> {
  const client = await db.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  try {
    return await fn(client);
  } catch (err) {
    // A statement the server never answered leaves the connection waiting for it: never reused.
    if (isQueryTimeout(err)) broken ??= err as Error;
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

export async function inTransaction<T>(db: Db, fn: (tx: Tx) => Promise<T>, opts: { settings?: string } = {}): Promise<T> {
  return withClient(db, async (tx) => {
    try {
      // Settings (SET LOCAL ...; constants, never input) go in BEGIN's round trip.
      await tx.query(opts.settings ? `BEGIN; ${opts.settings}` : 'BEGIN');
      const result = await fn(tx);
      await tx.query('COMMIT');
      return result;
    } catch (err) {
      // After a statement the server never answered, the connection is dropped (withClient): the server rolls back.
      if (!isQueryTimeout(err)) await tx.query('ROLLBACK').catch(() => {});
      throw err;
    }
  });
}
