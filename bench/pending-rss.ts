// Phase 4: RSS of the product's API + worker (one process, as `npm start` runs them) before and after
// N jobs are pending. Memory is read after a settled garbage collection, every few seconds until it
// stops moving; the steady value is the median of the last readings. The jobs stay pending (a long simulated
// generation) and go with the process when it stops.
import path from 'node:path';
import os from 'node:os';
import type { Infra } from '../test/helpers/infra.js';
import { createPool } from '../src/db/pool.js';
import { loadConfig } from '../src/config.js';
import type { BenchConfig } from './bench-config.js';
import { median, runLoad, type LoadResult } from './load.js';
import {
  cancelJobs,
  createJob,
  PENDING_DELAY_MS,
  PENDING_JOB_ENV,
  pendingJobs,
  productCustomer,
  simulatedJob,
  unsubmittedJobs,
} from './product-api.js';
import { spawnSubject, type SubjectMemory, type SubjectProcess } from './subject.js';
import { subjectEnv } from './subject-env.js';
import { cpuDelta, cpuProbe, waitUntilQuiet, type CpuDelta } from './process-cpu.js';
import type { Log } from './log.js';

export interface PendingRss {
  pending: number;
  max_cached_workflows: number;
  /** Polls the worker's poller runs at once. */
  max_concurrent_polls: number;
  creates: LoadResult;
  before: SubjectMemory[];
  after: SubjectMemory[];
  steady_before_bytes: number;
  steady_after_bytes: number;
  /**
   * CPU each party spent during the readings, idle (before) and with the jobs pending (after), and how
   * long each window was: what pending jobs cost while nothing else happens (null where not measurable).
   */
  cpu_before: CpuWindow | null;
  cpu_after: CpuWindow | null;
  cpus: number;
}

export interface CpuWindow {
  cpu: CpuDelta;
  elapsed_ms: number;
}

const WARMUP_JOBS = 20;
const READING_EVERY_MS = 5_000;
/**
 * Readings are steady when at least MIN_READINGS were taken and the last STEADY_OF_LAST lie within
 * STEADY_WITHIN of each other (RSS drops in steps for a while after work stops), or when READINGS_MAX
 * were taken; the steady value is the median of the last STEADY_OF_LAST.
 */
const MIN_READINGS = 6;
const STEADY_WITHIN = 0.03;
const STEADY_OF_LAST = 3;
const READINGS_MAX = 15;
const SUBMIT_TIMEOUT_MS = 15 * 60_000;
/**
 * The CPU windows, idle and with the jobs pending: the reconciler's default interval (RECONCILE_INTERVAL_MS),
 * so each window holds one of its runs, never none or two.
 */
const CPU_WINDOW_MS = 60_000;
/** The longest wait for a quiet machine before a CPU window (pending jobs' own polls keep it a little busy). */
const QUIET_MS_MAX = 60_000;

/**
 * Memory readings a few seconds apart, until RSS stops moving (freed memory goes back to the system
 * slowly); then the CPU every party spends in a window of its own.
 */
async function readings(
  subject: SubjectProcess,
  probe: ReturnType<typeof cpuProbe>,
  log: Log,
): Promise<{ memory: SubjectMemory[]; cpu: CpuWindow | null }> {
  const memory = await memoryReadings(subject, (m) => log(`phase 4: ${describeMemory(m)}`));
  return { memory, cpu: await cpuWindow(subject, probe) };
}

/** Memory readings a few seconds apart, until RSS stops moving (see MIN_READINGS). */
export async function memoryReadings(subject: SubjectProcess, onReading: (m: SubjectMemory) => void = () => {}): Promise<SubjectMemory[]> {
  const out: SubjectMemory[] = [];
  for (;;) {
    out.push(await subject.memory());
    onReading(out.at(-1)!);
    const last = out.slice(-STEADY_OF_LAST).map((r) => r.rss_bytes);
    const settled = out.length >= MIN_READINGS && Math.max(...last) - Math.min(...last) <= STEADY_WITHIN * Math.max(...last);
    if (settled || out.length >= READINGS_MAX) return out;
    await new Promise((r) => setTimeout(r, READING_EVERY_MS));
  }
}

/**
 * The CPU every party spends in CPU_WINDOW_MS, taken apart from the memory readings (each of which
 * forces garbage collections, work no pending job causes) and once the machine is quiet, or after
 * QUIET_MS_MAX (work the previous step left behind, such as the warm-up jobs' cancellations or the
 * creates' last workflow tasks, is not billed to the jobs that wait).
 */
