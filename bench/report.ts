// The benchmark's printed figures: one section per phase, and a summary of each figure next to its target.
import type { Config } from '../src/config.js';
import type { BenchConfig } from './bench-config.js';
import type { Environment } from './environment.js';
import { percentile, pooled, type Figures, type LoadResult } from './load.js';
import type { CpuDelta } from './process-cpu.js';
import type { CreateThroughput, Turn, WholeJobSubject } from './create-throughput.js';
import { BALANCED_ROUNDS, type CreateSubject } from './turn-order.js';
import type { HistoryEvents } from './history-events.js';
import type { CompletionPath, DoneToSeen } from './done-to-seen.js';
import { describeMemory, type CpuWindow, type PendingRss } from './pending-rss.js';
import type { CodeLines } from './code-size.js';
import type { ReadSeries, ReadSubject, ReadTurn, StatusReads } from './status-reads.js';
import type { NodeSubject, NodeVersions } from './node-versions.js';
import { temporalDynamicConfig } from '../src/temporal/dynamic-config.js';

const MIB = 2 ** 20;
const mib = (bytes: number) => (bytes / MIB).toFixed(1);
const s = (ms: number) => (ms / 1000).toFixed(1);
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

// The project's targets: printed next to each figure, never asserted.
/** Creates with jobs left pending: the product's jobs/s over the engine floor's. */
export const CREATE_TARGET_RATIO = 0.85;
/** Whole jobs (each also completes during the run): the product's jobs/s over the floor's. */
export const WHOLE_JOB_TARGET_RATIO = 0.7;
/** Whole jobs: the product's jobs/s over the engine running the same job shape with no product code. */
export const WHOLE_JOB_ENGINE_TARGET_RATIO = 0.85;
/** History events of one job, whatever its generation time. */
export const HISTORY_TARGET_EVENTS = 30;
/** Provider done -> a GET shows it: a polled provider at default settings, and one that calls back. */
export const SEEN_TARGET_MS = 5_000;
export const SEEN_CALLBACK_TARGET_MS = 1_000;
/** CPU per second that 1,000 pending jobs add while they wait: the Temporal server, the API + worker process. */
export const PENDING_TEMPORAL_TARGET_MS_PER_S = 15;
export const PENDING_SUBJECT_TARGET_MS_PER_S = 30;
/** RSS growth of the API + worker process with RSS_TARGET_PENDING jobs pending. */
export const RSS_GROWTH_TARGET_MIB = 150;
export const RSS_TARGET_PENDING = 10_000;
/** Status reads: GETs of pending jobs over the row-read floor's, at every concurrency and size; their p99 at most twice the floor's. */
export const READ_TARGET_RATIO = 0.8;
export const READ_P99_TARGET_FACTOR = 2;
/** Creates per second while GETs run, over creates per second without. */
export const MIXED_TARGET_RATIO = 0.8;

export function formatHeader(env: Environment, cfg: BenchConfig, product: Config): string {
  return [
    'video-voice-api benchmark (figures printed, never asserted)',
    `machine     ${env.cpus} CPUs (${env.cpu_model}), ${env.memory_gib.toFixed(1)} GiB; Node ${env.node}; Temporal server ${env.temporal_server} (dev server); PostgreSQL ${env.postgres} (embedded)`,
    `temporal    ${[...temporalDynamicConfig()].map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(' ')} (config/temporal-dynamic-config.yaml)`,
    `bench       BENCH_JOBS=${cfg.BENCH_JOBS} BENCH_CONCURRENCY=${cfg.BENCH_CONCURRENCY} BENCH_WARMUP=${cfg.BENCH_WARMUP} BENCH_PRIMER=${cfg.BENCH_PRIMER} BENCH_ROUNDS=${cfg.BENCH_ROUNDS} ` +
      `BENCH_LONG_GENERATION_S=${cfg.BENCH_LONG_GENERATION_S} BENCH_SEEN_DELAYS_S=${cfg.BENCH_SEEN_DELAYS_S.join(',')} BENCH_PENDING=${cfg.BENCH_PENDING} ` +
      `BENCH_READ_PENDING=${cfg.BENCH_READ_PENDING} BENCH_READ_PENDING_LARGE=${cfg.BENCH_READ_PENDING_LARGE} BENCH_READ_CONCURRENCY=${cfg.BENCH_READ_CONCURRENCY.join(',')} BENCH_READ_S=${cfg.BENCH_READ_S} BENCH_READ_ROUNDS=${cfg.BENCH_READ_ROUNDS} ` +
      `BENCH_USAGE_ENTRIES=${cfg.BENCH_USAGE_ENTRIES.join(',')} BENCH_USAGE_READS=${cfg.BENCH_USAGE_READS} BENCH_USAGE_CHARGES=${cfg.BENCH_USAGE_CHARGES} BENCH_PHASES=${[...cfg.BENCH_PHASES].join(',')}`,
    `product     VIDEO_POLL_INTERVAL_MS=${product.video.pollIntervalMs} VIDEO_POLL_MAX_INTERVAL_MS=${product.video.pollIntervalMsMax} ` +
      `VIDEO_JOB_TIMEOUT_MS=${product.video.jobTimeoutMs} DATABASE_POOL_MAX=${product.databasePoolMax} ` +
      `WORKER_MAX_CACHED_WORKFLOWS=${product.workerLimits.maxCachedWorkflows} WORKER_MAX_CONCURRENT_WORKFLOW_TASKS=${product.workerLimits.maxConcurrentWorkflowTaskExecutions} ` +
      `WORKER_MAX_CONCURRENT_ACTIVITIES=${product.workerLimits.maxConcurrentActivityTaskExecutions} WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES=${product.workerLimits.maxConcurrentLocalActivityExecutions} WORKER_MAX_CONCURRENT_POLLS=${product.workerConcurrentPollsMax}`,
    "            (the service's defaults unless exported; the bench sets only RATE_LIMIT_PER_MINUTE=1000000, RATE_LIMIT_READS_PER_MINUTE=1000000, MAX_PENDING_JOBS_PER_WORKSPACE=1000000, SIMULATOR=on, LOG_LEVEL=silent)",
    '',
  ].join('\n');
}

