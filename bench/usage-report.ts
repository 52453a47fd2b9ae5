// Phase 10's section of the report: usage reads beside a job's row read at each size, and the charge's
// throughput with and without the usage triggers.
import { median, percentile, pooled, type LoadResult } from './load.js';
import { USAGE_READS, type UsageBench, type UsageRead, type UsageStep } from './usage.js';

/** Targets: a 90-day usage read at p50 <= 5x and p99 <= 10x a row read; charges with the rollups >= 95 % of without. */
export const USAGE_P50_TARGET_X = 5;
export const USAGE_P99_TARGET_X = 10;
export const USAGE_CHARGE_TARGET = 0.95;

const READ_NAMES: Record<UsageRead, string> = {
  row: 'GET /v2/videos/generations/{id} (a row)',
  by_model: 'GET /v2/usage 90 days by day, model',
  by_key: 'GET /v2/usage 90 days by day, api_key',
};

const p = (l: LoadResult, q: number) => percentile(l.latencies_ms, q);
const perS = (l: LoadResult) => l.ok / (l.elapsed_ms / 1000);

export function usageRatios(step: UsageStep, read: 'by_model' | 'by_key') {
  return { p50_x: p(step.reads[read], 50) / p(step.reads.row, 50), p99_x: p(step.reads[read], 99) / p(step.reads.row, 99) };
}

export function chargeRatio(charges: UsageBench['charges']): number {
  return perS(pooled(charges.rounds.map((r) => r.with_triggers))) / perS(pooled(charges.rounds.map((r) => r.without_triggers)));
}

export const formatUsageSample = (sample: UsageBench['sample']): string =>
  [
    '8. Usage at scale (one workspace, 4 API keys, requests spread over 90 days; reads one at a time, in turns)',
    `  sample (${sample.entries} entries, ${sample.requests} requests, triggers on): ${sample.compared?.groups} rollup rows, ` +
      `${sample.compared?.differing} differ from the grouped count; ledger audit ${sample.audit_ok ? 'holds' : `FAILS: ${sample.audit}`}`,
  ].join('\n');

export function formatUsageCharges(charges: UsageBench['charges']): string {
  const lines = [`  charges (chargeVideoJob, ${charges.concurrency} in flight, one workspace per turn):`];
  charges.rounds.forEach((r, i) =>
    lines.push(
      `    round ${i + 1}: with the usage triggers ${perS(r.with_triggers).toFixed(0)}/s (p50 ${p(r.with_triggers, 50).toFixed(1)} ms), ` +
        `without ${perS(r.without_triggers).toFixed(0)}/s (p50 ${p(r.without_triggers, 50).toFixed(1)} ms)` +
        `${r.with_triggers.errors + r.without_triggers.errors > 0 ? `, errors: ${r.with_triggers.first_error ?? r.without_triggers.first_error}` : ''}`,
    ),
  );
  lines.push(`    all rounds: with / without = ${(chargeRatio(charges) * 100).toFixed(1)} % (target >= ${USAGE_CHARGE_TARGET * 100} %)`);
  // One turn that the machine's other work slowed moves the pooled figure; the rounds' own ratios show it.
  const ratios = charges.rounds.map((r) => perS(r.with_triggers) / perS(r.without_triggers));
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  lines.push(
    `    each round's with / without, median ${pct(median(ratios))} (from ${pct(Math.min(...ratios))} to ${pct(Math.max(...ratios))})`,
  );
  return lines.join('\n');
}

export function formatUsageStep(step: UsageStep): string {
  const lines = [
    `  ${step.entries.toLocaleString('en')} ledger entries (${step.requests.toLocaleString('en')} requests, ${step.rollup_rows.toLocaleString('en')} hourly, ${step.daily_rows.toLocaleString('en')} daily and ${step.model_rows.toLocaleString('en')} daily by model rollup rows; written in ${(step.write_ms / 1000).toFixed(0)} s):`,
  ];
  for (const read of USAGE_READS) {
    const l = step.reads[read];
    let ratio = '';
    if (read !== 'row') {
      const x = usageRatios(step, read);
      ratio = `  p50 ${x.p50_x.toFixed(1)}x (target <= ${USAGE_P50_TARGET_X}x), p99 ${x.p99_x.toFixed(1)}x (target <= ${USAGE_P99_TARGET_X}x)`;
    }
    lines.push(
      `    ${READ_NAMES[read].padEnd(44)} p50 ${p(l, 50).toFixed(1).padStart(6)} ms  p99 ${p(l, 99).toFixed(1).padStart(6)} ms  (${l.ok} reads, ${l.errors} errors${l.first_error ? `: ${l.first_error}` : ''})${ratio}`,
    );
  }
  lines.push('    plan of the by-model read (EXPLAIN ANALYZE):', ...step.plan.split('\n').map((l) => `      ${l}`));
  return lines.join('\n');
}
