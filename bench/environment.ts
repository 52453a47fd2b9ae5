// The environment header of a benchmark run: machine, Node, the servers' versions, and the settings.
import os from 'node:os';
import pg from 'pg';
import type { Infra } from '../test/helpers/infra.js';
import { connectClient } from '../src/temporal/client.js';

export interface Environment {
  cpus: number;
  cpu_model: string;
  memory_gib: number;
  node: string;
  temporal_server: string;
  postgres: string;
}

export async function describeEnvironment(infra: Infra): Promise<Environment> {
  const client = await connectClient({ address: infra.temporalAddress, namespace: 'default' });
  const db = new pg.Client({ connectionString: infra.databaseUrl });
  try {
    const info = await client.workflowService.getSystemInfo({});
    await db.connect();
    const version = await db.query<{ server_version: string }>('SHOW server_version');
    return {
      cpus: os.availableParallelism(),
      cpu_model: os.cpus()[0]?.model ?? 'unknown',
      memory_gib: os.totalmem() / 2 ** 30,
      node: process.version,
      temporal_server: info.serverVersion || 'unknown',
      postgres: version.rows[0]!.server_version,
    };
  } finally {
    await db.end().catch(() => {});
    await client.connection.close();
  }
}
