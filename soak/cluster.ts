// The service under soak, as the scale-out mode runs it: a PostgreSQL and a Temporal dev server of the
// soak's own (killable with SIGKILL and started again on the same data and port), and API and worker
// processes (`src/api-main.ts`, `src/worker-main.ts`, as `npm run api` / `npm run worker` run them).
// Every piece can be killed and restarted by the chaos loop; a process that exits without being
// killed is a crash, recorded, and started again.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { startKillablePostgres, startKillableTemporal, type KillableServer } from '../test/helpers/killable-infra.js';
import { freePort } from '../test/helpers/infra.js';
import { killAll, startEntryProcess } from '../test/helpers/processes.js';

export const SOAK_ADMIN_TOKEN = 'soak-admin-token-0123456789abcdef';

/** A piece of the service the chaos loop can take down. */
export interface Target {
  name: string;
  kill(): Promise<void>;
  restart(): Promise<void>;
}

export interface Cluster {
  apiBases: string[];
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
        if (attempt === 10) this.crashes.push(`${this.name} could not be restarted after its crash: ${(err as Error).message.slice(0, 200)}`);
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

/** `env`: more of the processes' environment (the provider fakes the callback abuse needs). */
export async function startCluster(opts: { root: string; apis: number; workers: number; env?: Record<string, string> }): Promise<Cluster> {
  fs.mkdirSync(opts.root, { recursive: true });
  fs.chmodSync(opts.root, 0o755); // the embedded PostgreSQL runs as another user when we are root
  // The processes' logs go beside the data (startEntryProcess writes them to TEST_TMP_DIR).
  const logs = path.join(opts.root, 'logs');
  fs.mkdirSync(logs, { recursive: true });
  process.env['TEST_TMP_DIR'] = logs;

  const pgServer = await startKillablePostgres(opts.root);
  const pg = new ServerSlot('postgres', pgServer);
  const temporalServer = await startKillableTemporal(opts.root);
  const temporal = new ServerSlot('temporal', temporalServer);
  const env: Record<string, string> = {
    DATABASE_URL: pgServer.url,
    TEMPORAL_ADDRESS: temporalServer.address,
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
  // Workers first: the first of them sets up the schema and the reconciler's schedule.
  for (const w of workerSlots) await w.restart();
  await Promise.all(apiSlots.map((a) => a.restart()));
  const entries = [...apiSlots, ...workerSlots];

  return {
    apiBases,
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
      await pg.stop().catch(() => {});
    },
  };
}
