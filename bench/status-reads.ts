// Phase 6: status reads. A product process (API + worker) and the status read's floor (Express with the
// same API key lookup and the same read of the job's row, bench/row-read-server.ts) on the same database.
// With BENCH_READ_PENDING jobs pending, GETs of random pending jobs at each concurrency of
// BENCH_READ_CONCURRENCY, the floor and the product taking turns of BENCH_READ_S seconds; then creates
// with and without GETs running at the largest concurrency meanwhile (mixed load: the jobs created have
// no generation delay, so completions run too); then the jobs pending grow to BENCH_READ_PENDING_LARGE
// and the reads are measured again, with the list of pending jobs, and the process's RSS.
import os from 'node:os';
import path from 'node:path';
import type { Infra } from '../test/helpers/infra.js';
import { http } from '../test/helpers/stack.js';
import { createPool, type Db } from '../src/db/pool.js';
import type { BenchConfig } from './bench-config.js';
import { runFor, runLoad, type LoadResult } from './load.js';
import {
  cancelJobs,
  createJob,
  PENDING_DELAY_MS,
  PENDING_JOB_ENV,
  polledJobs,
  productCustomer,
  simulatedJob,
  type Customer,
} from './product-api.js';
import { PRODUCT_CREATE_PATH } from './product-server.js';
import { ROW_READ_PATH } from './row-read-server.js';
import { spawnSubject, type SubjectMemory, type SubjectProcess } from './subject.js';
import { subjectEnv } from './subject-env.js';
import { cpuDelta, cpuProbe, waitUntilQuiet, type CpuDelta, type CpuSample } from './process-cpu.js';
import { memoryReadings, steady } from './pending-rss.js';
import type { Log } from './log.js';

const WARMUP_JOBS = 20;
/** The longest wait for a quiet machine before a turn (a shared machine may never be). */
const QUIET_MS_MAX = 15_000;
const SUBMIT_TIMEOUT_MS = 30 * 60_000;
/** Creates in flight during the mixed-load turns (the create phases' default concurrency). */
const MIXED_CREATE_CONCURRENCY = 20;
/** The list read at the large size: a page of pending jobs, as a client following many jobs asks for it. */
const LIST_PAGE = 100;

export type ReadSubject = 'floor' | 'product';

export interface ReadTurn {
  load: LoadResult;
  cpu: CpuDelta | null;
}

/** Reads at one concurrency: the floor's and the product's turns, round after round. */
export interface ReadSeries {
  concurrency: number;
  rounds: Record<ReadSubject, ReadTurn>[];
}

export interface MixedRound {
  /** Creates with no reads running. */
  alone: LoadResult;
  /** The same creates while GETs of pending jobs run, and those GETs. */
  with_reads: LoadResult;
  reads: LoadResult;
  /** CPU each party spent while the creates ran, alone and with the reads (null where not measurable). */
  alone_cpu: CpuDelta | null;
  with_reads_cpu: CpuDelta | null;
}

export interface StatusReads {
  small: { pending: number; series: ReadSeries[] };
  mixed: { read_concurrency: number; create_concurrency: number; rounds: MixedRound[] } | null;
  large: { pending: number; series: ReadSeries[]; list: ReadTurn } | null;
  /** RSS of the product process: before any job is pending, then with the large number pending (after its reads). */
  memory_before: SubjectMemory[];
  memory_after: SubjectMemory[] | null;
  steady_before_bytes: number;
  steady_after_bytes: number | null;
  turn_s: number;
  cpus: number;
}

