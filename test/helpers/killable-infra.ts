// A PostgreSQL and a Temporal server of a test's own, as real processes it may kill with SIGKILL and
// start again on the same data and port: for the fault suite, whose faults must not reach the other
// test files (they share the run's servers).
import fs from 'node:fs';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { resolveTemporalCli, startDevServer, type DevServer } from '../../src/temporal/dev-server.js';
import { freePort } from './infra.js';
import { isProcessAlive } from '../../src/pids.js';

export interface KillableServer {
  /** SIGKILL, then wait until the process is gone. */
  kill(): Promise<void>;
  /** Start again on the same data and port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

async function killPid(pid: number): Promise<void> {
  process.kill(pid, 'SIGKILL');
  const deadline = Date.now() + 10_000;
  while (isProcessAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} survived SIGKILL`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startKillablePostgres(root: string): Promise<KillableServer & { url: string }> {
  const opts = { pgdata: path.join(root, 'pg'), port: await freePort(), logFile: path.join(root, 'postgres.log') };
  let server: EmbeddedPostgres = await startEmbeddedPostgres(opts);
  const postmasterPid = () => Number(fs.readFileSync(path.join(opts.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return {
    url: server.url,
    async kill() {
      await killPid(postmasterPid());
      // Backends notice their postmaster died and exit; wait for the port to be free of them.
      await new Promise((r) => setTimeout(r, 500));
    },
    async restart() {
      server = await startEmbeddedPostgres(opts);
    },
    stop: () => server.stop(),
  };
}

export async function startKillableTemporal(root: string): Promise<KillableServer & { address: string }> {
  const pidFile = path.join(root, 'temporal.pid');
  const opts = {
    cliPath: resolveTemporalCli(process.env['TEMPORAL_CLI_PATH']),
    namespace: 'default',
    port: await freePort(),
    uiPort: await freePort(),
    dbFile: path.join(root, 'temporal', 'temporal.db'),
    logFile: path.join(root, 'temporal.log'),
    pidFile,
  };
  let server: DevServer = await startDevServer(opts);
  return {
    address: server.address,
    async kill() {
      await killPid(Number(fs.readFileSync(pidFile, 'utf8')));
    },
    async restart() {
      server = await startDevServer(opts);
    },
    stop: () => server.stop(),
  };
}
