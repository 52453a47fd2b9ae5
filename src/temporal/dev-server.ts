// A local Temporal dev server (the `temporal` CLI) as a child process, for `npm start` and tests.
// With a db file it persists under DATA_DIR, so pending jobs survive a restart.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { ConfigError } from '../config-error.js';
import { projectPath } from '../paths.js';
import { isProcessAlive } from '../pids.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/messages.js';
import { dynamicConfigArgs } from './dynamic-config.js';

export interface DevServer {
  address: string;
  uiUrl: string;
  stop(): Promise<void>;
}

const STARTUP_TIMEOUT_MS = 60_000;

const INSTALL_SCRIPT = projectPath('scripts', 'install-temporal-cli.sh');

/**
 * The `temporal` executable: TEMPORAL_CLI_PATH, else `temporal` on PATH, else the CLI cached by
 * scripts/install-temporal-cli.sh, which builds it (once) when Go is available.
 */
export function resolveTemporalCli(cliPath: string | undefined): string {
  if (cliPath) {
    if (!fs.existsSync(cliPath))
      throw new ConfigError(`TEMPORAL_CLI_PATH=${cliPath} does not exist; point it at a temporal CLI executable or unset it`);
    return cliPath;
  }
  const found = spawnSync('sh', ['-c', 'command -v temporal'], { encoding: 'utf8' });
  const onPath = found.stdout.trim();
  if (found.status === 0 && onPath) return onPath;
  const installed = spawnSync('bash', [INSTALL_SCRIPT], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const cached = installed.stdout?.trim().split('\n').pop();
  if (installed.status === 0 && cached && fs.existsSync(cached)) return cached;
  throw new ConfigError(
    'no temporal executable: run scripts/install-temporal-cli.sh (needs Go), or set TEMPORAL_CLI_PATH, or set TEMPORAL_ADDRESS to an existing Temporal server',
  );
}

interface DevServerOptions {
  cliPath: string;
  namespace: string;
  port: number;
  uiPort: number;
  /** Persist to this SQLite file; in memory when absent. */
  dbFile?: string;
  /** Where the server's log goes; inherited stdio is never used so logs stay ours. */
  logFile?: string;
  /** Records the server's pid, so a server orphaned by a crash of ours is stopped at the next start. */
  pidFile?: string;
  /** The port of the server's Prometheus /metrics (a random one when absent). */
  metricsPort?: number;
}

export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  if (opts.pidFile) await stopOrphan(opts.pidFile);
  const server = spawnDevServer(opts);
  const address = `127.0.0.1:${opts.port}`;
  await waitUntilReady(server, address, opts);
  return {
    address,
    uiUrl: `http://127.0.0.1:${opts.uiPort}`,
    async stop() {
      if (server.exited) return;
      const done = new Promise<void>((r) => server.child.once('exit', () => r()));
      server.child.kill('SIGTERM');
      const timer = setTimeout(() => server.child.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(timer);
      if (opts.pidFile) fs.rmSync(opts.pidFile, { force: true });
    },
  };
}

/**
 * The CLI's arguments: the server on 127.0.0.1, its namespace and this service's search attributes
 * registered, its dynamic config, and with a db file (its folder created) persistence.
 */
function devServerArgs(opts: DevServerOptions): string[] {
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--ui-port',
    String(opts.uiPort),
    '--namespace',
    opts.namespace,
    '--log-level',
    'warn',
    ...dynamicConfigArgs(),
  ];
  if (opts.metricsPort !== undefined) args.push('--metrics-port', String(opts.metricsPort));
  for (const sa of SEARCH_ATTRIBUTES) args.push('--search-attribute', `${sa.name}=Keyword`);
  if (opts.dbFile) {
    fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
    args.push('--db-filename', opts.dbFile);
  }
  return args;
}

/** The dev server's process, and the line saying it has exited or could not be started at all. */
interface DevServerProcess {
  child: ChildProcess;
  exited: string | null;
  spawnFailure: string | null;
}

/** Starts the dev server, its output appended to `logFile` when given and its pid recorded in `pidFile`. */
function spawnDevServer(opts: DevServerOptions): DevServerProcess {
  const args = devServerArgs(opts);
  const logFd = opts.logFile ? fs.openSync(opts.logFile, 'a') : 'ignore';
  const child: ChildProcess = spawn(opts.cliPath, args, { stdio: ['ignore', logFd, logFd], detached: false });
  if (opts.pidFile && child.pid) fs.writeFileSync(opts.pidFile, String(child.pid));
  const server: DevServerProcess = { child, exited: null, spawnFailure: null };
  child.once('exit', (code, signal) => {
    server.exited = `temporal dev server exited (${signal ?? code})`;
  });
  child.once('error', (err: NodeJS.ErrnoException) => {
    server.spawnFailure =
      `cannot run the temporal CLI ${opts.cliPath} (${err.code ?? 'spawn failed'}); set TEMPORAL_CLI_PATH ` +
      `to a temporal executable or TEMPORAL_ADDRESS to a running server`;
  });
  return server;
}

/**
 * Waits until the server answers for its namespace. A CLI that could not run, a server that exited,
 * or one not ready within the startup timeout (then killed) refuses to start with one line.
 */
async function waitUntilReady(server: DevServerProcess, address: string, opts: DevServerOptions): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (server.spawnFailure) throw new ConfigError(server.spawnFailure);
    if (server.exited) {
      throw new ConfigError(
        `${server.exited} at start; is port ${opts.port} or ${opts.uiPort} taken?${opts.logFile ? ` See ${opts.logFile}` : ''}`,
      );
    }
    try {
      const conn = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await conn.workflowService.describeNamespace({ namespace: opts.namespace });
        return;
      } finally {
        await conn.close();
      }
    } catch {
      if (Date.now() > deadline) {
        server.child.kill('SIGKILL');
        throw new ConfigError(`temporal dev server did not become ready on ${address} within ${STARTUP_TIMEOUT_MS / 1000}s`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** Stops a dev server left running by a crashed `npm start` (its pid file names a live temporal process). */
async function stopOrphan(pidFile: string): Promise<void> {
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
  fs.rmSync(pidFile, { force: true });
  if (!Number.isInteger(pid) || pid <= 0 || !isProcessAlive(pid)) return;
  let cmdline = '';
  try {
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return;
  }
  if (!cmdline.includes('start-dev')) return; // the pid was reused by an unrelated process
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 15_000;
  while (isProcessAlive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, 'SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