const SUBJECT_NAMES: Record<CreateSubject, string> = {
  bare: 'bare Express (HTTP floor)',
  floor: 'engine floor (update-with-start, LA pg charge)',
  product: 'product POST /v2/videos/generations',
  product_keyed: 'product, with an Idempotency-Key',
};

const WHOLE_JOB_NAMES: Record<WholeJobSubject, string> = {
  floor: 'engine floor (update-with-start, LA pg charge)',
  engine: 'engine whole jobs, product shape (until all settled)',
  product: 'product whole jobs (until all settled)',
};

const NAME_WIDTH = 58;

function figuresLine(name: string, f: Figures, floor: Figures | null): string {
  const ratio = floor && name.includes('product') ? pct(f.jobs_per_s / floor.jobs_per_s) : '';
  return `  ${name.padEnd(NAME_WIDTH)} ${f.jobs_per_s.toFixed(1).padStart(8)} ${f.p50_ms.toFixed(1).padStart(8)} ${f.p99_ms.toFixed(1).padStart(8)} ${ratio.padStart(9)}`;
}

const FIGURES_HEADER = `  ${''.padEnd(NAME_WIDTH)} ${'jobs/s'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'vs floor'.padStart(9)}`;

/** Turns as one: jobs/s over their wall time (for whole jobs, until all were settled), the creates' latency. */
function turnsFigures(turns: Turn[]): Figures {
  const creates = pooled(turns.map((t) => t.load));
  return {
    jobs_per_s: creates.ok / (turns.reduce((a, t) => a + t.elapsed_ms, 0) / 1000),
    p50_ms: percentile(creates.latencies_ms, 50),
    p99_ms: percentile(creates.latencies_ms, 99),
  };
}

/** Each subject's figures over all rounds. */
function figuresOverRounds<S extends string>(rounds: Record<S, Turn>[], subjects: S[]): Record<S, Figures> {
  const out = {} as Record<S, Figures>;
  for (const subject of subjects) out[subject] = turnsFigures(rounds.map((round) => round[subject]));
  return out;
}

const CREATE_SUBJECTS = Object.keys(SUBJECT_NAMES) as CreateSubject[];
const WHOLE_JOB_SUBJECTS = Object.keys(WHOLE_JOB_NAMES) as WholeJobSubject[];

/** CPU ms per job of each server party (the subject, Temporal, PostgreSQL) and their sum (null where not measurable). */
function serverCpuPerJob(turns: Turn[]): { subject: number; temporal: number; postgres: number; sum: number } | null {
  if (turns.some((t) => !t.cpu)) return null;
  const jobs = turns.reduce((a, t) => a + t.load.ok, 0);
  const per = (k: 'subject_ms' | 'temporal_ms' | 'postgres_ms') => turns.reduce((a, t) => a + t.cpu![k], 0) / jobs;
  const [subject, temporal, postgres] = [per('subject_ms'), per('temporal_ms'), per('postgres_ms')];
  return { subject, temporal, postgres, sum: subject + temporal + postgres };
}

const CPU_COLUMNS = ['subject', 'Temporal', 'Postgres', 'sum', 'client', 'others', 'busy'];
const column = (x: string) => x.padStart(9);

/**
 * CPU ms per job over all rounds: the subject process, the Temporal server, PostgreSQL, their sum, the
 * load generator, anything else on the machine; and how busy all CPUs were.
 */
function cpuLine(name: string, turns: Turn[], cpus: number): string | null {
  if (turns.some((t) => !t.cpu)) return null;
  const jobs = turns.reduce((a, t) => a + t.load.ok, 0);
  const sum = (k: keyof NonNullable<Turn['cpu']>) => turns.reduce((a, t) => a + t.cpu![k], 0);
  const server = sum('subject_ms') + sum('temporal_ms') + sum('postgres_ms');
  const others = sum('machine_busy_ms') - server - sum('client_ms');
  const elapsed_ms = turns.reduce((a, t) => a + t.elapsed_ms, 0);
  const per = (ms: number) => column((ms / jobs).toFixed(1));
  return `  ${name.padEnd(NAME_WIDTH)}${[sum('subject_ms'), sum('temporal_ms'), sum('postgres_ms'), server, sum('client_ms'), others].map(per).join('')}${column(pct(sum('machine_busy_ms') / (elapsed_ms * cpus)))}`;
}

function cpuTable(title: string, names: [string, Turn[]][], cpus: number): string[] {
  const lines = names.map(([name, turns]) => cpuLine(name, turns, cpus));
  if (lines.some((l) => l === null)) return [];
  return [`  ${title.padEnd(NAME_WIDTH)}${CPU_COLUMNS.map(column).join('')}`, ...(lines as string[])];
}

