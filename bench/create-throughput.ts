// Phases 1 and 5, on the same subject processes (same servers, same run, same client).
// Phase 1: create throughput and latency of three subjects: bare Express (the HTTP floor), the engine's
//   floor (update-with-start + a local-activity pg charge), the product's POST /v2/videos/generations
//   (without and with an Idempotency-Key). Each subject is warmed up, then the subjects take turns,
//   round after round. The product's jobs stay pending while creates are measured (a long simulated
//   generation), and are cancelled after each turn.
// Phase 5: whole jobs. The floor against the product's jobs with no generation delay, each of which
//   also completes during its turn (charge, submit, wait for the operation's end, copy, settle): the
//   product's turn ends when every job it created is settled. Floor and product alternate, round after round.
import path from 'node:path';
import type { Infra } from '../test/helpers/infra.js';
import { ADMIN_TOKEN, http } from '../test/helpers/stack.js';
import { createPool, type Db } from '../src/db/pool.js';
import { connectClient } from '../src/temporal/client.js';
import { benchConnectOptions } from './temporal-connect.js';
import { videoJobWorkflowId } from '../workflows/messages.js';
import type { BenchConfig } from './bench-config.js';
import { inPool, runLoad, type LoadResult } from './load.js';
import { BARE_CREATE_PATH } from './bare-express.js';
import { FLOOR_CREATE_PATH, FLOOR_WHOLE_JOB_PATH } from './floor-server.js';
import { cancelJobs, createJob, productCustomer, settledJobs, simulatedJob, type Customer } from './product-api.js';
import { spawnSubject, type SubjectProcess } from './subject.js';
import { cpuDelta, cpuProbe, waitUntilQuiet, type CpuDelta } from './process-cpu.js';
import { subjectEnv } from './subject-env.js';
import type { Log } from './log.js';
import { turnOrder, type CreateSubject } from './turn-order.js';

/** Long enough that no job finishes while creates are measured (phase 1). */
const PENDING_DELAY_MS = 10 * 60_000;
/** The longest wait for the machine to settle between turns. */
const QUIET_MS_MAX = 30_000;
/** How often a whole-job turn reads whether its jobs are settled. */
const SETTLED_EVERY_MS = 50;
/** The longest a whole-job turn waits for its jobs to settle once all are created. */
const SETTLE_TIMEOUT_MS = 5 * 60_000;

/** One subject's turn: its creates, and the CPU each party spent meanwhile (null where not measurable). */
export interface Turn {
  load: LoadResult;
  /**
   * Wall time of the turn: until the last create was answered or, for the product's whole jobs, until
   * the last of them was settled.
   */
  elapsed_ms: number;
  cpu: CpuDelta | null;
  /** Whole jobs only: each job's time from its charge to its settlement (database clock), sorted, and how they ended. */
  settle?: { charge_to_settled_ms: number[]; succeeded: number; failed: number };
}

/**
 * The subjects of phase 5: the floor, whose whole job is its charge; the engine running a whole job of
 * the product's shape with none of its code (charge, submit, signal, copy, settle: bench/floor-workflow.ts);
 * and the product's whole jobs.
 */
export type WholeJobSubject = 'floor' | 'engine' | 'product';

export interface CreateThroughput {
  /** Phase 1 (absent when not run). */
  rounds?: Record<CreateSubject, Turn>[];
  /** Phase 5 (absent when not run). */
  whole_rounds?: Record<WholeJobSubject, Turn>[];
  ledger_audit_ok: boolean;
}