export async function benchStatusReads(infra: Infra, cfg: BenchConfig, log: Log): Promise<StatusReads> {
  const { env, databaseUrl } = await subjectEnv(infra, 'product', PENDING_JOB_ENV);
  const db = createPool(databaseUrl, 2);
  const started: SubjectProcess[] = [];
  const probe = cpuProbe(infra);
  try {
    log('phase 6: starting the product and the status read floor (the same database)');
    const profDir = process.env['BENCH_CPU_PROF_DIR'];
    const [product, floor] = await Promise.all([
      spawnSubject('product', env, { cpuProfDir: profDir && path.join(profDir, 'reads') }),
      spawnSubject('rowread', env, { cpuProfDir: profDir && path.join(profDir, 'rowread') }),
    ]);
    started.push(product, floor);
    const customer = await productCustomer(product.url);
    const pending: string[] = [];

    // Warm: code loaded, pools filled, the workflow path and both read paths run.
    const warm = await createPending(customer, WARMUP_JOBS, cfg.BENCH_CONCURRENCY, 'warm');
    await readTurn(floor, customer, warm, 4, 2_000, null);
    await readTurn(product, customer, warm, 4, 2_000, null);
    await cancelJobs(customer, db, warm, cfg.BENCH_CONCURRENCY);
    log('phase 6: memory before');
    const memory_before = await memoryReadings(product);

    log(`phase 6: creating ${cfg.BENCH_READ_PENDING} pending jobs`);
    pending.push(...(await createPending(customer, cfg.BENCH_READ_PENDING, cfg.BENCH_CONCURRENCY, 'pending')));
    await waitSubmitted(db, pending.length);
    const turn_ms = cfg.BENCH_READ_S * 1000;
    const series = async (label: string): Promise<ReadSeries[]> => {
      const out: ReadSeries[] = [];
      for (const concurrency of cfg.BENCH_READ_CONCURRENCY) {
        const rounds: Record<ReadSubject, ReadTurn>[] = [];
        for (let r = 1; r <= cfg.BENCH_READ_ROUNDS; r++) {
          // Odd rounds start with the floor, even ones with the product.
          const order: ReadSubject[] = r % 2 === 1 ? ['floor', 'product'] : ['product', 'floor'];
          const round = {} as Record<ReadSubject, ReadTurn>;
          for (const s of order) round[s] = await readTurn(s === 'floor' ? floor : product, customer, pending, concurrency, turn_ms, probe);
          rounds.push(round);
          log(`phase 6: ${label}, C=${concurrency}, round ${r} of ${cfg.BENCH_READ_ROUNDS} done`);
        }
        out.push({ concurrency, rounds });
      }
      return out;
    };
    const small = { pending: pending.length, series: await series(`${pending.length} pending`) };

    const read_concurrency = Math.max(...cfg.BENCH_READ_CONCURRENCY);
    const mixedRounds: MixedRound[] = [];
    for (let r = 1; r <= cfg.BENCH_READ_ROUNDS; r++) {
      // Alternate which comes first, so drift on a shared machine hits both.
      const alone = async () => {
        await waitUntilQuiet(QUIET_MS_MAX);
        return wholeCreates(customer, db, cfg.BENCH_JOBS, `mixed alone ${r}`, () => probe?.sample(product.pid));
      };
      const withReads = async () => {
        await waitUntilQuiet(QUIET_MS_MAX);
        let stopReads!: () => void;
        const stop = new Promise<void>((resolve) => (stopReads = resolve));
        const reads = runFor(24 * 3_600_000, read_concurrency, (i) => getJob(product, customer, pending, i), stop);
        const creates = await wholeCreates(customer, db, cfg.BENCH_JOBS, `mixed reads ${r}`, () => probe?.sample(product.pid));
        stopReads();
        return { creates, reads: await reads };
      };
      let a: CreatesTurn;
      let b: { creates: CreatesTurn; reads: LoadResult };
      if (r % 2 === 1) {
        a = await alone();
        b = await withReads();
      } else {
        b = await withReads();
        a = await alone();
      }
      mixedRounds.push({ alone: a.load, with_reads: b.creates.load, reads: b.reads, alone_cpu: a.cpu, with_reads_cpu: b.creates.cpu });
      log(`phase 6: mixed load, round ${r} of ${cfg.BENCH_READ_ROUNDS} done`);
    }
    const mixed = { read_concurrency, create_concurrency: MIXED_CREATE_CONCURRENCY, rounds: mixedRounds };

    let large: StatusReads['large'] = null;
    let memory_after: SubjectMemory[] | null = null;
    if (cfg.BENCH_READ_PENDING_LARGE > pending.length) {
      const more = cfg.BENCH_READ_PENDING_LARGE - pending.length;
      log(`phase 6: creating ${more} more pending jobs (${cfg.BENCH_READ_PENDING_LARGE} in all)`);
      pending.push(...(await createPending(customer, more, cfg.BENCH_CONCURRENCY, 'pending large')));
      await waitSubmitted(db, pending.length);
      const largeSeries = await series(`${pending.length} pending`);
      await waitUntilQuiet(QUIET_MS_MAX);
      const before = probe?.sample(product.pid);
      const list = await runFor(turn_ms, read_concurrency, async () => {
        const r = await http(product.url, 'GET', `${PRODUCT_CREATE_PATH}?status=pending&limit=${LIST_PAGE}`, { token: customer.key });
        return r.status === 200 && r.body.data.length === Math.min(LIST_PAGE, pending.length)
          ? null
          : `${r.status} ${JSON.stringify(r.body).slice(0, 200)}`;
      });
      large = {
        pending: pending.length,
        series: largeSeries,
        list: { load: list, cpu: probe && before ? cpuDelta(before, probe.sample(product.pid)) : null },
      };
      log('phase 6: memory after');
      memory_after = await memoryReadings(product);
    }
    return {
      small,
      mixed,
      large,
      memory_before,
      memory_after,
      steady_before_bytes: steady(memory_before),
      steady_after_bytes: memory_after ? steady(memory_after) : null,
      turn_s: cfg.BENCH_READ_S,
      cpus: os.cpus().length,
    };
  } finally {
    log("phase 6: stopping the product and the floor (the jobs stay pending on this run's Temporal, which stops with the run)");
    await Promise.all(started.map((s) => s.stop()));
    await db.end();
  }
}