/** The median of the rounds' ratios of `subject` to the floor, and their range. */
function roundRatios<S extends string>(rounds: Record<S | 'floor', Turn>[], subject: S): string {
  const ratios = rounds
    .map((round) => turnsFigures([round[subject]]).jobs_per_s / turnsFigures([round.floor]).jobs_per_s)
    .sort((a, b) => a - b);
  const mid = ratios.length / 2;
  const median = ratios.length % 2 ? ratios[Math.floor(mid)]! : (ratios[mid - 1]! + ratios[mid]!) / 2;
  return `${pct(median)} (from ${pct(ratios[0]!)} to ${pct(ratios[ratios.length - 1]!)})`;
}

function roundLines<S extends string>(rounds: Record<S | 'floor', Turn>[], names: Record<S, string>): string[] {
  const subjects = Object.keys(names) as S[];
  const lines: string[] = [];
  rounds.forEach((round, i) => {
    const floor = turnsFigures([round.floor]);
    for (const subject of subjects) lines.push(figuresLine(`round ${i + 1}: ${names[subject]}`, turnsFigures([round[subject]]), floor));
  });
  const all = figuresOverRounds(rounds, subjects);
  for (const subject of subjects) lines.push(figuresLine(`all rounds: ${names[subject]}`, all[subject], all['floor' as S]));
  return lines;
}

function errorsLine(rounds: Record<string, Turn>[], r: CreateThroughput): string {
  const errors = rounds.flatMap((round) =>
    Object.entries(round)
      .filter(([, x]) => x.load.errors > 0)
      .map(([k, x]) => `${k}: ${x.load.errors} (${x.load.first_error})`),
  );
  return `  errors: ${errors.length === 0 ? 'none' : errors.join('; ')}; ledger audit after the product's jobs: ${r.ledger_audit_ok ? 'ok' : 'FAILED'}`;
}

export function formatCreates(r: CreateThroughput, cfg: BenchConfig, cpus: number): string {
  const rounds = r.rounds!;
  const lines = [
    `1. creates, jobs left pending: ${cfg.BENCH_JOBS} creates per subject and round, ${cfg.BENCH_CONCURRENCY} in flight, ${rounds.length} rounds (subjects take turns: bare Express, then the three on Temporal, rotated in rounds 1-3 and in the orders of rounds 3-1 backwards in rounds 4-6${rounds.length % BALANCED_ROUNDS === 0 ? '' : `; balanced over a multiple of ${BALANCED_ROUNDS} rounds only`})`,
    FIGURES_HEADER,
    ...roundLines(rounds, SUBJECT_NAMES),
    `  ${"each round's ratio to the floor, median".padEnd(NAME_WIDTH)} product ${roundRatios(rounds, 'product')}; keyed ${roundRatios(rounds, 'product_keyed')}`,
    ...cpuTable(
      'CPU ms per create, all rounds',
      CREATE_SUBJECTS.map((subject) => [SUBJECT_NAMES[subject], rounds.map((round) => round[subject])]),
      cpus,
    ),
    errorsLine(rounds, r),
  ];
  return lines.join('\n') + '\n';
}

/**
 * The product's whole-job turns: its creates' own rate (creates over the time until the last was
 * answered), and the mean time from the last create answered to the last job settled.
 */
function wholeJobTail(rounds: Record<WholeJobSubject, Turn>[]): { creates_per_s: number; tail_ms: number } {
  const product = rounds.map((round) => round.product);
  const creates = pooled(product.map((t) => t.load));
  return {
    creates_per_s: creates.ok / (creates.elapsed_ms / 1000),
    tail_ms: product.reduce((a, t) => a + t.elapsed_ms - t.load.elapsed_ms, 0) / product.length,
  };
}

/** The product's whole jobs/s over the engine's, all rounds together. */
function engineRatio(rounds: Record<WholeJobSubject, Turn>[]): string {
  const f = figuresOverRounds(rounds, WHOLE_JOB_SUBJECTS);
  return pct(f.product.jobs_per_s / f.engine.jobs_per_s);
}

export function formatWholeJobs(r: CreateThroughput, cfg: BenchConfig, cpus: number): string {
  const rounds = r.whole_rounds!;
  const settle = rounds.flatMap((round) => (round.product.settle ? [round.product.settle] : []));
  const settled_ms = settle.flatMap((x) => x.charge_to_settled_ms).sort((a, b) => a - b);
  const tail = wholeJobTail(rounds);
  const lines = [
    `5. whole jobs: ${cfg.BENCH_JOBS} jobs per subject and round, ${cfg.BENCH_CONCURRENCY} in flight, ${rounds.length} rounds (the floor, the engine's whole jobs and the product's take turns, rotated each round; the engine's and the product's jobs have no generation delay and are charged, submitted, polled, copied and settled within the turn)`,
    FIGURES_HEADER,
    ...roundLines(rounds, WHOLE_JOB_NAMES),
    `  ${"each round's ratio to the floor, median".padEnd(NAME_WIDTH)} product ${roundRatios(rounds, 'product')}; engine whole jobs ${roundRatios(rounds, 'engine')}`,
    `  ${'product vs the engine running the same job shape'.padEnd(NAME_WIDTH)} ${engineRatio(rounds)} over all rounds; each round's, median ${roundRatios(
      rounds.map((r) => ({ ...r, floor: r.engine })),
      'product',
    )}`,
    `  product: creates alone ${tail.creates_per_s.toFixed(1)} jobs/s; last create answered -> last job settled ${s(tail.tail_ms)} s (mean of the turns); ` +
      `charge -> settled p50 ${s(percentile(settled_ms, 50))} s, p99 ${s(percentile(settled_ms, 99))} s; ` +
      `${settle.reduce((a, x) => a + x.succeeded, 0)} succeeded, ${settle.reduce((a, x) => a + x.failed, 0)} failed`,
    ...cpuTable(
      'CPU ms per whole job, all rounds',
      WHOLE_JOB_SUBJECTS.map((subject) => [WHOLE_JOB_NAMES[subject], rounds.map((round) => round[subject])]),
      cpus,
    ),
    errorsLine(rounds, r),
  ];
  return lines.join('\n') + '\n';
}