export async function benchCreates(infra: Infra, cfg: BenchConfig, log: Log): Promise<CreateThroughput> {
  const phase1 = cfg.BENCH_PHASES.has(1);
  const phase5 = cfg.BENCH_PHASES.has(5);
  const floorEnv = await subjectEnv(infra, 'floor');
  const productEnv = await subjectEnv(infra, 'product');
  const started: SubjectProcess[] = [];
  const db = createPool(productEnv.databaseUrl, 4);
  const floorDb = createPool(floorEnv.databaseUrl, 2);
  const temporal = await connectClient({ ...benchConnectOptions(infra), namespace: 'default' });
  try {
    log(
      `${phase1 && phase5 ? 'phases 1 and 5' : `phase ${phase1 ? 1 : 5}`}: starting ${phase1 ? 'bare Express, ' : ''}the floor and the product (each builds its workflow bundle)`,
    );
    const spawn = async (...args: Parameters<typeof spawnSubject>) => {
      const s = await spawnSubject(...args);
      started.push(s);
      return s;
    };
    const profDir = process.env['BENCH_CPU_PROF_DIR'];
    const [bare, floor, product] = await Promise.all([
      phase1 ? spawn('bare', process.env) : null,
      spawn('floor', floorEnv.env, { cpuProfDir: profDir && path.join(profDir, 'floor') }),
      spawn('product', productEnv.env, { cpuProfDir: profDir && path.join(profDir, 'product') }),
    ]);
    const customer = await productCustomer(product.url);

    // Every subject gets the same request body: the product's.
    const body = (i: number) => simulatedJob(PENDING_DELAY_MS, String(i));
    const probe = cpuProbe(infra);
    /**
     * Runs `load(n)` on `subject`, then `until` (what else the turn waits for, measured with it), with
     * the CPU every party spent meanwhile, right after an unmeasured `load(BENCH_PRIMER)` (and its
     * `until`); `after` runs once that is measured.
     */
    const turn = async (
      subject: SubjectProcess,
      load: (n: number) => Promise<LoadResult>,
      n: number,
      steps: { until?: () => Promise<Turn['settle']>; after?: () => Promise<void> } = {},
    ): Promise<Turn> => {
      // What the previous turn left to the servers (closing its workflows) is done before this one starts.
      const settled = await waitUntilQuiet(QUIET_MS_MAX);
      if (!settled.quiet) log(`the machine stayed busy for ${settled.waited_ms} ms before a turn; its figures include that work`);
      if (cfg.BENCH_PRIMER > 0) {
        const primer = await load(cfg.BENCH_PRIMER);
        if (primer.errors > 0) throw new Error(`a primer create failed: ${primer.first_error}`);
        await steps.until?.();
      }
      const before = probe?.sample(subject.pid);
      const t0 = performance.now();
      const result = await load(n);
      const settle = await steps.until?.();
      const elapsed_ms = performance.now() - t0;
      const cpu = probe && before ? cpuDelta(before, probe.sample(subject.pid)) : null;
      await steps.after?.();
      return { load: result, elapsed_ms, cpu, ...(settle ? { settle } : {}) };
    };
    const post = (subject: SubjectProcess, path: string) => (n: number) =>
      turn(
        subject,
        (k) =>
          runLoad(k, cfg.BENCH_CONCURRENCY, async (i) => {
            const r = await http(subject.url, 'POST', path, { json: body(i) });
            return r.status === 202 ? null : `${r.status} ${JSON.stringify(r.body)}`;
          }),
        n,
      );
    /** The product's creates; `whole`: jobs with no generation delay, waited for until settled. */
    const create = (opts: { idempotencyKey: boolean; whole: boolean }) => (n: number) => {
      /** The jobs of the turn (its primer's too), and those of its last load. */
      const ids: string[] = [];
      let last: string[] = [];
      const load = (k: number) => {
        last = [];
        return runLoad(k, cfg.BENCH_CONCURRENCY, async (i) => {
          const created = await createJob(customer, opts.whole ? simulatedJob(0, String(i)) : body(i), {
            idempotencyKey: opts.idempotencyKey,
          });
          if (created.id) {
            ids.push(created.id);
            last.push(created.id);
          }
          return created.error;
        });
      };
      // Its workflows closed before the next turn starts: nothing spills into it.
      const closed = () =>
        inPool(ids.length, cfg.BENCH_CONCURRENCY, (i) => temporal.workflow.getHandle(videoJobWorkflowId(ids[i]!)).result()).then(
          () => undefined,
        );
      if (opts.whole)
        return turn(product, load, n, { until: () => settledJobs(db, last, SETTLED_EVERY_MS, SETTLE_TIMEOUT_MS), after: closed });
      // Cancelled before the next turn starts.
      const cancelled = async () => {
        await cancelJobs(customer, db, ids, cfg.BENCH_CONCURRENCY);
        await closed();
      };
      return turn(product, load, n, { after: cancelled });
    };
    const floorTurn = post(floor, FLOOR_CREATE_PATH);
    /** The engine's whole jobs: its turn ends when the last of them is settled, as the product's does. */
    const engineTurn = (n: number) => {
      let last: string[] = [];
      const load = (k: number) => {
        last = [];
        return runLoad(k, cfg.BENCH_CONCURRENCY, async (i) => {
          const r = await http(floor.url, 'POST', FLOOR_WHOLE_JOB_PATH, { json: body(i) });
          if (r.status !== 202) return `${r.status} ${JSON.stringify(r.body)}`;
          last.push(r.body.id);
          return null;
        });
      };
      return turn(floor, load, n, { until: () => settledFloorJobs(floorDb, last, SETTLED_EVERY_MS, SETTLE_TIMEOUT_MS) });
    };

    let rounds: Record<CreateSubject, Turn>[] | undefined;
    if (phase1) {
      const turns: Record<CreateSubject, (n: number) => Promise<Turn>> = {
        bare: post(bare!, BARE_CREATE_PATH),
        floor: floorTurn,
        product: create({ idempotencyKey: false, whole: false }),
        product_keyed: create({ idempotencyKey: true, whole: false }),
      };
      log(`phase 1: warming up each subject with ${cfg.BENCH_WARMUP} creates`);
      for (const run of Object.values(turns)) await run(cfg.BENCH_WARMUP);
      rounds = [];
      for (let r = 1; r <= cfg.BENCH_ROUNDS; r++) {
        const round = {} as Record<CreateSubject, Turn>;
        const order = turnOrder(r);
        for (const subject of order) round[subject] = await turns[subject](cfg.BENCH_JOBS);
        rounds.push(round);
        log(`phase 1: round ${r} of ${cfg.BENCH_ROUNDS} done (${order.join(', ')})`);
      }
    }

    let whole_rounds: Record<WholeJobSubject, Turn>[] | undefined;
    if (phase5) {
      const turns: Record<WholeJobSubject, (n: number) => Promise<Turn>> = {
        floor: floorTurn,
        engine: engineTurn,
        product: create({ idempotencyKey: false, whole: true }),
      };
      if (!phase1) {
        log(`phase 5: warming up the floor and the product with ${cfg.BENCH_WARMUP} jobs each`);
        for (const run of Object.values(turns)) await run(cfg.BENCH_WARMUP);
      }
      whole_rounds = [];
      for (let r = 1; r <= cfg.BENCH_ROUNDS; r++) {
        // The order rotates by one each round: over three rounds each subject takes each place once.
        const order = (['floor', 'engine', 'product'] as WholeJobSubject[]).map((_, i, all) => all[(i + r - 1) % all.length]!);
        const round = {} as Record<WholeJobSubject, Turn>;
        for (const subject of order) round[subject] = await turns[subject](cfg.BENCH_JOBS);
        whole_rounds.push(round);
        log(`phase 5: round ${r} of ${cfg.BENCH_ROUNDS} done (${order.join(', ')})`);
      }
    }
    const ledger_audit_ok = await ledgerAuditOk(customer);
    return { ...(rounds ? { rounds } : {}), ...(whole_rounds ? { whole_rounds } : {}), ledger_audit_ok };
  } finally {
    await Promise.all(started.map((s) => s.stop()));
    await temporal.connection.close();
    await db.end();
    await floorDb.end();
  }
}

