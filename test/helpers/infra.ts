// Starts a real PostgreSQL (embedded) and a real Temporal dev server on free loopback ports, in a
// temporary directory: for the test run and the benchmark.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { resolveTemporalCli, startDevServer } from '../../src/temporal/dev-server.js';

/** Ports tried by freePort: below Linux's ephemeral range (32768-60999), so no outgoing connection's
 * source port can take one between the check and the server's bind (a test once lost its UI port so). */
const FREE_PORT_MIN = 20_000;
const FREE_PORT_MAX = 32_767;
const FREE_PORT_TRIES = 50;

function bindable(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => {
      const bound = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(bound));
    });
  });
}

/** A loopback port free now, picked at random out of the ephemeral range (else any the kernel gives). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < FREE_PORT_TRIES; i++) {
    const port = await bindable(FREE_PORT_MIN + Math.floor(Math.random() * (FREE_PORT_MAX - FREE_PORT_MIN + 1)));
    if (port !== null) return port;
  }
  const any = await bindable(0);
  if (any === null) throw new Error('no free loopback port');
  return any;
}

export interface Infra {
  root: string;
  databaseUrl: string;
  temporalAddress: string;
  /** The Temporal server's Prometheus metrics. */
  temporalMetricsUrl: string;
  /** Environment for processes using this infrastructure (read by test/helpers/stack.ts). */
  env: Record<string, string>;
  /**
   * Temporal's client variables for a process on this Temporal (TEMPORAL_ADDRESS, TEMPORAL_TLS_*) when
   * more than an address is needed; absent for the dev server.
   */
  temporalEnv?: Record<string, string>;
  stop(): Promise<void>;
}

export async function startInfra(prefix: string): Promise<Infra> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(root, 0o755); // the embedded PostgreSQL runs as another user when we are root
  const pg = await startEmbeddedPostgres({
    pgdata: path.join(root, 'pg'),
    port: await freePort(),
    logFile: path.join(root, 'postgres.log'),
  });
  try {
    const metricsPort = await freePort();
    const temporal = await startDevServer({
      cliPath: resolveTemporalCli(process.env['TEMPORAL_CLI_PATH']),
      namespace: 'default',
      port: await freePort(),
      uiPort: await freePort(),
      metricsPort,
      logFile: path.join(root, 'temporal.log'),
    });
    const temporalMetricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    return {
      root,
      databaseUrl: pg.url,
      temporalAddress: temporal.address,
      temporalMetricsUrl,
      env: {
        TEST_DATABASE_URL: pg.url,
        TEST_TEMPORAL_ADDRESS: temporal.address,
        TEST_TEMPORAL_METRICS_URL: temporalMetricsUrl,
        TEST_TMP_DIR: root,
      },
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