async function cpuWindow(subject: SubjectProcess, probe: ReturnType<typeof cpuProbe>): Promise<CpuWindow | null> {
  if (!probe) return null;
  await waitUntilQuiet(QUIET_MS_MAX);
  const started_ms = Date.now();
  const first = probe.sample(subject.pid);
  await new Promise((r) => setTimeout(r, CPU_WINDOW_MS));
  return { cpu: cpuDelta(first, probe.sample(subject.pid)), elapsed_ms: Date.now() - started_ms };
}

const MIB = 1024 * 1024;
const mib = (n: number) => (n / MIB).toFixed(1);

/** One reading: its RSS, and where that is when the subject says (V8's heaps, what V8 is told of, the rest: native). */
export function describeMemory(m: SubjectMemory): string {
  const p = m.parts;
  if (!p) return `RSS ${mib(m.rss_bytes)} MiB (heap used ${mib(m.heap_used_bytes)})`;
  const native = m.rss_bytes - p.main_heap_bytes - p.worker_heap_bytes;
  return (
    `RSS ${mib(m.rss_bytes)} = main heap ${mib(p.main_heap_bytes)} (used ${mib(m.heap_used_bytes)}) + ${p.worker_threads} worker thread heap(s) ` +
    `${mib(p.worker_heap_bytes)} + native ${mib(native)} MiB (of which external ${mib(p.external_bytes)}; ${p.threads} threads)`
  );
}

/** The steady RSS of a series of readings: the median of the last few. */
export const steady = (rs: SubjectMemory[]) => median(rs.slice(-STEADY_OF_LAST).map((r) => r.rss_bytes));

export async function benchPendingRss(infra: Infra, cfg: BenchConfig, log: Log): Promise<PendingRss> {
  const { env, databaseUrl } = await subjectEnv(infra, 'product', PENDING_JOB_ENV);
  const db = createPool(databaseUrl, 2);
  const product = await spawnSubject('product', env, {
    cpuProfDir: process.env['BENCH_CPU_PROF_DIR'] && path.join(process.env['BENCH_CPU_PROF_DIR'], 'pending'),
  });
  const probe = cpuProbe(infra);
  try {
    const customer = await productCustomer(product.url);
    // Warm: code loaded and compiled, pools and caches filled, the workflow path run end to end.
    const warm: string[] = [];
    for (let i = 0; i < WARMUP_JOBS; i++) {
      const created = await createJob(customer, simulatedJob(PENDING_DELAY_MS, `warm ${i}`));
      if (created.id) warm.push(created.id);
    }
    await cancelJobs(customer, db, warm, cfg.BENCH_CONCURRENCY);
    log('phase 4: memory before');
    const before = await readings(product, probe, log);

    log(`phase 4: creating ${cfg.BENCH_PENDING} pending jobs`);
    const creates = await runLoad(
      cfg.BENCH_PENDING,
      cfg.BENCH_CONCURRENCY,
      async (i) => (await createJob(customer, simulatedJob(PENDING_DELAY_MS, `pending ${i}`))).error,
    );
    // Pending means submitted to the provider, its operation waiting for the poller (a row of
    // video_job_polls): wait until every pending job got there (one that failed instead is counted out
    // of the figure's jobs, below).
    const deadline = Date.now() + SUBMIT_TIMEOUT_MS;
    while ((await unsubmittedJobs(db)) > 0) {
      if (Date.now() > deadline) throw new Error('pending jobs not all submitted in time');
      await new Promise((r) => setTimeout(r, 1_000));
    }
    log('phase 4: memory after');
    const after = await readings(product, probe, log);
    const pending = await pendingJobs(db);
    return {
      pending,
      max_cached_workflows: loadConfig(env).workerLimits.maxCachedWorkflows,
      max_concurrent_polls: loadConfig(env).workerConcurrentPollsMax,
      creates,
      before: before.memory,
      after: after.memory,
      steady_before_bytes: steady(before.memory),
      steady_after_bytes: steady(after.memory),
      cpu_before: before.cpu,
      cpu_after: after.cpu,
      cpus: os.cpus().length,
    };
  } finally {
    log("phase 4: stopping the product process (its jobs stay pending on this run's Temporal, which stops with the run)");
    await product.stop();
    await db.end();
  }
}
