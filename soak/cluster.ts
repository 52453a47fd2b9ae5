// The service under soak, as the scale-out mode runs it: a PostgreSQL and a Temporal of the soak's own
// (killable with SIGKILL and started again on the same data and port), and API and worker processes
// (`src/api-main.ts`, `src/worker-main.ts`, as `npm run api` / `npm run worker` run them). Temporal is
// the CLI's dev server (SQLite), or with `temporal: 'server'` the production topology: temporal-server
// on the same PostgreSQL with its frontend requiring mTLS, the processes configured by Temporal's
// standard client variables, the videos on MinIO (test/helpers/server-infra.ts).
// Every piece can be killed and restarted by the chaos loop; a process that exits without being
// killed is a crash, recorded, and started again.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { startKillablePostgres, startKillableTemporal, type KillableServer } from '../test/helpers/killable-infra.js';
import { freePort } from '../test/helpers/infra.js';
import { killAll, startEntryProcess } from '../test/helpers/processes.js';
import { startTemporalServer, type TemporalServer } from '../test/helpers/server-infra.js';
import { createBucket, ACCESS_KEY, REGION, SECRET_KEY, s3ServerCmd, startS3Server, type S3Server } from '../test/helpers/s3-server.js';

export const SOAK_ADMIN_TOKEN = 'soak-admin-token-0123456789abcdef';

/** A piece of the service the chaos loop can take down. */
export interface Target {
  name: string;
  kill(): Promise<void>;
  restart(): Promise<void>;
}

export interface Cluster {
  apiBases: string[];
  /** The environment every API and worker process runs with. */
  env: Record<string, string>;
  /** temporal-server, when the cluster runs on it. */
  temporalServer: TemporalServer | null;
  /** Milliseconds each piece took to start. */
  timings_ms: Record<string, number>;
  targets: Target[];
  /** Processes that exited without being killed (crashes), with how they ended. */
  crashes: string[];
  /** Restarts whatever is down (after a failed restart); resolves when all are up. */
  ensureAllUp(): Promise<void>;
  /** Kills and restarts the Temporal server (a dev server that stopped answering though its process runs). */
  restartTemporal(): Promise<void>;
  stop(): Promise<void>;
}

/** One API or worker process slot: the same port (API) and environment across restarts. */
class EntrySlot implements Target {
  private child: ChildProcess | null = null;
  private killing = false;
  readonly children: ChildProcess[] = [];

  constructor(
    readonly name: string,
    private readonly entry: 'api' | 'worker',
    private readonly env: Record<string, string>,
    private readonly crashes: string[],
  ) {}

  get up(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  async restart(): Promise<void> {
    if (this.up) return;
    const child = await startEntryProcess({ env: this.env }, this.entry, { track: this.children });
    this.child = child;
    child.once('exit', (code, signal) => {
      if (this.killing || this.child !== child) return;
      this.crashes.push(`${this.name} exited by itself (${signal ?? code})`);
      this.child = null;
      // Started again at once, outside the chaos loop: the soak goes on with the service whole.
      void this.restartAfterCrash();
    });
  }

  /** A few tries, a few seconds apart (a dependency may be down just now); the end of the soak tries again. */
  private async restartAfterCrash(): Promise<void> {
    for (let attempt = 1; attempt <= 10; attempt++) {
      try {
        await this.restart();
        return;
      } catch (err) {
        if (attempt === 10)
          this.crashes.push(`${this.name} could not be restarted after its crash: ${(err as Error).message.slice(0, 200)}`);
        await new Promise((r) => setTimeout(r, 3_000));
      }
    }
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.up) return;
    this.killing = true;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGKILL');
    await gone;
    this.killing = false;
    this.child = null;
  }
}

class ServerSlot implements Target {
  up = true;
  constructor(
    readonly name: string,
    private readonly server: KillableServer,
  ) {}
  async kill() {
    await this.server.kill();
    this.up = false;
  }
  async restart() {
    await this.server.restart();
    this.up = true;
  }
  stop() {
    return this.server.stop();
  }
}

export interface ClusterOptions {
  root: string;
  apis: number;
  workers: number;
  /** `dev`: the CLI's dev server (default); `server`: temporal-server on PostgreSQL with mTLS, videos on MinIO. */
  temporal?: 'dev' | 'server';
  /** Variables for every API and worker process, over the cluster's own. */
  env?: Record<string, string>;
}

