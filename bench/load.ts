// The load generator and its statistics: N requests with a fixed number in flight, each timed.

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** Runs fn(0..n-1) with at most `concurrency` calls in flight. */
export async function inPool<T>(n: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

export interface LoadResult {
  /** Requests answered as expected. */
  ok: number;
  /** Requests answered otherwise, with the first such answer. */
  errors: number;
  first_error: string | null;
  elapsed_ms: number;
  /** Latencies of the requests answered as expected, in ms, sorted. */
  latencies_ms: number[];
}

export interface Figures {
  jobs_per_s: number;
  p50_ms: number;
  p99_ms: number;
}

/** Several runs as one: their requests, latencies and time added up. */
export function pooled(results: LoadResult[]): LoadResult {
  return {
    ok: results.reduce((a, r) => a + r.ok, 0),
    errors: results.reduce((a, r) => a + r.errors, 0),
    first_error: results.find((r) => r.first_error)?.first_error ?? null,
    elapsed_ms: results.reduce((a, r) => a + r.elapsed_ms, 0),
    latencies_ms: results.flatMap((r) => r.latencies_ms).sort((a, b) => a - b),
  };
}

/** Times each call of `send`: the latencies of the expected answers, and the unexpected ones counted with the first. */
function recorder(send: (i: number) => Promise<string | null>) {
  const latencies_ms: number[] = [];
  let errors = 0;
  let first_error: string | null = null;
  const started = performance.now();
  return {
    async call(i: number): Promise<void> {
      const t0 = performance.now();
      let error: string | null;
      try {
        error = await send(i);
      } catch (err) {
        error = (err as Error).message;
      }
      if (error === null) latencies_ms.push(performance.now() - t0);
      else {
        errors++;
        first_error ??= error;
      }
    },
    result(): LoadResult {
      const elapsed_ms = performance.now() - started;
      latencies_ms.sort((a, b) => a - b);
      return { ok: latencies_ms.length, errors, first_error, elapsed_ms, latencies_ms };
    },
  };
}

/**
 * Sends `n` requests, `concurrency` at a time. `send(i)` returns an error text for an unexpected answer
 * (null when it is the expected one); thrown errors count as unexpected answers too.
 */
export async function runLoad(n: number, concurrency: number, send: (i: number) => Promise<string | null>): Promise<LoadResult> {
  const r = recorder(send);
  await inPool(n, concurrency, (i) => r.call(i));
  return r.result();
}

/**
 * Sends requests for `duration_ms`, `concurrency` at a time (or until `stop` resolves, when given);
 * `send(i)` as for runLoad.
 */
export async function runFor(
  duration_ms: number,
  concurrency: number,
  send: (i: number) => Promise<string | null>,
  stop?: Promise<void>,
): Promise<LoadResult> {
  const r = recorder(send);
  let done = false;
  const timer = setTimeout(() => (done = true), duration_ms);
  void stop?.then(() => (done = true));
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!done) await r.call(next++);
    }),
  );
  clearTimeout(timer);
  return r.result();
}