/** Waits until the engine's jobs are all settled (read every `every_ms`); their charge -> settled times, sorted. */
async function settledFloorJobs(db: Db, ids: string[], every_ms: number, timeout_ms: number): Promise<Turn['settle']> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const r = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM floor_jobs WHERE id = ANY($1::uuid[]) AND status <> 'pending'",
      [ids],
    );
    if (r.rows[0]!.n === ids.length) break;
    if (Date.now() > deadline) throw new Error(`${ids.length - r.rows[0]!.n} engine jobs not settled ${timeout_ms} ms after their creates`);
    await new Promise((resolve) => setTimeout(resolve, every_ms));
  }
  const jobs = await db.query<{ status: string; ms: number }>(
    'SELECT status, (extract(epoch FROM completed_at - created_at) * 1000)::float8 AS ms FROM floor_jobs WHERE id = ANY($1::uuid[])',
    [ids],
  );
  return {
    charge_to_settled_ms: jobs.rows.map((j) => j.ms).sort((a, b) => a - b),
    succeeded: jobs.rows.filter((j) => j.status === 'succeeded').length,
    failed: jobs.rows.filter((j) => j.status !== 'succeeded').length,
  };
}

async function ledgerAuditOk(c: Customer): Promise<boolean> {
  const r = await http(c.baseUrl, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
  return r.status === 200 && r.body.ok === true;
}
