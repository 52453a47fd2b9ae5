// BENCH_PROFILE=1: where a subject's time goes, measured inside its process without changing its code.
// Times every PostgreSQL statement (by its text), each wait for a pooled connection, each transaction
// (named by its first statement), and each update-with-start round trip to Temporal; the table is
// written to stderr when the subject stops. Installed before the subject starts (bench/subject-process.ts).
import pg from 'pg';
import { WorkflowClient } from '@temporalio/client';
import { percentile } from './load.js';

const spans = new Map<string, number[]>();
/** Distinct names kept at most (statements with literals inlined would otherwise grow it without bound). */
const NAMES_MAX = 500;
const NAME_CHARS_MAX = 90;

function record(name: string, ms: number): void {
  let list = spans.get(name);
  if (!list) {
    if (spans.size >= NAMES_MAX) return;
    spans.set(name, (list = []));
  }
  list.push(ms);
}

const statementName = (text: unknown) =>
  String(text ?? '?')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, NAME_CHARS_MAX);

type Callback = (err: unknown, ...rest: unknown[]) => void;

/** Calls `original`, timing it to its callback (last argument) or to its promise. */
function timed(original: (...args: unknown[]) => unknown, self: unknown, args: unknown[], done: (ms: number) => void): unknown {
  const t0 = performance.now();
  const last = args[args.length - 1];
  if (typeof last === 'function') {
    args[args.length - 1] = (...cbArgs: Parameters<Callback>) => {
      done(performance.now() - t0);
      return (last as Callback)(...cbArgs);
    };
    return original.apply(self, args);
  }
  const result = original.apply(self, args) as Promise<unknown> | undefined;
  if (result && typeof result.then === 'function') {
    result.then(
      () => done(performance.now() - t0),
      () => done(performance.now() - t0),
    );
  }
  return result;
}

interface TxState {
  __benchTx?: { started: number; name: string | null };
}

export function installTimings(): void {
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: pg.Client & TxState, ...args: unknown[]) {
    const first = args[0] as string | { text?: string };
    const text = typeof first === 'string' ? first : first?.text;
    const name = statementName(text);
    if (name === 'BEGIN') this.__benchTx = { started: performance.now(), name: null };
    else if (this.__benchTx && this.__benchTx.name === null) this.__benchTx.name = name;
    const tx = this.__benchTx;
    return timed(query, this, args, (ms) => {
      record(`sql  ${name}`, ms);
      if (tx && (name === 'COMMIT' || name === 'ROLLBACK')) {
        record(`tx   ${tx.name} ... ${name}`, performance.now() - tx.started);
        if (this.__benchTx === tx) delete this.__benchTx;
      }
    });
  } as typeof pg.Client.prototype.query;

  const connect = pg.Pool.prototype.connect as (...args: unknown[]) => unknown;
  pg.Pool.prototype.connect = function (this: pg.Pool, ...args: unknown[]) {
    return timed(connect, this, args, (ms) => record('pool wait for a connection', ms));
  } as typeof pg.Pool.prototype.connect;

  const updateWithStart = WorkflowClient.prototype.executeUpdateWithStart as (...args: unknown[]) => unknown;
  WorkflowClient.prototype.executeUpdateWithStart = function (this: WorkflowClient, ...args: unknown[]) {
    return timed(updateWithStart, this, args, (ms) => record('temporal executeUpdateWithStart (round trip)', ms));
  } as typeof WorkflowClient.prototype.executeUpdateWithStart;
}

/** The table: per name, count, mean, p50, p99 and total, largest total first. */
export function formatTimings(title: string): string {
  const rows = [...spans.entries()]
    .map(([name, list]) => {
      const sorted = [...list].sort((a, b) => a - b);
      const total = sorted.reduce((a, b) => a + b, 0);
      return { name, n: sorted.length, mean: total / sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), total };
    })
    .sort((a, b) => b.total - a.total);
  const f = (x: number) => x.toFixed(1).padStart(8);
  return [
    `timings in the ${title} process (BENCH_PROFILE=1), ms`,
    `  ${'count'.padStart(7)} ${'mean'.padStart(8)} ${'p50'.padStart(8)} ${'p99'.padStart(8)} ${'total'.padStart(9)}  what`,
    ...rows.map((r) => `  ${String(r.n).padStart(7)} ${f(r.mean)} ${f(r.p50)} ${f(r.p99)} ${r.total.toFixed(0).padStart(9)}  ${r.name}`),
    '',
  ].join('\n');
}