function topTypes(by_type: Map<string, number>): string {
  return [...by_type.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([t, n]) => `${t} ${n}`)
    .join(', ');
}

export function formatHistory(h: HistoryEvents): string {
  const lines = [`2. history events of one job's workflow, default poll settings; job deadline ${s(h.job_timeout_ms)} s`];
  for (const j of h.jobs) {
    lines.push(
      `  ${`${j.generation_s} s generation:`.padEnd(22)} ${String(j.events).padStart(4)} events (target <= ${HISTORY_TARGET_EVENTS}), ${j.signals} signal(s), ${j.provider_polls} provider polls, ` +
        `${j.status}, seen ${s(j.done_to_seen_ms)} s after done (GET every 1 s)`,
    );
    lines.push(`    ${topTypes(j.by_type)}`);
  }
  return lines.join('\n') + '\n';
}

const SEEN_PATHS: { path: CompletionPath; label: string; target_ms: number }[] = [
  { path: 'polled', label: 'polled provider', target_ms: SEEN_TARGET_MS },
  {
    path: 'callback',
    label: 'provider callback (nudgePoll at done; no HTTP request, no verification)',
    target_ms: SEEN_CALLBACK_TARGET_MS,
  },
];

const maxSeenMs = (list: DoneToSeen[], path: CompletionPath) =>
  Math.max(...list.filter((j) => j.path === path).map((j) => j.done_to_seen_ms));

export function formatSeen(list: DoneToSeen[]): string {
  const lines = ['3. time from done to seen, default settings (GET every 100 ms)'];
  for (const { path, label, target_ms } of SEEN_PATHS) {
    lines.push(`  ${label}`);
    for (const j of list.filter((x) => x.path === path)) {
      const note = j.nudged === false ? ', the poller found it first' : '';
      lines.push(`    ${`${j.generation_s} s generation:`.padEnd(22)} ${s(j.done_to_seen_ms).padStart(6)} s  (${j.status}${note})`);
    }
    lines.push(`    ${'max:'.padEnd(22)} ${s(maxSeenMs(list, path)).padStart(6)} s  (target <= ${s(target_ms)} s)`);
  }
  return lines.join('\n') + '\n';
}

export function formatRss(r: PendingRss): string {
  const c = pooled([r.creates]);
  const f = { jobs_per_s: c.ok / (c.elapsed_ms / 1000), p50_ms: percentile(c.latencies_ms, 50), p99_ms: percentile(c.latencies_ms, 99) };
  const growth = r.steady_after_bytes - r.steady_before_bytes;
  return [
    `4. RSS of the API + worker process with ${r.pending} pending jobs (WORKER_MAX_CACHED_WORKFLOWS=${r.max_cached_workflows}, WORKER_MAX_CONCURRENT_POLLS=${r.max_concurrent_polls}), after gc()`,
    `  before: ${r.before.map((m) => mib(m.rss_bytes)).join(', ')} MiB (heap ${mib(r.before.at(-1)!.heap_used_bytes)} MiB) -> steady ${mib(r.steady_before_bytes)} MiB`,
    `  after:  ${r.after.map((m) => mib(m.rss_bytes)).join(', ')} MiB (heap ${mib(r.after.at(-1)!.heap_used_bytes)} MiB) -> steady ${mib(r.steady_after_bytes)} MiB`,
    ...partsLines(r),
    `  growth: ${mib(growth)} MiB for ${r.pending} pending jobs (${(growth / 1024 / Math.max(r.pending, 1)).toFixed(1)} KiB per job; target <= ${RSS_GROWTH_TARGET_MIB} MiB for ${RSS_TARGET_PENDING.toLocaleString('en')})`,
    `  creates meanwhile: ${f.jobs_per_s.toFixed(1)} jobs/s, p50 ${f.p50_ms.toFixed(1)} ms, p99 ${f.p99_ms.toFixed(1)} ms, ${r.creates.errors} errors${r.creates.first_error ? ` (${r.creates.first_error})` : ''}`,
    ...pendingCpuLines(r),
    '',
  ].join('\n');
}

/** Where the RSS of the last reading before and after is: V8's heaps, what V8 is told of, and the rest (native). */
function partsLines(r: PendingRss): string[] {
  if (!r.after.at(-1)!.parts) return [];
  return [`  before: ${describeMemory(r.before.at(-1)!)}`, `  after:  ${describeMemory(r.after.at(-1)!)}`];
}

const PENDING_PARTS = ['subject_ms', 'temporal_ms', 'postgres_ms'] as const;
type PendingPart = (typeof PENDING_PARTS)[number];
const rate = (w: CpuWindow, k: PendingPart | 'machine_busy_ms') => w.cpu[k] / (w.elapsed_ms / 1000);

/** CPU ms per second that 1,000 pending jobs add to each party: pending rate minus idle rate, per 1,000 jobs. */
function pendingCpuPer1000(r: PendingRss): Record<PendingPart, number> | null {
  if (!r.cpu_before || !r.cpu_after) return null;
  const per = (k: PendingPart) => ((rate(r.cpu_after!, k) - rate(r.cpu_before!, k)) * 1000) / Math.max(r.pending, 1);
  return { subject_ms: per('subject_ms'), temporal_ms: per('temporal_ms'), postgres_ms: per('postgres_ms') };
}

