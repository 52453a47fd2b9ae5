// `npm run bench`: one run against one PostgreSQL and one Temporal dev server it starts itself (as the
// tests do), printing the project's performance figures side by side with their targets. Figures are
// printed, never asserted. See bench/README.md for what each figure means and how to run the long variants.
import { startInfra } from '../test/helpers/infra.js';
import { loadConfig } from '../src/config.js';
import { loadBenchConfig } from './bench-config.js';
import { describeEnvironment } from './environment.js';
import { benchCreates } from './create-throughput.js';
import { benchHistoryEvents } from './history-events.js';
import { benchDoneToSeen } from './done-to-seen.js';
import { benchPendingRss } from './pending-rss.js';
import { benchStatusReads } from './status-reads.js';
import { formatCreates, formatHeader, formatHistory, formatRss, formatSeen, formatStatusReads, formatSummary, formatWholeJobs, type Summary } from './report.js';
import { codeLines } from './code-size.js';
import { progressLog } from './log.js';

async function main() {
  const cfg = loadBenchConfig();
  const log = progressLog();
  const print = (text: string) => process.stdout.write(`${text}\n`);
  log('starting PostgreSQL and the Temporal dev server');
  const infra = await startInfra('vva-bench-');
  Object.assign(process.env, infra.env); // read by test/helpers/stack.ts (the subjects' databases)
  const all: Summary = {};
  try {
    const environment = await describeEnvironment(infra);
    print(formatHeader(environment, cfg, loadConfig(process.env)));
    // Phases 1 and 5 share their subject processes: they run one after the other.
    if (cfg.BENCH_PHASES.has(1) || cfg.BENCH_PHASES.has(5)) {
      all.creates = await benchCreates(infra, cfg, log);
      if (all.creates.rounds) print(formatCreates(all.creates, cfg, environment.cpus));
      if (all.creates.whole_rounds) print(formatWholeJobs(all.creates, cfg, environment.cpus));
    }
    // Phases 2 and 3 mostly wait for simulated generations: they run side by side, each on a product
    // process and database of its own.
    await Promise.all([
      cfg.BENCH_PHASES.has(2) ? benchHistoryEvents(infra, cfg, log).then((h) => (all.history = h)) : null,
      cfg.BENCH_PHASES.has(3) ? benchDoneToSeen(infra, cfg, log).then((seen) => (all.seen = seen)) : null,
    ]);
    if (all.history) print(formatHistory(all.history));
    if (all.seen) print(formatSeen(all.seen));
    if (cfg.BENCH_PHASES.has(4)) {
      all.rss = await benchPendingRss(infra, cfg, log);
      print(formatRss(all.rss));
    }
    if (cfg.BENCH_PHASES.has(6)) {
      all.reads = await benchStatusReads(infra, cfg, log);
      print(formatStatusReads(all.reads));
    }
    all.code_lines = codeLines();
    print(formatSummary(all));
  } finally {
    log('stopping PostgreSQL and Temporal');
    await infra.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
