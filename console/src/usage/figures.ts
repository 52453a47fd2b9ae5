// The Usage screen's figures from the API's day rows, free of React and the DOM (the tests run them in
// Node): what a group is called, the chart's cost per day and group, each key's sums over the range. Money
// is added up in integer micro-euros, so that the sums are exact, and handed back in euros. Its imports
// name their `.js` file, as Node's module resolution wants (the bundler takes either).
import type { Usage } from '../api-types.js';
import { fromMicroEur, microEur } from '../format.js';

export type UsageRow = Usage['data'][number];
export type Counters = Usage['total'];

/** The groupings offered, by the API's `group_by` name. */
export const GROUPS = { model: 'Model', kind: 'Kind', backend: 'Backend', api_key: 'API key' } as const;
export type Group = keyof typeof GROUPS;

const DAY_S = 86_400;
export const COUNTS = ['requests', 'succeeded', 'failed', 'pending'] as const;
export const MONEY = ['charged_in_euro', 'refunded_in_euro', 'cost_in_euro'] as const;
export const OUTPUT = ['videos', 'video_seconds', 'characters'] as const;
export const COUNTERS = [...COUNTS, ...MONEY, ...OUTPUT];
const isMoney = (c: keyof Counters) => (MONEY as readonly string[]).includes(c);

/** What a row's group is called on the chart. */
export function groupName(row: UsageRow, group: Group): string {
  switch (group) {
    case 'model':
      return row.model ?? 'voice clones';
    case 'kind':
      return row.kind ?? 'unknown';
    case 'backend':
      return row.backend ?? 'none';
    case 'api_key':
      return row.api_key_id ? `key ${row.api_key_id.slice(0, 8)}` : 'no key';
  }
}

/** The days from `start` to `end` (excluded), as the Unix seconds of their midnights. */
export function daysBetween(start: number, end: number): number[] {
  const days: number[] = [];
  for (let d = start; d < end; d += DAY_S) days.push(d);
  return days;
}

/**
 * The chart's figures: the groups' names, sorted, and per day of the range (empty days included) the cost of
 * each group that day in euros, in the order of `names`.
 */
export function costByDay(usage: Usage, group: Group): { names: string[]; days: { start: number; cost: number[] }[] } {
  const names = [...new Set(usage.data.map((r) => groupName(r, group)))].sort();
  const index = new Map(names.map((n, i) => [n, i]));
  const micro = new Map<number, number[]>();
  for (const row of usage.data) {
    const day = micro.get(row.start) ?? names.map(() => 0);
    day[index.get(groupName(row, group))!]! += microEur(row.cost_in_euro);
    micro.set(row.start, day);
  }
  const days = daysBetween(usage.start, usage.end).map((start) => ({
    start,
    cost: (micro.get(start) ?? names.map(() => 0)).map(fromMicroEur),
  }));
  return { names, days };
}

/** The rows of each API key summed over the range (rows grouped by api_key), the keys by cost, most first. */
export function totalsByKey(usage: Usage): { key: string | null; counters: Counters }[] {
  const sums = new Map<string | null, Counters>();
  for (const row of usage.data) {
    const key = row.api_key_id ?? null;
    const sum = sums.get(key) ?? (Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Counters);
    for (const c of COUNTERS) sum[c] += isMoney(c) ? microEur(row[c]) : row[c];
    sums.set(key, sum);
  }
  return [...sums]
    .map(([key, sum]) => ({ key, counters: { ...sum, ...Object.fromEntries(MONEY.map((c) => [c, fromMicroEur(sum[c])])) } as Counters }))
    .sort((a, b) => b.counters.cost_in_euro - a.counters.cost_in_euro || b.counters.requests - a.counters.requests);
}
