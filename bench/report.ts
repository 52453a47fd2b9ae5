// The benchmark's printed figures: one section per phase, and the side-by-side summary of issue 9's table.
import type { Config } from '../src/config.js';
import type { BenchConfig } from './bench-config.js';
import type { Environment } from './environment.js';
import { figuresOf, pooled, type Figures } from './load.js';
import type { CreateThroughput, Turn } from './create-throughput.js';
import { BALANCED_ROUNDS, type CreateSubject } from './turn-order.js';
import type { HistoryEvents } from './history-events.js';
import type { DoneToSeen } from './done-to-seen.js';
import type { CpuWindow, PendingRss } from './pending-rss.js';
import { temporalDynamicConfig } from '../src/temporal/dynamic-config.js';

const MIB = 2 ** 20;
const mib = (bytes: number) => (bytes / MIB).toFixed(1);
const s = (ms: number) => (ms / 1000).toFixed(1);
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

export const SEEN_TARGET_MS = 10_000;
export const HISTORY_TARGET_EVENTS = 40;
export const RSS_GROWTH_TARGET_MIB_PER_2000 = 150;
export const CREATE_TARGET_RATIO = 0.9;

export function formatHeader(env: Environment, cfg: BenchConfig, product: Config): string {
  return [
    'video-voice-api benchmark (figures printed, never asserted)',
    `machine     ${env.cpus} CPUs (${env.cpu_model}), ${env.memory_gib.toFixed(1)} GiB; Node ${env.node}; Temporal server ${env.temporal_server} (dev server); PostgreSQL ${env.postgres} (embedded)`,
    `temporal    ${[...temporalDynamicConfig()].map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(' ')} (config/temporal-dynamic-config.yaml)`,
    `bench       BENCH_JOBS=${cfg.BENCH_JOBS} BENCH_CONCURRENCY=${cfg.BENCH_CONCURRENCY} BENCH_WARMUP=${cfg.BENCH_WARMUP} BENCH_PRIMER=${cfg.BENCH_PRIMER} BENCH_ROUNDS=${cfg.BENCH_ROUNDS} ` +
      `BENCH_LONG_GENERATION_S=${cfg.BENCH_LONG_GENERATION_S} BENCH_SEEN_DELAYS_S=${cfg.BENCH_SEEN_DELAYS_S.join(',')} BENCH_PENDING=${cfg.BENCH_PENDING}`,
    `product     VIDEO_POLL_INTERVAL_MS=${product.video.pollIntervalMs} VIDEO_POLL_MAX_INTERVAL_MS=${product.video.pollMaxIntervalMs} ` +
      `VIDEO_JOB_TIMEOUT_MS=${product.video.jobTimeoutMs} DATABASE_POOL_MAX=${product.databasePoolMax} ` +
      `WORKER_MAX_CACHED_WORKFLOWS=${product.workerLimits.maxCachedWorkflows} WORKER_MAX_CONCURRENT_WORKFLOW_TASKS=${product.workerLimits.maxConcurrentWorkflowTaskExecutions} ` +
      `WORKER_MAX_CONCURRENT_ACTIVITIES=${product.workerLimits.maxConcurrentActivityTaskExecutions} WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES=${product.workerLimits.maxConcurrentLocalActivityExecutions} WORKER_MAX_CONCURRENT_POLLS=${product.workerMaxConcurrentPolls}`,
    '            (the service\'s defaults unless exported; the bench sets only RATE_LIMIT_PER_MINUTE=1000000, SIMULATOR=on, LOG_LEVEL=silent)',
    '',
  ].join('\n');
}

const SUBJECT_NAMES: Record<CreateSubject, string> = {
  bare: 'bare Express (HTTP floor)',
  floor: 'engine floor (update-with-start, LA pg charge)',
  product: 'product POST /v2/videos/generations',
  product_keyed: 'product, with an Idempotency-Key',
};

const NAME_WIDTH = 58;

function figuresLine(name: string, f: Figures, floor: Figures | null): string {
  const ratio = floor && name.includes('product') ? pct(f.jobs_per_s / floor.jobs_per_s) : '';
  return `  ${name.padEnd(NAME_WIDTH)} ${f.jobs_per_s.toFixed(1).padStart(8)} ${f.p50_ms.toFixed(1).padStart(8)} ${f.p99_ms.toFixed(1).padStart(8)} ${ratio.padStart(9)}`;
}

