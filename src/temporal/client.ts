// The Temporal client used by the API to start, update and query workflows, and the one a worker
// process uses (the poller, the reconciler's schedule) on its workers' connection.
import { Client, Connection, type ConnectionLike } from '@temporalio/client';
import type { TemporalConnectOptions } from './connection-config.js';
import { checkNamespace, diagnoseConnectFailure } from './startup-errors.js';

/**
 * gRPC reconnects with exponential backoff, by default up to 120 s: after a Temporal outage the API
 * would stay cut off long after the server is back. Capped so work resumes within seconds.
 */
const RECONNECT_BACKOFF = { 'grpc.initial_reconnect_backoff_ms': 500, 'grpc.max_reconnect_backoff_ms': 2_000 };

/** Opens a connection (TLS, client certificate, API key as configured); a refusal becomes one clear line. */
export async function openConnection(opts: TemporalConnectOptions): Promise<Connection> {
  try {
    return await Connection.connect({ ...opts, connectTimeout: 10_000, channelArgs: RECONNECT_BACKOFF });
  } catch (err) {
    throw await diagnoseConnectFailure(err, opts);
  }
}

const VERIFY_CALL_TIMEOUT_MS = 10_000;

/**
 * Throws (one line, no secret) unless Temporal accepts these credentials on the namespace: checked on
 * a connection of its own, closed after, so that no connection in use is touched.
 */
export async function verifyCredentials(connect: TemporalConnectOptions, namespace: string): Promise<void> {
  const connection = await openConnection(connect);
  try {
    // A server that accepted the connection and never answers is a timeout, not a wait forever.
    await connection.withDeadline(Date.now() + VERIFY_CALL_TIMEOUT_MS, () =>
      checkNamespace(connection.workflowService, connect, namespace),
    );
  } finally {
    await connection.close().catch(() => {});
  }
}

export async function connectClient(opts: TemporalConnectOptions & { namespace: string }): Promise<Client> {
  const { namespace, ...connect } = opts;
  return new Client({ connection: await openConnection(connect), namespace });
}

/**
 * A Client whose connection can be replaced while it is in use (a rotated client certificate needs a
 * new TLS connection): every property read goes to the current Client, so whoever holds it (services,
 * readiness, the poller) uses the new connection from its next call on.
 */
export class SwappableClient {
  readonly client: Client;
  private current: Client;

  constructor(initial: Client) {
    this.current = initial;
    this.client = new Proxy(initial, {
      get: (_target, prop) => {
        const value: unknown = Reflect.get(this.current, prop, this.current);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(this.current) : value;
      },
    });
  }

  get connection(): ConnectionLike {
    return this.current.connection;
  }

  /** Makes `next` the client; returns the previous one's connection (for the caller to close). */
  swap(next: Client): ConnectionLike {
    const previous = this.current.connection;
    this.current = next;
    return previous;
  }
}