/** CPU per second of wall time during the readings, idle and with the jobs pending, and the difference per 1,000 jobs. */
function pendingCpuLines(r: PendingRss): string[] {
  const per1000 = pendingCpuPer1000(r);
  if (!per1000) return [];
  const line = (label: string, w: CpuWindow) =>
    `  CPU ${label}: ${PENDING_PARTS.map((k) => `${k.replace('_ms', '')} ${rate(w, k).toFixed(0)}`).join(', ')} ms/s; all CPUs ${pct(rate(w, 'machine_busy_ms') / 1000 / r.cpus)} busy (${s(w.elapsed_ms)} s)`;
  return [
    line('idle   ', r.cpu_before!),
    line('pending', r.cpu_after!),
    `  what 1,000 pending jobs cost while they wait: Temporal ${per1000.temporal_ms.toFixed(1)} (target <= ${PENDING_TEMPORAL_TARGET_MS_PER_S}), ` +
      `API+worker ${per1000.subject_ms.toFixed(1)} (target <= ${PENDING_SUBJECT_TARGET_MS_PER_S}), PostgreSQL ${per1000.postgres_ms.toFixed(1)} CPU ms per second (the pollers' claims and polls)`,
  ];
}

const READ_NAMES: Record<ReadSubject, string> = {
  floor: 'floor: Express + key lookup + job row read',
  product: 'product GET /v2/videos/generations/{id}',
};

/** Reads of turns as one: GETs per second over their wall time, and their latency. */
function readFigures(turns: ReadTurn[]): Figures {
  const all = pooled(turns.map((t) => t.load));
  return {
    jobs_per_s: all.ok / (all.elapsed_ms / 1000),
    p50_ms: percentile(all.latencies_ms, 50),
    p99_ms: percentile(all.latencies_ms, 99),
  };
}

function readSeriesFigures(x: ReadSeries): Record<ReadSubject, Figures> {
  return { floor: readFigures(x.rounds.map((r) => r.floor)), product: readFigures(x.rounds.map((r) => r.product)) };
}

/** CPU ms per GET of each party, over the turns. */
function readCpuLine(name: string, turns: ReadTurn[], cpus: number): string | null {
  if (turns.some((t) => !t.cpu)) return null;
  const gets = turns.reduce((a, t) => a + t.load.ok, 0);
  const sum = (k: keyof CpuDelta) => turns.reduce((a, t) => a + t.cpu![k], 0);
  const server = sum('subject_ms') + sum('temporal_ms') + sum('postgres_ms');
  const others = sum('machine_busy_ms') - server - sum('client_ms');
  const elapsed_ms = turns.reduce((a, t) => a + t.load.elapsed_ms, 0);
  const per = (ms: number) => column((ms / gets).toFixed(2));
  return `  ${name.padEnd(NAME_WIDTH)}${[sum('subject_ms'), sum('temporal_ms'), sum('postgres_ms'), server, sum('client_ms'), others].map(per).join('')}${column(pct(sum('machine_busy_ms') / (elapsed_ms * cpus)))}`;
}

function readSeriesLines(title: string, series: ReadSeries[], cpus: number): string[] {
  const out: string[] = [];
  for (const x of series) {
    const f = readSeriesFigures(x);
    out.push(
      `  ${`${title}, ${x.concurrency} GETs in flight`.padEnd(NAME_WIDTH)} ${'GET/s'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'vs floor'.padStart(9)}`,
    );
    for (const s of ['floor', 'product'] as ReadSubject[]) out.push(figuresLine(READ_NAMES[s], f[s], f.floor));
    const ratios = x.rounds.map((r) => readFigures([r.product]).jobs_per_s / readFigures([r.floor]).jobs_per_s);
    out.push(
      `  ${"rounds' ratios".padEnd(NAME_WIDTH)} ${ratios.map(pct).join(', ')}; p99 ${(f.product.p99_ms / f.floor.p99_ms).toFixed(2)}x the floor's`,
    );
    const errors = x.rounds.flatMap((r) => [r.floor.load, r.product.load]).filter((l) => l.errors > 0);
    if (errors.length) out.push(`  errors: ${errors.reduce((a, l) => a + l.errors, 0)} (${errors[0]!.first_error})`);
    const cpu = (['floor', 'product'] as ReadSubject[]).map((s) =>
      readCpuLine(
        READ_NAMES[s],
        x.rounds.map((r) => r[s]),
        cpus,
      ),
    );
    if (cpu.every((l) => l !== null))
      out.push(`  ${'CPU ms per GET'.padEnd(NAME_WIDTH)}${CPU_COLUMNS.map(column).join('')}`, ...(cpu as string[]));
  }
  return out;
}

const loadFigures = (l: LoadResult): Figures => ({
  jobs_per_s: l.ok / (l.elapsed_ms / 1000),
  p50_ms: percentile(l.latencies_ms, 50),
  p99_ms: percentile(l.latencies_ms, 99),
});

function mixedFigures(m: NonNullable<StatusReads['mixed']>) {
  return {
    alone: loadFigures(pooled(m.rounds.map((r) => r.alone))),
    with_reads: loadFigures(pooled(m.rounds.map((r) => r.with_reads))),
    reads: loadFigures(pooled(m.rounds.map((r) => r.reads))),
  };
}

/**
 * CPU ms per create while the creates ran, alone and with the GETs (theirs included), and the servers'
 * CPU per create alone over with the GETs: what creates/s with reads would be, against alone, on a
 * machine the servers saturate and the clients do not share; unlike creates/s it does not move with
 * what else the machine runs.
 */