/** Each subject's figures over all rounds. */
export function createFigures(r: CreateThroughput): Record<CreateSubject, Figures> {
  const out = {} as Record<CreateSubject, Figures>;
  for (const subject of Object.keys(SUBJECT_NAMES) as CreateSubject[]) out[subject] = figuresOf(pooled(r.rounds.map((round) => round[subject].load)));
  return out;
}

/** CPU ms per create of the subject, Temporal and PostgreSQL together (null where not measurable). */
function serverCpuPerCreate(turns: Turn[]): number | null {
  if (turns.some((t) => !t.cpu)) return null;
  const creates = turns.reduce((a, t) => a + t.load.ok, 0);
  return turns.reduce((a, t) => a + t.cpu!.subject_ms + t.cpu!.temporal_ms + t.cpu!.postgres_ms, 0) / creates;
}

const CPU_COLUMNS = ['subject', 'Temporal', 'Postgres', 'sum', 'client', 'others', 'busy'];
const column = (x: string) => x.padStart(9);

/**
 * CPU ms per create over all rounds: the subject process, the Temporal server, PostgreSQL, their sum,
 * the load generator, anything else on the machine; and how busy all CPUs were.
 */
function cpuLine(name: string, turns: Turn[], cpus: number): string | null {
  if (turns.some((t) => !t.cpu)) return null;
  const creates = turns.reduce((a, t) => a + t.load.ok, 0);
  const sum = (k: keyof NonNullable<Turn['cpu']>) => turns.reduce((a, t) => a + t.cpu![k], 0);
  const server = sum('subject_ms') + sum('temporal_ms') + sum('postgres_ms');
  const others = sum('machine_busy_ms') - server - sum('client_ms');
  const elapsed_ms = turns.reduce((a, t) => a + t.load.elapsed_ms, 0);
  const per = (ms: number) => column((ms / creates).toFixed(1));
  return `  ${name.padEnd(NAME_WIDTH)}${[sum('subject_ms'), sum('temporal_ms'), sum('postgres_ms'), server, sum('client_ms'), others].map(per).join('')}${column(pct(sum('machine_busy_ms') / (elapsed_ms * cpus)))}`;
}

/** The median of the rounds' ratios of `subject` to the floor, and their range. */
function roundRatios(r: CreateThroughput, subject: CreateSubject): string {
  const ratios = r.rounds.map((round) => figuresOf(round[subject].load).jobs_per_s / figuresOf(round.floor.load).jobs_per_s).sort((a, b) => a - b);
  const mid = ratios.length / 2;
  const median = ratios.length % 2 ? ratios[Math.floor(mid)]! : (ratios[mid - 1]! + ratios[mid]!) / 2;
  return `${pct(median)} (from ${pct(ratios[0]!)} to ${pct(ratios[ratios.length - 1]!)})`;
}

export function formatCreates(r: CreateThroughput, cfg: BenchConfig, cpus: number): string {
  const lines = [
    `1. create throughput and latency: ${cfg.BENCH_JOBS} creates per subject and round, ${cfg.BENCH_CONCURRENCY} in flight, ${r.rounds.length} rounds (subjects take turns: bare Express, then the three on Temporal, rotated in rounds 1-3 and in the orders of rounds 3-1 backwards in rounds 4-6${r.rounds.length % BALANCED_ROUNDS === 0 ? '' : `; balanced over a multiple of ${BALANCED_ROUNDS} rounds only`})`,
    `  ${''.padEnd(NAME_WIDTH)} ${'jobs/s'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'vs floor'.padStart(9)}`,
  ];
  r.rounds.forEach((round, i) => {
    const floor = figuresOf(round.floor.load);
    for (const subject of Object.keys(SUBJECT_NAMES) as CreateSubject[]) {
      lines.push(figuresLine(`round ${i + 1}: ${SUBJECT_NAMES[subject]}`, figuresOf(round[subject].load), floor));
    }
  });
  const all = createFigures(r);
  for (const subject of Object.keys(SUBJECT_NAMES) as CreateSubject[]) lines.push(figuresLine(`all rounds: ${SUBJECT_NAMES[subject]}`, all[subject], all.floor));
  lines.push(`  ${'each round\'s ratio to the floor, median'.padEnd(NAME_WIDTH)} product ${roundRatios(r, 'product')}; keyed ${roundRatios(r, 'product_keyed')}`);
  const cpu = (Object.keys(SUBJECT_NAMES) as CreateSubject[]).map((subject) => cpuLine(SUBJECT_NAMES[subject], r.rounds.map((round) => round[subject]), cpus));
  if (cpu.every((l) => l !== null)) {
    lines.push(`  ${'CPU ms per create, all rounds'.padEnd(NAME_WIDTH)}${CPU_COLUMNS.map(column).join('')}`);
    lines.push(...cpu);
  }
  const errors = r.rounds.flatMap((round) => Object.entries(round).filter(([, x]) => x.load.errors > 0).map(([k, x]) => `${k}: ${x.load.errors} (${x.load.first_error})`));
  lines.push(`  errors: ${errors.length === 0 ? 'none' : errors.join('; ')}; ledger audit after the product's creates and cancels: ${r.ledger_audit_ok ? 'ok' : 'FAILED'}`);
  return lines.join('\n') + '\n';
}