/** MinIO with the bucket `videos`, and the variables that store the videos there. */
async function startVideoBucket(root: string): Promise<{ server: S3Server; env: Record<string, string> }> {
  const cmd = s3ServerCmd();
  if (!cmd) throw new Error('MinIO is not built (bash scripts/install-s3-server.sh builds it once)');
  const server = await startS3Server(cmd, root);
  await createBucket(server.endpoint, 'videos');
  return {
    server,
    env: {
      STORAGE_BACKEND: 's3',
      S3_ENDPOINT: server.endpoint,
      S3_BUCKET: 'videos',
      S3_REGION: REGION,
      S3_FORCE_PATH_STYLE: 'true',
      AWS_ACCESS_KEY_ID: ACCESS_KEY,
      AWS_SECRET_ACCESS_KEY: SECRET_KEY,
    },
  };
}

export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  fs.mkdirSync(opts.root, { recursive: true });
  fs.chmodSync(opts.root, 0o755); // the embedded PostgreSQL runs as another user when we are root
  // The processes' logs go beside the data (startEntryProcess writes them to TEST_TMP_DIR).
  const logs = path.join(opts.root, 'logs');
  fs.mkdirSync(logs, { recursive: true });
  process.env['TEST_TMP_DIR'] = logs;

  const timings_ms: Record<string, number> = {};
  let t = Date.now();
  const pgServer = await startKillablePostgres(opts.root);
  timings_ms['postgres'] = Date.now() - t;
  const pg = new ServerSlot('postgres', pgServer);
  // A piece that fails to start stops those started before it (nothing is left running).
  const started: (() => Promise<void>)[] = [() => pgServer.stop()];
  const undo = async (err: unknown): Promise<never> => {
    for (const stop of started.reverse()) await stop().catch(() => {});
    throw err;
  };
  t = Date.now();
  const server = opts.temporal === 'server' ? await startTemporalServer({ root: opts.root, postgresUrl: pgServer.url }).catch(undo) : null;
  const temporalServer = server ?? (await startKillableTemporal(opts.root).catch(undo));
  started.push(() => temporalServer.stop());
  timings_ms['temporal'] = Date.now() - t;
  const temporal = new ServerSlot('temporal', temporalServer);
  t = Date.now();
  const bucket = server ? await startVideoBucket(opts.root).catch(undo) : null;
  if (bucket) timings_ms['minio'] = Date.now() - t;
  const env: Record<string, string> = {
    DATABASE_URL: pgServer.url,
    ...(server ? server.clientEnv : { TEMPORAL_ADDRESS: temporalServer.address }),
    ...bucket?.env,
    TEMPORAL_TASK_QUEUE: 'soak',
    ADMIN_TOKEN: SOAK_ADMIN_TOKEN,
    URL_SIGNING_SECRET: 'soak-url-signing-secret-0123456789abcdef',
    DATA_DIR: path.join(opts.root, 'data'),
    SIMULATOR: 'on',
    VOICE_PROVIDER: 'simulator',
    VIDEO_POLL_INTERVAL_MS: '500',
    VIDEO_POLL_MAX_INTERVAL_MS: '1000',
    // Short enough that the drain at the end sees every job terminal: a job lost in an outage fails
    // by its deadline and is refunded.
    VIDEO_JOB_TIMEOUT_MS: '120000',
    VIDEO_CREATE_TIMEOUT_MS: '10000',
    RECONCILE_INTERVAL_MS: '5000',
    WEBHOOK_RETRY_INITIAL_MS: '1000',
    DATABASE_POOL_MAX: '5',
    ...opts.env,
  };
  const crashes: string[] = [];
  const apiSlots: EntrySlot[] = [];
  const apiBases: string[] = [];
  for (let i = 0; i < opts.apis; i++) {
    const port = await freePort();
    apiSlots.push(new EntrySlot(`api-${i + 1}`, 'api', { ...env, PORT: String(port), HOST: '127.0.0.1' }, crashes));
    apiBases.push(`http://127.0.0.1:${port}`);
  }
  const workerSlots = Array.from({ length: opts.workers }, (_, i) => new EntrySlot(`worker-${i + 1}`, 'worker', env, crashes));
  // The first worker alone: it sets up the schema and the reconciler's schedule; then the others at once.
  t = Date.now();
  await workerSlots[0]!.restart();
  await Promise.all([...workerSlots.slice(1), ...apiSlots].map((e) => e.restart()));
  timings_ms['processes'] = Date.now() - t;
  const entries = [...apiSlots, ...workerSlots];

  return {
    apiBases,
    env,
    temporalServer: server,
    timings_ms,
    targets: [...entries, pg, temporal],
    crashes,
    async ensureAllUp() {
      if (!pg.up) await pg.restart();
      if (!temporal.up) await temporal.restart();
      for (const e of entries) if (!e.up) await e.restart();
    },
    async restartTemporal() {
      await temporal.kill();
      await temporal.restart();
    },
    async stop() {
      for (const e of entries) killAll(e.children);
      await temporal.stop().catch(() => {});
      await bucket?.server.stop().catch(() => {});
      await pg.stop().catch(() => {});
    },
  };
}