export async function createPending(customer: Customer, n: number, concurrency: number, label: string): Promise<string[]> {
  const ids: string[] = [];
  const r = await runLoad(n, concurrency, async (i) => {
    const created = await createJob(customer, simulatedJob(PENDING_DELAY_MS, `${label} ${i}`));
    if (created.id) ids.push(created.id);
    return created.error;
  });
  if (r.errors > 0) throw new Error(`${r.errors} creates of pending jobs failed: ${r.first_error}`);
  return ids;
}

/** Pending means submitted, its operation waiting for the poller (a row of video_job_polls). */
export async function waitSubmitted(db: Db, n: number): Promise<void> {
  const deadline = Date.now() + SUBMIT_TIMEOUT_MS;
  while ((await polledJobs(db)) < n) {
    if (Date.now() > deadline) throw new Error('pending jobs not all submitted in time');
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/** A pending job, picked at random: a poll of a job the worker may not have in its cache. */
const pick = (ids: string[]) => ids[Math.floor(Math.random() * ids.length)]!;

function getJob(subject: SubjectProcess, customer: Customer, ids: string[], _i: number): Promise<string | null> {
  const path = subject.kind === 'rowread' ? ROW_READ_PATH : PRODUCT_CREATE_PATH;
  return http(subject.url, 'GET', `${path}/${pick(ids)}`, { token: customer.key }).then((r) =>
    r.status === 200 && r.body.status === 'pending' ? null : `${r.status} ${JSON.stringify(r.body).slice(0, 200)}`,
  );
}

/** GETs of random pending jobs for `duration_ms`, with the CPU each party spent meanwhile. */
export async function readTurn(
  subject: SubjectProcess,
  customer: Customer,
  ids: string[],
  concurrency: number,
  duration_ms: number,
  probe: ReturnType<typeof cpuProbe>,
): Promise<ReadTurn> {
  if (probe) await waitUntilQuiet(QUIET_MS_MAX);
  const before = probe?.sample(subject.pid);
  const load = await runFor(duration_ms, concurrency, (i) => getJob(subject, customer, ids, i));
  return { load, cpu: probe && before ? cpuDelta(before, probe.sample(subject.pid)) : null };
}

interface CreatesTurn {
  load: LoadResult;
  /** The CPU spent while the creates ran (sampled as the first is sent and as the last is answered). */
  cpu: CpuDelta | null;
}

/**
 * `n` creates of jobs with no generation delay (each completes within seconds), then waits until they
 * are settled; `sample` reads the parties' CPU.
 */
async function wholeCreates(
  customer: Customer,
  db: Db,
  n: number,
  label: string,
  sample: () => CpuSample | undefined,
): Promise<CreatesTurn> {
  const ids: string[] = [];
  const before = sample();
  const creates = await runLoad(n, MIXED_CREATE_CONCURRENCY, async (i) => {
    const created = await createJob(customer, simulatedJob(0, `${label} ${i}`));
    if (created.id) ids.push(created.id);
    return created.error;
  });
  const after = sample();
  // Outside the measurement: the next turn starts with none of these jobs left.
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM video_jobs WHERE id = ANY($1::uuid[]) AND status = 'pending'", [
      ids,
    ]);
    if (r.rows[0]!.n === 0 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { load: creates, cpu: before && after ? cpuDelta(before, after) : null };
}