function topTypes(by_type: Map<string, number>): string {
  return [...by_type.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([t, n]) => `${t} ${n}`)
    .join(', ');
}

export function formatHistory(h: HistoryEvents): string {
  const lines = [`2. history events per job (all runs of its workflow), default poll settings; job deadline ${s(h.job_timeout_ms)} s`];
  for (const j of h.jobs) {
    lines.push(
      `  ${`${j.generation_s} s generation:`.padEnd(22)} ${String(j.events).padStart(4)} events in ${j.runs} run(s), ${j.provider_polls} provider polls ` +
        `(${j.poll_attempts} poll attempts in history), ${j.status}, seen ${s(j.done_to_seen_ms)} s after done (GET every 1 s)`,
    );
    lines.push(`    ${topTypes(j.by_type)}`);
  }
  return lines.join('\n') + '\n';
}

export function formatSeen(list: DoneToSeen[]): string {
  const lines = ['3. time from done to seen, default settings (GET every 100 ms)'];
  for (const j of list) lines.push(`  ${`${j.generation_s} s generation:`.padEnd(22)} ${s(j.done_to_seen_ms).padStart(6)} s  (${j.status})`);
  lines.push(`  ${'max:'.padEnd(22)} ${s(Math.max(...list.map((j) => j.done_to_seen_ms))).padStart(6)} s  (target <= ${s(SEEN_TARGET_MS)} s)`);
  return lines.join('\n') + '\n';
}

export function formatRss(r: PendingRss): string {
  const c = figuresOf(r.creates);
  const growth = r.steady_after_bytes - r.steady_before_bytes;
  return [
    `4. RSS of the API + worker process with ${r.pending} pending jobs (WORKER_MAX_CACHED_WORKFLOWS=${r.max_cached_workflows}, WORKER_MAX_CONCURRENT_POLLS=${r.max_concurrent_polls}), after gc()`,
    `  before: ${r.before.map((m) => mib(m.rss_bytes)).join(', ')} MiB (heap ${mib(r.before.at(-1)!.heap_used_bytes)} MiB) -> steady ${mib(r.steady_before_bytes)} MiB`,
    `  after:  ${r.after.map((m) => mib(m.rss_bytes)).join(', ')} MiB (heap ${mib(r.after.at(-1)!.heap_used_bytes)} MiB) -> steady ${mib(r.steady_after_bytes)} MiB`,
    `  growth: ${mib(growth)} MiB for ${r.pending} pending jobs (${(growth / 1024 / Math.max(r.pending, 1)).toFixed(1)} KiB per job; target <= ${RSS_GROWTH_TARGET_MIB_PER_2000} MiB for 2,000)`,
    `  creates meanwhile: ${c.jobs_per_s.toFixed(1)} jobs/s, p50 ${c.p50_ms.toFixed(1)} ms, p99 ${c.p99_ms.toFixed(1)} ms, ${r.creates.errors} errors${r.creates.first_error ? ` (${r.creates.first_error})` : ''}`,
    ...pendingCpuLines(r),
    '',
  ].join('\n');
}

