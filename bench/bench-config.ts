// The benchmark's own settings (BENCH_*), validated like the service's configuration: bounded, with
// units in the names. The service under test keeps its defaults (see bench/subject-env.ts).
import { z } from 'zod';
import { ConfigError } from '../src/config-error.js';

const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
/** A comma-separated list of 1 to `count_max` whole numbers, each within [min, max]. */
const intList = (min: number, max: number, count_max: number, what: string) =>
  z.string().transform((s, ctx) => {
    const list = s.split(',').map((x) => Number(x.trim()));
    if (list.length === 0 || list.length > count_max || list.some((n) => !Number.isInteger(n) || n < min || n > max)) {
      ctx.addIssue({ code: 'custom', message: `a comma-separated list of 1 to ${count_max} ${what}, each ${min}..${max}` });
      return z.NEVER;
    }
    return list;
  });
const secondsList = intList(1, 3_000, 20, 'whole seconds');

/**
 * 1 creates with jobs left pending, 2 history events, 3 done -> seen, 4 pending jobs' memory and CPU, 5 whole jobs,
 * 6 status reads, 7 status reads on two Node lines, 8 speech latency, 9 one batch against the same requests as
 * creates, 10 usage at scale.
 */
const PHASES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
/** Phases by name, for `npm run bench -- usage` (several names: those phases). */
export const PHASE_NAMES: Record<string, number> = { speech: 8, batch: 9, usage: 10 };
const concurrencyList = intList(1, 500, 8, 'concurrencies');

const BenchEnv = z.object({
  /** Creates (phase 1) or whole jobs (phase 5) measured per subject and round. */
  BENCH_JOBS: intFrom(10, 100_000).default(200),
  /** Requests in flight at once (phases 1 and 4). */
  BENCH_CONCURRENCY: intFrom(1, 500).default(20),
  /** Creates sent to each subject before measuring it. */
  BENCH_WARMUP: intFrom(0, 10_000).default(40),
  /**
   * Creates a subject gets at the start of each of its turns, not measured: every subject is measured
   * warm. (A subject's first burst after the others' turns is slower: the floor measured twice in a row
   * ran 3-12 % faster the second time, which favoured whichever subject followed itself.)
   */
  BENCH_PRIMER: intFrom(0, 10_000).default(40),
  /** Rounds of phases 1 and 5; the subjects take turns in each, so drift on a shared machine hits them all. */
  BENCH_ROUNDS: intFrom(1, 20).default(6),
  /** The long simulated generation of phase 2 (1800 = 30 minutes). */
  BENCH_LONG_GENERATION_S: intFrom(2, 3_000).default(180),
  /** Simulated generation times of phase 3 (done -> seen). */
  BENCH_SEEN_DELAYS_S: secondsList.default([7, 23, 61, 180]),
  /** Pending jobs of phase 4 (RSS). */
  BENCH_PENDING: intFrom(10, 100_000).default(2_000),
  /**
   * `on`: phases 1, 3 and 5 run a second time on the production topology (temporal-server with its
   * stores on the run's PostgreSQL, frontend mTLS), printed beside the dev server's; skipped, saying so,
   * when temporal-server is not built. `off`: the dev server only.
   */
  BENCH_TEMPORAL_SERVER: z.enum(['on', 'off']).default('on'),
  /** Phase 6: jobs pending while status reads are measured, then the larger number they grow to (0: not grown). */
  BENCH_READ_PENDING: intFrom(10, 100_000).default(500),
  BENCH_READ_PENDING_LARGE: intFrom(0, 100_000).default(10_000),
  /** Phase 6: GETs in flight, one series per value. */
  BENCH_READ_CONCURRENCY: concurrencyList.default([32, 96]),
  /**
   * Phase 6: seconds of each read turn, and rounds (the floor and the product take turns in each). Many
   * short turns rather than a few long ones: with thousands of jobs pending, the servers' periodic work
   * (Temporal's, PostgreSQL's, the product's poller) comes in bursts of seconds, and a burst that falls in
   * one long turn moved a round's ratio by 10 to 20 points; spread over more turns it hits both subjects.
   */
  BENCH_READ_S: intFrom(2, 600).default(6),
  BENCH_READ_ROUNDS: intFrom(1, 20).default(4),
  /**
   * Phase 7: the Node binary the product runs on beside the bench's own (the other LTS line); unset = Node 24
   * from scripts/install-node24.sh's cache when the bench runs on an older Node, else the machine's `node`
   * on PATH when it is older than the bench's. Skipped, saying so, when neither is there.
   */
  BENCH_OTHER_NODE: z.string().optional(),
  /** Phase 9: video requests of the batch, and as many individual creates beside it. */
  BENCH_BATCH_REQUESTS: intFrom(10, 10_000).default(10_000),
  /** Phase 9: the simulated generation of each of those videos. */
  BENCH_BATCH_DELAY_MS: intFrom(0, 600_000).default(1_000),
  /** Phase 9: the creating client's requests in flight (each retries on the pending limit's 429); unset: the limit. */
  BENCH_BATCH_CLIENTS: intFrom(1, 500).optional(),
  /**
   * Phase 10: the workspace's ledger entries after each step (ascending; the usage reads are measured after
   * each). Each 10 million take about 6 GB of disk (rows and indexes) and several minutes to write.
   */
  BENCH_USAGE_ENTRIES: intList(1_000, 100_000_000, 10, 'entry counts')
    .refine((l) => l.every((n, i) => i === 0 || n > l[i - 1]!), 'ascending')
    .default([1_000_000, 3_000_000, 10_000_000]),
  /** Phase 10: requests of each read measured per step (one at a time). */
  BENCH_USAGE_READS: intFrom(10, 100_000).default(300),
  /** Phase 10: charges per turn, with and without the usage triggers. */
  BENCH_USAGE_CHARGES: intFrom(100, 1_000_000).default(3_000),
  /** Phases to run, for a partial run: any of 1,2,3,4,5,6,7,8,9,10 (or by name: `npm run bench -- usage`). */
  BENCH_PHASES: z
    .string()
    .default('1,2,3,4,5,6,7,8,9,10')
    .transform((s, ctx) => {
      const phases = s.split(',').map((x) => Number(x.trim()));
      if (phases.some((n) => !PHASES.includes(n))) {
        ctx.addIssue({ code: 'custom', message: `a comma-separated list of phases among ${PHASES.join(',')}` });
        return z.NEVER;
      }
      return new Set(phases);
    }),
});

export type BenchConfig = z.infer<typeof BenchEnv>;

export function loadBenchConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  const parsed = BenchEnv.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`${String(issue.path[0])}: ${issue.message}`);
  }
  return parsed.data;
}
