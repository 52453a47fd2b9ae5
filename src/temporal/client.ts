// The Temporal client used by the API to start, update and query workflows.
import { Client, Connection } from '@temporalio/client';

/**
 * gRPC reconnects with exponential backoff, by default up to 120 s: after a Temporal outage the API
 * would stay cut off long after the server is back. Capped so work resumes within seconds.
 */
const RECONNECT_BACKOFF = { 'grpc.initial_reconnect_backoff_ms': 500, 'grpc.max_reconnect_backoff_ms': 2_000 };

export async function connectClient(opts: { address: string; namespace: string }): Promise<Client> {
  const connection = await Connection.connect({ address: opts.address, connectTimeout: 10_000, channelArgs: RECONNECT_BACKOFF });
  return new Client({ connection, namespace: opts.namespace });
}
