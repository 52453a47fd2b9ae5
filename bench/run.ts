// `npm run bench`: one run against one PostgreSQL and one Temporal dev server it starts itself (as the
// tests do), printing the project's performance figures side by side with their targets. Figures are
// printed, never asserted. See bench/README.md for what each figure means and how to run the long variants.
import { startInfra } from '../test/helpers/infra.js';
import { loadConfig } from '../src/config.js';
import { loadBenchConfig, PHASE_NAMES } from './bench-config.js';
import { benchUsage } from './usage.js';
import { formatUsageCharges, formatUsageSample, formatUsageStep } from './usage-report.js';
import { describeEnvironment } from './environment.js';
import { benchCreates } from './create-throughput.js';
import { benchHistoryEvents } from './history-events.js';
import { benchDoneToSeen } from './done-to-seen.js';
import { benchPendingRss } from './pending-rss.js';
import { benchStatusReads } from './status-reads.js';
import { benchNodeVersions, otherNode } from './node-versions.js';
import { benchBatchVsCreates, formatBatchVsCreates } from './batch-vs-creates.js';
import {
  formatCreates,
  formatEngines,
  formatHeader,
  formatHistory,
  formatNodeVersions,
  formatRss,
  formatSeen,
  formatStatusReads,
  formatSummary,
  formatWholeJobs,
  type Summary,
} from './report.js';
import { startTemporalServer, temporalServerDir } from '../test/helpers/server-infra.js';
import type { Infra } from '../test/helpers/infra.js';
import type { BenchConfig } from './bench-config.js';
import type { Environment } from './environment.js';
import type { Log } from './log.js';
import { codeLines } from './code-size.js';
import { benchSpeechLatency, formatSpeechLatency } from './speech-latency.js';
import { progressLog } from './log.js';

async function main() {
  // `npm run bench -- usage`: the phases named on the command line only.
  const named = process.argv.slice(2);
  const unknown = named.filter((n) => !(n in PHASE_NAMES));
  if (unknown.length > 0) throw new Error(`unknown phase ${unknown.join(', ')}: name any of ${Object.keys(PHASE_NAMES).join(', ')}`);
  const cfg = loadBenchConfig(
    named.length > 0 ? { ...process.env, BENCH_PHASES: named.map((n) => PHASE_NAMES[n]).join(',') } : process.env,
  );
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
    if (cfg.BENCH_PHASES.has(7)) {
      const other = otherNode(cfg);
      if (typeof other === 'string') print(`== phase 7: status reads on two Node lines: skipped, ${other} ==\n`);
      else print(formatNodeVersions(await benchNodeVersions(infra, cfg, other, log)));
    }
    if (cfg.BENCH_PHASES.has(8)) print(formatSpeechLatency(await benchSpeechLatency(infra, log)));
    if (cfg.BENCH_PHASES.has(9)) print(formatBatchVsCreates(await benchBatchVsCreates(infra, cfg, log)));
    if (cfg.BENCH_PHASES.has(10)) {
      await benchUsage(infra, cfg, log, {
        sample: (x) => print(formatUsageSample(x)),
        charges: (x) => print(formatUsageCharges(x)),
        step: (x) => print(formatUsageStep(x)),
      });
      print('');
    }
    all.code_lines = codeLines();
    print(formatSummary(all));
    const onServer = await onTemporalServer(infra, cfg, environment, log, print);
    if (onServer) print(formatEngines(all, onServer));
  } finally {
    log('stopping PostgreSQL and Temporal');
    await infra.stop();
  }
}

/**
 * Phases 1, 5 and 3 again on the production topology: temporal-server (PostgreSQL stores on the run's
 * PostgreSQL, the frontend requiring mTLS), the subjects configured by Temporal's client variables.
 */
async function onTemporalServer(
  infra: Infra,
  cfg: BenchConfig,
  environment: Environment,
  log: Log,
  print: (text: string) => void,
): Promise<Summary | null> {
  const phases = [1, 3, 5].filter((p) => cfg.BENCH_PHASES.has(p));
  if (cfg.BENCH_TEMPORAL_SERVER === 'off' || phases.length === 0) return null;
  if (!temporalServerDir()) {
    print('on temporal-server: skipped, temporal-server is not built (bash scripts/install-temporal-server.sh)\n');
    return null;
  }
  log('starting temporal-server (PostgreSQL stores, frontend mTLS) on the same PostgreSQL');
  const server = await startTemporalServer({ root: infra.root, postgresUrl: infra.databaseUrl, databasePrefix: 'temporal_bench' });
  const serverInfra: Infra = { ...infra, temporalAddress: server.address, temporalEnv: server.clientEnv };
  const summary: Summary = {};
  try {
    print(`== the same phases on temporal-server 1.29 (PostgreSQL stores, frontend mTLS; ${server.address}) ==\n`);
    const serverCfg = { ...cfg, BENCH_PHASES: new Set(phases) };
    if (phases.includes(1) || phases.includes(5)) {
      summary.creates = await benchCreates(serverInfra, serverCfg, log);
      if (summary.creates.rounds) print(formatCreates(summary.creates, serverCfg, environment.cpus));
      if (summary.creates.whole_rounds) print(formatWholeJobs(summary.creates, serverCfg, environment.cpus));
    }
    if (phases.includes(3)) {
      summary.seen = await benchDoneToSeen(serverInfra, serverCfg, log);
      print(formatSeen(summary.seen));
    }
    return summary;
  } finally {
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
