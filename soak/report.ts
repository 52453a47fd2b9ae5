// The soak's bookkeeping and verdict, pure (no I/O): what each route answered and how fast, the faults
// injected, the money invariant of a workspace, and the printed table whose last line is
// `soak: PASS` or `soak: FAIL <reasons>`.

/** What one request ended as: an HTTP status, or no answer at all (refused, reset, timed out). */
export type Outcome = number | 'no_answer';

interface RouteStats {
  count: number;
  byClass: Map<string, number>;
  latencies_ms: number[];
}

/** The status classes the table has a column for, in order. */
export const STATUS_COLUMNS = ['2xx', '4xx', '429', '503', '5xx', 'no_answer'] as const;

export function statusClass(outcome: Outcome): (typeof STATUS_COLUMNS)[number] {
  if (outcome === 'no_answer') return 'no_answer';
  if (outcome === 429) return '429';
  if (outcome === 503) return '503';
  if (outcome >= 500) return '5xx';
  if (outcome >= 400) return '4xx';
  return '2xx';
}

/** The q-quantile (0..1) of `values` by the nearest-rank method; NaN for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1]!;
}

export class RequestLog {
  private readonly routes = new Map<string, RouteStats>();
  /** Every answer of 5xx other than 503: each is a defect (a crash or an unmapped error). */
  readonly serverErrors: { route: string; status: number; body: string }[] = [];

  record(route: string, outcome: Outcome, latency_ms: number, body = ''): void {
    let s = this.routes.get(route);
    if (!s) this.routes.set(route, (s = { count: 0, byClass: new Map(), latencies_ms: [] }));
    s.count++;
    const cls = statusClass(outcome);
    s.byClass.set(cls, (s.byClass.get(cls) ?? 0) + 1);
    // Latency of answered requests only: a refused connection says nothing about the service's speed.
    if (outcome !== 'no_answer') s.latencies_ms.push(latency_ms);
    if (cls === '5xx') this.serverErrors.push({ route, status: outcome as number, body: body.slice(0, 300) });
  }

  total(): number {
    let n = 0;
    for (const s of this.routes.values()) n += s.count;
    return n;
  }

  rows(): { route: string; count: number; byClass: Record<string, number>; p50_ms: number; p99_ms: number }[] {
    return [...this.routes.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([route, s]) => ({
        route,
        count: s.count,
        byClass: Object.fromEntries(STATUS_COLUMNS.map((c) => [c, s.byClass.get(c) ?? 0])),
        p50_ms: quantile(s.latencies_ms, 0.5),
        p99_ms: quantile(s.latencies_ms, 0.99),
      }));
  }
}

export interface Fault {
  target: string;
  down_ms: number;
  /** How long its restart took until it was ready again. */
  restart_ms: number;
}

/** What a workspace's money must satisfy at the end, from the API's own records and what the soak credited. */
export interface WorkspaceMoney {
  name: string;
  /** Sum of the top-ups the admin API confirmed (initial credits included). */
  credited_micro_eur: number;
  /** Sum of the credit entries of the workspace's ledger statement. */
  ledger_credits_micro_eur: number;
  /** Each job's cost as the API reports it once terminal: the live list plus the jobs the soak deleted. */
  job_costs_micro_eur: readonly number[];
  /** Charges minus refunds of the ledger entries tied to no job (speech; anything else that is charged). */
  other_net_charges_micro_eur: number;
  /** The balance the admin API reports. */
  balance_micro_eur: number;
  /** Jobs still pending after the drain. */
  pending_jobs: number;
  /** Ids of jobs a create answered 202 for that the API no longer knows, although the soak never deleted them. */
  lost_jobs: readonly string[];
}

/** Reasons this workspace's money is wrong; none when it is exact. */
export function moneyProblems(w: WorkspaceMoney): string[] {
  const problems: string[] = [];
  if (w.pending_jobs > 0) problems.push(`${w.name}: ${w.pending_jobs} job(s) still pending`);
  if (w.lost_jobs.length > 0)
    problems.push(`${w.name}: ${w.lost_jobs.length} accepted job(s) lost (${w.lost_jobs.slice(0, 3).join(', ')})`);
  if (w.ledger_credits_micro_eur !== w.credited_micro_eur) {
    problems.push(`${w.name}: ledger credits ${w.ledger_credits_micro_eur} != credited ${w.credited_micro_eur} micro-EUR`);
  }
  const job_costs = w.job_costs_micro_eur.reduce((s, c) => s + c, 0);
  const expected = w.credited_micro_eur - job_costs - w.other_net_charges_micro_eur;
  if (w.balance_micro_eur !== expected) {
    problems.push(
      `${w.name}: balance ${w.balance_micro_eur} != credits ${w.credited_micro_eur} - job costs ${job_costs} - other charges ${w.other_net_charges_micro_eur} = ${expected} micro-EUR`,
    );
  }
  return problems;
}

/** The verdict line: the soak's last line. */
export function verdictLine(reasons: readonly string[]): string {
  return reasons.length === 0 ? 'soak: PASS' : `soak: FAIL ${reasons.join('; ')}`;
}

const ms = (v: number) => (Number.isNaN(v) ? '-' : String(Math.round(v)));

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** A log's table: a row per route (or whatever it was keyed by, named in `first`). */
export function requestTable(log: RequestLog, first = 'route'): string {
  return table(
    [first, 'requests', ...STATUS_COLUMNS, 'p50 ms', 'p99 ms'],
    log.rows().map((r) => [r.route, String(r.count), ...STATUS_COLUMNS.map((c) => String(r.byClass[c])), ms(r.p50_ms), ms(r.p99_ms)]),
  );
}

/** The printed report: requests per route, faults per target, then the given summary lines. */
export function formatReport(log: RequestLog, faults: readonly Fault[], summary: readonly string[]): string {
  const requests = requestTable(log);
  const targets = [...new Set(faults.map((f) => f.target))].sort();
  const faultTable = table(
    ['fault (SIGKILL, restart)', 'count', 'down s total', 'longest down s', 'restart p50 ms', 'restart max ms'],
    targets.map((t) => {
      const fs = faults.filter((f) => f.target === t);
      const down = fs.map((f) => f.down_ms);
      const restart = fs.map((f) => f.restart_ms);
      return [
        t,
        String(fs.length),
        (down.reduce((s, d) => s + d, 0) / 1000).toFixed(1),
        (Math.max(...down) / 1000).toFixed(1),
        ms(quantile(restart, 0.5)),
        ms(Math.max(...restart)),
      ];
    }),
  );
  return [requests, `total requests: ${log.total()}`, '', faultTable, `total faults: ${faults.length}`, '', ...summary].join('\n');
}