function mixedCpuLines(m: NonNullable<StatusReads['mixed']>, cpus: number): string[] {
  const alone = m.rounds.map((r) => ({ load: r.alone, cpu: r.alone_cpu }));
  const withReads = m.rounds.map((r) => ({ load: r.with_reads, cpu: r.with_reads_cpu }));
  const lines = [readCpuLine('creates alone', alone, cpus), readCpuLine('creates while GETs run', withReads, cpus)];
  if (lines.some((l) => l === null)) return [];
  const serverPerCreate = (turns: ReadTurn[]) =>
    turns.reduce((a, t) => a + t.cpu!.subject_ms + t.cpu!.temporal_ms + t.cpu!.postgres_ms, 0) / turns.reduce((a, t) => a + t.load.ok, 0);
  return [
    `  ${'CPU ms per create'.padEnd(NAME_WIDTH)}${CPU_COLUMNS.map(column).join('')}`,
    ...(lines as string[]),
    `    servers' CPU per create, alone over with GETs: ${pct(serverPerCreate(alone) / serverPerCreate(withReads))}`,
  ];
}

export function formatStatusReads(r: StatusReads): string {
  const out = [
    `6. Status reads: GETs of random pending jobs, the floor and the product taking turns of ${r.turn_s} s (${r.small.series[0]?.rounds.length ?? 0} rounds)`,
  ];
  out.push(...readSeriesLines(`${r.small.pending} pending`, r.small.series, r.cpus));
  if (r.mixed) {
    const f = mixedFigures(r.mixed);
    out.push(
      `  mixed load: creates (jobs of no generation delay: each also completes) at ${r.mixed.create_concurrency} in flight, without and with ${r.mixed.read_concurrency} product GETs in flight`,
      `    ${'creates alone'.padEnd(NAME_WIDTH - 2)} ${f.alone.jobs_per_s.toFixed(1).padStart(8)} ${f.alone.p50_ms.toFixed(1).padStart(8)} ${f.alone.p99_ms.toFixed(1).padStart(8)}`,
      `    ${'creates while GETs run'.padEnd(NAME_WIDTH - 2)} ${f.with_reads.jobs_per_s.toFixed(1).padStart(8)} ${f.with_reads.p50_ms.toFixed(1).padStart(8)} ${f.with_reads.p99_ms.toFixed(1).padStart(8)} ${pct(f.with_reads.jobs_per_s / f.alone.jobs_per_s).padStart(9)}`,
      `    ${'the GETs meanwhile'.padEnd(NAME_WIDTH - 2)} ${f.reads.jobs_per_s.toFixed(1).padStart(8)} ${f.reads.p50_ms.toFixed(1).padStart(8)} ${f.reads.p99_ms.toFixed(1).padStart(8)}`,
      `    rounds' ratios: ${r.mixed.rounds.map((m) => pct(loadFigures(m.with_reads).jobs_per_s / loadFigures(m.alone).jobs_per_s)).join(', ')}`,
    );
    out.push(...mixedCpuLines(r.mixed, r.cpus));
  }
  if (r.large) {
    out.push(...readSeriesLines(`${r.large.pending} pending`, r.large.series, r.cpus));
    const l = loadFigures(r.large.list.load);
    out.push(
      `  list of pending jobs (GET ?status=pending&limit=100), ${r.large.pending} pending: ${l.jobs_per_s.toFixed(1)} lists/s (${(l.jobs_per_s * 100).toFixed(0)} jobs/s), p50 ${l.p50_ms.toFixed(1)} ms, p99 ${l.p99_ms.toFixed(1)} ms`,
    );
  }
  out.push(
    `  RSS of the API + worker process: before ${r.memory_before.map((m) => mib(m.rss_bytes)).join(', ')} MiB -> steady ${mib(r.steady_before_bytes)} MiB`,
  );
  if (r.memory_after && r.steady_after_bytes !== null && r.large) {
    out.push(
      `    with ${r.large.pending} pending, after their reads: ${r.memory_after.map((m) => mib(m.rss_bytes)).join(', ')} MiB -> steady ${mib(r.steady_after_bytes)} MiB: ` +
        `growth ${mib(r.steady_after_bytes - r.steady_before_bytes)} MiB (target <= ${RSS_GROWTH_TARGET_MIB} MiB for ${RSS_TARGET_PENDING.toLocaleString('en')})`,
    );
  }
  out.push('');
  return out.join('\n');
}

function readSummaryRows(r: StatusReads): [string, string, string][] {
  const rows: [string, string, string][] = [];
  const add = (pending: number, series: ReadSeries[]) => {
    for (const x of series) {
      const f = readSeriesFigures(x);
      rows.push([
        `GETs of pending jobs vs the row-read floor, ${pending} pending, C=${x.concurrency}`,
        `${f.product.jobs_per_s.toFixed(0)} vs ${f.floor.jobs_per_s.toFixed(0)} GET/s = ${pct(f.product.jobs_per_s / f.floor.jobs_per_s)}; p99 ${ms(f.product.p99_ms)} vs ${ms(f.floor.p99_ms)} ms = ${(f.product.p99_ms / f.floor.p99_ms).toFixed(2)}x`,
        `>= ${pct(READ_TARGET_RATIO)}; p99 <= ${READ_P99_TARGET_FACTOR}x`,
      ]);
    }
  };
  add(r.small.pending, r.small.series);
  if (r.mixed) {
    const f = mixedFigures(r.mixed);
    rows.push([
      `creates/s while GETs run at C=${r.mixed.read_concurrency}, vs without`,
      `${f.with_reads.jobs_per_s.toFixed(1)} vs ${f.alone.jobs_per_s.toFixed(1)} creates/s = ${pct(f.with_reads.jobs_per_s / f.alone.jobs_per_s)}; create p99 ${ms(f.with_reads.p99_ms)} vs ${ms(f.alone.p99_ms)} ms`,
      `>= ${pct(MIXED_TARGET_RATIO)}`,
    ]);
  }
  if (r.large) add(r.large.pending, r.large.series);
  if (r.large && r.steady_after_bytes !== null) {
    rows.push([
      `API+worker RSS growth, ${r.large.pending} pending (after their reads)`,
      `${mib(r.steady_before_bytes)} -> ${mib(r.steady_after_bytes)} MiB = +${mib(r.steady_after_bytes - r.steady_before_bytes)} MiB`,
      `<= ${RSS_GROWTH_TARGET_MIB} MiB for ${RSS_TARGET_PENDING.toLocaleString('en')}`,
    ]);
  }
  return rows;
}

