// The Temporal client used by the API to start, update and query workflows.
import { Client, Connection } from '@temporalio/client';

export async function connectClient(opts: { address: string; namespace: string }): Promise<Client> {
  const connection = await Connection.connect({ address: opts.address, connectTimeout: 10_000 });
  return new Client({ connection, namespace: opts.namespace });
}
