// Starts a real PostgreSQL (embedded) and a real Temporal dev server on free loopback ports, in a
// temporary directory: for the test run and the benchmark.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { resolveTemporalCli, startDevServer } from '../../src/temporal/dev-server.js';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface Infra {
  root: string;
  databaseUrl: string;
  temporalAddress: string;
  /** Environment for processes using this infrastructure (read by test/helpers/stack.ts). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startInfra(prefix: string): Promise<Infra> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(root, 0o755); // the embedded PostgreSQL runs as another user when we are root
  const pg = await startEmbeddedPostgres({ pgdata: path.join(root, 'pg'), port: await freePort(), logFile: path.join(root, 'postgres.log') });
  try {
    const temporal = await startDevServer({
      cliPath: resolveTemporalCli(process.env['TEMPORAL_CLI_PATH']),
      namespace: 'default',
      port: await freePort(),
      uiPort: await freePort(),
      logFile: path.join(root, 'temporal.log'),
    });
    return {
      root,
      databaseUrl: pg.url,
      temporalAddress: temporal.address,
      env: { TEST_DATABASE_URL: pg.url, TEST_TEMPORAL_ADDRESS: temporal.address, TEST_TMP_DIR: root },
      async stop() {
        await temporal.stop();
        await pg.stop();
        if (!process.env['KEEP_TEST_DATA']) fs.rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await pg.stop();
    throw err;
  }
}