export interface Summary {
  reads?: StatusReads;
  creates?: CreateThroughput;
  history?: HistoryEvents;
  seen?: DoneToSeen[];
  rss?: PendingRss;
  code_lines?: CodeLines;
}

const ms = (x: number) => x.toFixed(0);

/** The product's and the floor's jobs/s, their ratio, and the latency of both. */
function versusFloor(product: Figures, floor: Figures): string {
  return `${product.jobs_per_s.toFixed(1)} vs ${floor.jobs_per_s.toFixed(1)} jobs/s = ${pct(product.jobs_per_s / floor.jobs_per_s)}; p50/p99 ${ms(product.p50_ms)}/${ms(product.p99_ms)} vs ${ms(floor.p50_ms)}/${ms(floor.p99_ms)} ms`;
}

/** Each measure, the figure of this run, the project's target. */
export function formatSummary(all: Summary): string {
  const rows: [string, string, string][] = [];
  const rounds = all.creates?.rounds;
  if (rounds) {
    const f = figuresOverRounds(rounds, CREATE_SUBJECTS);
    rows.push([
      'creates vs the floor, jobs left pending (product vs floor)',
      `${versusFloor(f.product, f.floor)}; keyed ${pct(f.product_keyed.jobs_per_s / f.floor.jobs_per_s)}; bare Express ${f.bare.jobs_per_s.toFixed(0)} jobs/s`,
      `>= ${pct(CREATE_TARGET_RATIO)}`,
    ]);
    // On a machine the creates saturate, throughput is bounded by the CPU a create costs: a figure the
    // floor's occasional stalls (its p99) do not move, unlike jobs/s.
    const [product, floor] = [serverCpuPerJob(rounds.map((round) => round.product)), serverCpuPerJob(rounds.map((round) => round.floor))];
    if (product && floor)
      rows.push([
        "  servers' CPU per create (subject+Temporal+Postgres)",
        `product ${product.sum.toFixed(1)} ms vs floor ${floor.sum.toFixed(1)} ms: floor/product = ${pct(floor.sum / product.sum)}`,
        '',
      ]);
  }
  const whole = all.creates?.whole_rounds;
  if (whole) {
    const f = figuresOverRounds(whole, WHOLE_JOB_SUBJECTS);
    const tail = wholeJobTail(whole);
    rows.push([
      'creates vs the floor, every job also completes (whole jobs)',
      `${versusFloor(f.product, f.floor)}; product's creates alone ${tail.creates_per_s.toFixed(1)} jobs/s, last settled ${s(tail.tail_ms)} s after the last create`,
      `>= ${pct(WHOLE_JOB_TARGET_RATIO)}`,
    ]);
    rows.push([
      'whole jobs vs the bare engine running the same job shape',
      `${f.product.jobs_per_s.toFixed(1)} vs ${f.engine.jobs_per_s.toFixed(1)} jobs/s = ${engineRatio(whole)}; p50/p99 ${ms(f.product.p50_ms)}/${ms(f.product.p99_ms)} vs ${ms(f.engine.p50_ms)}/${ms(f.engine.p99_ms)} ms`,
      `>= ${pct(WHOLE_JOB_ENGINE_TARGET_RATIO)} (report)`,
    ]);
    const [product, floor] = [serverCpuPerJob(whole.map((round) => round.product)), serverCpuPerJob(whole.map((round) => round.floor))];
    if (product && floor) {
      const cpu = (c: NonNullable<typeof product>) =>
        `API+worker ${c.subject.toFixed(1)}, Temporal ${c.temporal.toFixed(1)}, PostgreSQL ${c.postgres.toFixed(1)} ms`;
      rows.push(['  CPU of one whole job', `${cpu(product)} (floor: ${cpu(floor)})`, 'printed']);
    }
  }
  if (all.history) {
    rows.push([
      'history events of one job',
      all.history.jobs.map((j) => `${j.events} for ${j.generation_s} s (${j.provider_polls} polls)`).join(', '),
      `<= ${HISTORY_TARGET_EVENTS}`,
    ]);
  }
  if (all.seen) {
    const delays = [...new Set(all.seen.map((j) => j.generation_s))].join('/');
    rows.push([
      'provider done -> GET shows it, polled (max)',
      `${s(maxSeenMs(all.seen, 'polled'))} s over ${delays} s jobs`,
      `<= ${s(SEEN_TARGET_MS)} s`,
    ]);
    rows.push([
      'provider done -> GET shows it, callback (max)',
      `${s(maxSeenMs(all.seen, 'callback'))} s over ${delays} s jobs (nudgePoll at done; no HTTP verification)`,
      `<= ${s(SEEN_CALLBACK_TARGET_MS)} s`,
    ]);
  }
  if (all.rss) {
    const per1000 = pendingCpuPer1000(all.rss);
    if (per1000) {
      rows.push([
        `Temporal CPU per 1,000 pending jobs (${all.rss.pending} pending)`,
        `${per1000.temporal_ms.toFixed(1)} ms/s`,
        `<= ${PENDING_TEMPORAL_TARGET_MS_PER_S} ms/s`,
      ]);
      rows.push([
        `API+worker CPU per 1,000 pending jobs (${all.rss.pending} pending)`,
        `${per1000.subject_ms.toFixed(1)} ms/s`,
        `<= ${PENDING_SUBJECT_TARGET_MS_PER_S} ms/s`,
      ]);
    }
    rows.push([
      `API+worker RSS growth, ${all.rss.pending} pending jobs`,
      `${mib(all.rss.steady_before_bytes)} -> ${mib(all.rss.steady_after_bytes)} MiB = +${mib(all.rss.steady_after_bytes - all.rss.steady_before_bytes)} MiB`,
      `<= ${RSS_GROWTH_TARGET_MIB} MiB for ${RSS_TARGET_PENDING.toLocaleString('en')}`,
    ]);
  }
  if (all.reads) rows.push(...readSummaryRows(all.reads));
  if (all.code_lines) {
    rows.push([
      'lines of workflows/ + activities/',
      `${all.code_lines.total} (${[...all.code_lines.by_folder].map(([f, n]) => `${f}/ ${n}`).join(', ')})`,
      'a number a reader can hold',
    ]);
  }
  const w0 = Math.max(...rows.map((r) => r[0].length), 7);
  const w1 = Math.max(...rows.map((r) => r[1].length), 8);
  return [
    'summary: each figure of this run next to its target',
    `  ${'measure'.padEnd(w0)}  ${'this run'.padEnd(w1)}  target`,
    ...rows.map(([a, b, c]) => `  ${a.padEnd(w0)}  ${b.padEnd(w1)}  ${c}`),
    '',
  ].join('\n');
}