/** CPU per second of wall time during the readings, idle and with the jobs pending, and the difference per 1,000 jobs. */
function pendingCpuLines(r: PendingRss): string[] {
  if (!r.cpu_before || !r.cpu_after) return [];
  const rate = (w: CpuWindow, k: 'subject_ms' | 'temporal_ms' | 'postgres_ms' | 'machine_busy_ms') => w.cpu[k] / (w.elapsed_ms / 1000);
  const parts = ['subject_ms', 'temporal_ms', 'postgres_ms'] as const;
  const line = (label: string, w: CpuWindow) =>
    `  CPU ${label}: ${parts.map((k) => `${k.replace('_ms', '')} ${rate(w, k).toFixed(0)}`).join(', ')} ms/s; all CPUs ${pct(rate(w, 'machine_busy_ms') / 1000 / r.cpus)} busy (${s(w.elapsed_ms)} s)`;
  const per1000 = parts.map((k) => (((rate(r.cpu_after!, k) - rate(r.cpu_before!, k)) * 1000) / Math.max(r.pending, 1)).toFixed(0));
  return [
    line('idle   ', r.cpu_before),
    line(`pending`, r.cpu_after),
    `  what 1,000 pending jobs cost: subject ${per1000[0]}, Temporal ${per1000[1]}, PostgreSQL ${per1000[2]} CPU ms per second (the pollers' claims, polls and heartbeats)`,
  ];
}

export interface Summary {
  creates?: CreateThroughput;
  history?: HistoryEvents;
  seen?: DoneToSeen[];
  rss?: PendingRss;
}

/** Issue 9's table: each measure, the figure of this run, the target. */
export function formatSummary(all: Summary): string {
  const rows: [string, string, string][] = [];
  if (all.creates) {
    const f = createFigures(all.creates);
    rows.push([
      'create jobs/s: product vs floor (bare Express)',
      `${f.product.jobs_per_s.toFixed(1)} vs ${f.floor.jobs_per_s.toFixed(1)} = ${pct(f.product.jobs_per_s / f.floor.jobs_per_s)} (${f.bare.jobs_per_s.toFixed(0)}); keyed ${pct(f.product_keyed.jobs_per_s / f.floor.jobs_per_s)}`,
      `>= ${pct(CREATE_TARGET_RATIO)}`,
    ]);
    // On a machine the creates saturate, throughput is bounded by the CPU a create costs: a figure the
    // floor's occasional stalls (its p99) do not move, unlike jobs/s.
    const cpuOf = (subject: CreateSubject) => serverCpuPerCreate(all.creates!.rounds.map((round) => round[subject]));
    const [product_ms, floor_ms] = [cpuOf('product'), cpuOf('floor')];
    if (product_ms !== null && floor_ms !== null) {
      rows.push(['CPU per create (subject+Temporal+Postgres)', `product ${product_ms.toFixed(1)} ms vs floor ${floor_ms.toFixed(1)} ms: floor/product = ${pct(floor_ms / product_ms)}`, `>= ${pct(CREATE_TARGET_RATIO)}`]);
    }
  }
  if (all.history) {
    rows.push(['history events of one job (all runs)', all.history.jobs.map((j) => `${j.events} for ${j.generation_s} s (${j.provider_polls} polls)`).join(', '), `<= ${HISTORY_TARGET_EVENTS}`]);
  }
  if (all.seen) {
    rows.push(['time from done to seen (max)', `${s(Math.max(...all.seen.map((j) => j.done_to_seen_ms)))} s over ${all.seen.map((j) => `${j.generation_s}`).join('/')} s jobs`, `<= ${s(SEEN_TARGET_MS)} s`]);
  }
  if (all.rss) {
    rows.push([`RSS growth with ${all.rss.pending} pending jobs`, `${mib(all.rss.steady_before_bytes)} -> ${mib(all.rss.steady_after_bytes)} MiB = +${mib(all.rss.steady_after_bytes - all.rss.steady_before_bytes)} MiB`, `<= ${RSS_GROWTH_TARGET_MIB_PER_2000} MiB for 2,000`]);
  }
  const w0 = Math.max(...rows.map((r) => r[0].length), 7);
  const w1 = Math.max(...rows.map((r) => r[1].length), 4);
  return [
    'summary (issue 9)',
    `  ${'measure'.padEnd(w0)}  ${'this run'.padEnd(w1)}  target`,
    ...rows.map(([a, b, c]) => `  ${a.padEnd(w0)}  ${b.padEnd(w1)}  ${c}`),
    '',
  ].join('\n');
}
