// `npm run bench`: figures for the video-job path on this machine, with the simulator as provider,
// a real PostgreSQL and a real Temporal dev server. Prints figures; asserts nothing about speed.
//   BENCH_JOBS (default 200)  BENCH_CONCURRENCY (default 20)
import { startInfra } from '../test/helpers/infra.js';

const JOBS = Number(process.env['BENCH_JOBS'] ?? 200);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 20);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summary(name: string, samples_ms: number[]): string {
  const s = [...samples_ms].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return `${name.padEnd(34)} n=${String(s.length).padStart(4)}  p50=${percentile(s, 50).toFixed(1).padStart(7)} ms  p95=${percentile(s, 95).toFixed(1).padStart(7)} ms  p99=${percentile(s, 99).toFixed(1).padStart(7)} ms  max=${s[s.length - 1]!.toFixed(1).padStart(7)} ms  mean=${mean.toFixed(1)} ms`;
}

async function pool<T>(n: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

async function main() {
  const infra = await startInfra('vva-bench-');
  Object.assign(process.env, infra.env);
  const { startStack, newCustomer, http, balanceMicro, assertAuditHolds } = await import('../test/helpers/stack.js');
  const stack = await startStack({ env: { VIDEO_POLL_INTERVAL_MS: '1000', VIDEO_POLL_MAX_INTERVAL_MS: '5000', DATABASE_POOL_MAX: '30' } });
  try {
    const c = await newCustomer(stack, 100_000);
    const body = (i: number) => ({ prompt: `bench ${i}`, model: 'sim-video-1', durationSeconds: 4, n: 1, parameters: { simulate: { delay_ms: 0 } } });
    // Warm up: the first request bundles nothing, but connections and caches settle.
    await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: body(-1) });
    const rssBefore = process.memoryUsage().rss;

    const createMs: number[] = [];
    const submittedAt = new Map<string, number>();
    const started = performance.now();
    await pool(JOBS, CONCURRENCY, async (i) => {
      const t0 = performance.now();
      const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: body(i) });
      createMs.push(performance.now() - t0);
      if (r.status !== 202) throw new Error(`create ${i}: ${r.status} ${JSON.stringify(r.body)}`);
      submittedAt.set(r.body.id, t0);
    });
    const createElapsed = performance.now() - started;

    const statusMs: number[] = [];
    const completeMs: number[] = [];
    const pending = new Set(submittedAt.keys());
    while (pending.size > 0) {
      await pool(pending.size, CONCURRENCY, async (i) => {
        const id = [...pending][i];
        if (!id) return;
        const t0 = performance.now();
        const r = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
        statusMs.push(performance.now() - t0);
        if (r.body.status === 'succeeded') {
          completeMs.push(performance.now() - submittedAt.get(id)!);
          pending.delete(id);
        } else if (r.body.status === 'failed') throw new Error(`job ${id} failed: ${JSON.stringify(r.body.error)}`);
      });
      await new Promise((r) => setTimeout(r, 100));
    }
    const totalElapsed = performance.now() - started;
    const rssAfter = process.memoryUsage().rss;
    await assertAuditHolds(stack);
    const spent = 100_000_000_000 - (await balanceMicro(stack, c.workspaceId));

    process.stdout.write(
      [
        '',
        `video jobs benchmark: ${JOBS} jobs (sim-video-1, 4 s, n=1, delay 0), concurrency ${CONCURRENCY}, 2-core machine`,
        summary('POST /v2/videos/generations (202)', createMs),
        summary('GET  /v2/videos/generations/{id}', statusMs),
        summary('submit -> succeeded (end to end)', completeMs),
        `${'create throughput'.padEnd(34)} ${(JOBS / (createElapsed / 1000)).toFixed(1)} jobs/s (charge + workflow start, early return)`,
        `${'completion throughput'.padEnd(34)} ${(JOBS / (totalElapsed / 1000)).toFixed(1)} jobs/s`,
        `${'API+worker process RSS'.padEnd(34)} ${mib(rssBefore)} before, ${mib(rssAfter)} after (${mib(process.memoryUsage().heapUsed)} heap used)`,
        `${'ledger'.padEnd(34)} audit ok; charged ${(spent / 1e6).toFixed(2)} EUR for ${JOBS + 1} jobs (${spent / (JOBS + 1)} micro-EUR each)`,
        '',
      ].join('\n'),
    );
  } finally {
    await stack.stop();
    await infra.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${(err as Error).stack}\n`);
    process.exit(1);
  },
);