/** The targets' figures of the dev server's run and temporal-server's, side by side. */
export function formatEngines(dev: Summary, server: Summary): string {
  const rows: [string, string, string][] = [];
  const whole = (x: Summary) => {
    if (!x.creates?.whole_rounds) return '-';
    const f = figuresOverRounds(x.creates.whole_rounds, WHOLE_JOB_SUBJECTS);
    return `${f.product.jobs_per_s.toFixed(1)} vs floor ${f.floor.jobs_per_s.toFixed(1)} = ${pct(f.product.jobs_per_s / f.floor.jobs_per_s)}`;
  };
  rows.push(['whole jobs/s, product vs the engine floor (phase 5)', whole(dev), whole(server)]);
  const creates = (x: Summary) => {
    if (!x.creates?.rounds) return '-';
    const f = figuresOverRounds(x.creates.rounds, CREATE_SUBJECTS);
    return `${ms(f.product.p50_ms)} / ${ms(f.product.p99_ms)} ms (floor ${ms(f.floor.p50_ms)} / ${ms(f.floor.p99_ms)})`;
  };
  rows.push(['create p50 / p99, jobs left pending', creates(dev), creates(server)]);
  const seen = (x: Summary, path: CompletionPath) => (x.seen ? `${s(maxSeenMs(x.seen, path))} s (max)` : '-');
  rows.push(['done -> seen, polled provider', seen(dev, 'polled'), seen(server, 'polled')]);
  rows.push(['done -> seen, provider callback', seen(dev, 'callback'), seen(server, 'callback')]);
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length), 'dev server (SQLite)'.length);
  return [
    'the engines side by side (printed, never asserted)',
    `  ${'measure'.padEnd(w0)}  ${'dev server (SQLite)'.padEnd(w1)}  temporal-server (PostgreSQL, mTLS)`,
    ...rows.map(([a, b, c]) => `  ${a.padEnd(w0)}  ${b.padEnd(w1)}  ${c}`),
    '',
  ].join('\n');
}

/** Phase 7: the status read on the bench's own Node and on the other line, each beside the floor. */
export function formatNodeVersions(r: NodeVersions): string {
  const names: Record<NodeSubject, string> = {
    floor: `floor (${r.this_version}): Express + key lookup + job row read`,
    this_node: `product GET on ${r.this_version}`,
    other_node: `product GET on ${r.other_version}`,
  };
  const out = [
    `== phase 7: status reads on two Node lines (${r.pending} pending, turns of ${r.turn_s} s; the floor on the bench's Node) ==`,
  ];
  for (const x of r.series) {
    const f = (s: NodeSubject) => readFigures(x.rounds.map((round) => round[s]));
    const floor = f('floor');
    out.push(
      `  ${`${x.concurrency} GETs in flight`.padEnd(NAME_WIDTH)} ${'GET/s'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'vs floor'.padStart(9)}`,
    );
    for (const s of ['floor', 'this_node', 'other_node'] as NodeSubject[])
      out.push(figuresLine(names[s], f(s), s === 'floor' ? null : floor));
    const errors = x.rounds.flatMap((round) => Object.values(round).map((t) => t.load)).filter((l) => l.errors > 0);
    if (errors.length) out.push(`  errors: ${errors.reduce((a, l) => a + l.errors, 0)} (${errors[0]!.first_error})`);
  }
  return `${out.join('\n')}\n`;
}
