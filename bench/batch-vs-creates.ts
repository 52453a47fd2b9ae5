// Phase 9: the same video requests (a short simulated generation) made as ONE batch, and as individual
// creates from a client that keeps itself at the workspace's pending-job limit (retrying each create the
// limit refuses with its 429). Each side runs on a database of its own with the product split in two
// processes, the API (`npm run api`) and the worker (`npm run worker`), so each one's CPU and peak memory
// are read apart. Printed side by side: the time until every request settled, the CPU each process (and
// Temporal, PostgreSQL) spent per request, each process's peak RSS, and the history events of the batch's
// workflow over all its runs (it continues as new).
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { Infra } from '../test/helpers/infra.js';
import { http } from '../test/helpers/stack.js';
import { createPool, type Db } from '../src/db/pool.js';
import { loadConfig } from '../src/config.js';
import { connectClient } from '../src/temporal/client.js';
import { batchWorkflowId } from '../workflows/messages.js';
import type { BenchConfig } from './bench-config.js';
import { createJob, pendingJobs, productCustomer, simulatedJob, type Customer } from './product-api.js';
import { spawnSubject, type SubjectProcess } from './subject.js';
import { subjectEnv } from './subject-env.js';
import { cpuProbe, processMs, waitUntilQuiet } from './process-cpu.js';
import { PRODUCT_CREATE_PATH } from './product-server.js';
import type { Log } from './log.js';

export interface SideFigures {
  requests: number;
  /** From the first request sent to the last one settled (the batch `completed`). */
  settled_ms: number;
  succeeded: number;
  failed: number;
  /** CPU ms per request: the API process, the worker process, Temporal, PostgreSQL (null: not measurable). */
  api_cpu_ms: number;
  worker_cpu_ms: number;
  temporal_cpu_ms: number | null;
  postgres_cpu_ms: number | null;
  /** Peak RSS (VmHWM) of each process over its life (start and warm-up included). */
  api_peak_rss_bytes: number;
  worker_peak_rss_bytes: number;
  /** Creates the pending-job limit refused (429) and the client sent again (creates only). */
  refused: number;
  /** HTTP requests the client sent in all (creates and their retries; the batch's create and one read). */
  http_requests: number;
}

export interface BatchVsCreates {
  pending_limit: number;
  batch_concurrency: number;
  delay_ms: number;
  clients: number;
  creates: SideFigures;
  batch: SideFigures & { history_events: number; runs: number };
}

/** How long the creating client waits before sending a create the pending limit refused again. */
const RETRY_MS = 250;
const SETTLED_CHECK_MS = 250;
const WARMUP_REQUESTS = 5;
/** Time a side may take beyond its requests' generations before the benchmark gives up. */
const SIDE_TIMEOUT_MS = 90 * 60_000;

const batchLine = (delay_ms: number, i: number) => ({
  custom_id: `r${i}`,
  method: 'POST',
  url: PRODUCT_CREATE_PATH,
  body: simulatedJob(delay_ms, `batch ${i}`),
});

/** Peak resident set of a process (VmHWM), in bytes; 0 if it is gone. */
function peakRss(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

async function createBatch(c: Customer, delay_ms: number, n: number): Promise<string> {
  const requests = Array.from({ length: n }, (_, i) => batchLine(delay_ms, i));
  const r = await http(c.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  if (r.status !== 200) throw new Error(`batch create: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.id as string;
}

/**
 * Waits until the batch has ended, read from the database every SETTLED_CHECK_MS (as the creates' jobs
 * are: neither side's waiting costs the API anything), then its counts from the API.
 */
async function awaitBatch(c: Customer, db: Db, id: string, timeout_ms: number): Promise<{ completed: number; failed: number }> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const r = await db.query<{ status: string }>('SELECT status FROM batches WHERE id = $1', [id]);
    if (!['validating', 'in_progress', 'cancelling'].includes(r.rows[0]!.status)) break;
    if (Date.now() > deadline) throw new Error(`batch still ${r.rows[0]!.status} after ${timeout_ms} ms`);
    await sleep(SETTLED_CHECK_MS);
  }
  const r = await http(c.baseUrl, 'GET', `/v2/batches/${id}`, { token: c.key });
  if (r.status !== 200) throw new Error(`batch read: ${r.status} ${JSON.stringify(r.body)}`);
  if (r.body.status !== 'completed') throw new Error(`batch ended ${r.body.status}`);
  return { completed: r.body.request_counts.completed, failed: r.body.request_counts.failed };
}

/** N creates from `clients` senders, each create the pending limit refuses sent again after RETRY_MS. */
async function createAtLimit(
  c: Customer,
  delay_ms: number,
  n: number,
  clients: number,
): Promise<{ refused: number; sent: number; failed: number }> {
  let next = 0;
  let refused = 0;
  let sent = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = next++; i < n; i = next++) {
        for (;;) {
          sent++;
          const created = await createJob(c, simulatedJob(delay_ms, `create ${i}`));
          if (!created.error) break;
          if (!created.error.startsWith('429')) {
            failed++;
            break;
          }
          refused++;
          await sleep(RETRY_MS);
        }
      }
    }),
  );
  return { refused, sent, failed };
}

async function awaitNonePending(db: Db, timeout_ms: number): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while ((await pendingJobs(db)) > 0) {
    if (Date.now() > deadline) throw new Error(`jobs still pending after ${timeout_ms} ms`);
    await sleep(SETTLED_CHECK_MS);
  }
}

/** The history events of every run of a workflow that continued as new, latest run first. */
async function historyOfAllRuns(client: Client, workflowId: string): Promise<{ events: number; runs: number }> {
  await client.workflow.getHandle(workflowId).result();
  let runId: string | undefined;
  let events = 0;
  let runs = 0;
  do {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const list = history.events ?? [];
    events += list.length;
    runs++;
    runId = list[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  } while (runId);
  return { events, runs };
}

async function side(infra: Infra, cfg: BenchConfig, kind: 'creates' | 'batch', log: Log, client: Client) {
  // The service's own pending-job limit (the bench's other phases lift it): what a client meets.
  const { env, databaseUrl } = await subjectEnv(infra, 'product', { MAX_PENDING_JOBS_PER_WORKSPACE: String(pendingLimit()) });
  const db = createPool(databaseUrl, 2);
  const processes: SubjectProcess[] = [];
  try {
    const worker = await spawnSubject('product-worker', env);
    processes.push(worker);
    const api = await spawnSubject('product-api', env);
    processes.push(api);
    const customer = await productCustomer(api.url);
    // Warm: both paths run once on each side, so neither side pays for loading code the other loaded.
    for (let i = 0; i < WARMUP_REQUESTS; i++) await createJob(customer, simulatedJob(cfg.BENCH_BATCH_DELAY_MS, `warm ${i}`));
    await awaitBatch(customer, db, await createBatch(customer, cfg.BENCH_BATCH_DELAY_MS, WARMUP_REQUESTS), SIDE_TIMEOUT_MS);
    await awaitNonePending(db, SIDE_TIMEOUT_MS);
    await waitUntilQuiet(30_000);

    const n = cfg.BENCH_BATCH_REQUESTS;
    log(`phase 9: ${n} requests as ${kind === 'batch' ? 'one batch' : `creates at the pending limit (${pendingLimit()})`}`);
    const probe = cpuProbe(infra);
    const before = { api: processMs(api.pid, true), worker: processMs(worker.pid, true), others: probe?.sample(api.pid) };
    const started = Date.now();
    let succeeded: number;
    let failed: number;
    let refused = 0;
    let http_requests: number;
    let history: { events: number; runs: number } | null = null;
    if (kind === 'creates') {
      const sent = await createAtLimit(customer, cfg.BENCH_BATCH_DELAY_MS, n, clients(cfg));
      await awaitNonePending(db, SIDE_TIMEOUT_MS);
      refused = sent.refused;
      http_requests = sent.sent;
      const r = await db.query<{ ok: number }>(
        "SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS ok FROM video_jobs WHERE prompt LIKE 'bench create %'",
      );
      succeeded = r.rows[0]!.ok;
      failed = n - succeeded;
    } else {
      const id = await createBatch(customer, cfg.BENCH_BATCH_DELAY_MS, n);
      const counts = await awaitBatch(customer, db, id, SIDE_TIMEOUT_MS);
      succeeded = counts.completed;
      failed = counts.failed;
      http_requests = 2; // the create and the final read
    }
    const settled_ms = Date.now() - started;
    const after = { api: processMs(api.pid, true), worker: processMs(worker.pid, true), others: probe?.sample(api.pid) };
    if (kind === 'batch') {
      const latest = await http(api.url, 'GET', '/v2/batches?limit=1', { token: customer.key });
      history = await historyOfAllRuns(client, batchWorkflowId(latest.body.data[0].id as string));
    }
    const figures: SideFigures = {
      requests: n,
      settled_ms,
      succeeded,
      failed,
      api_cpu_ms: (after.api - before.api) / n,
      worker_cpu_ms: (after.worker - before.worker) / n,
      temporal_cpu_ms: before.others && after.others ? (after.others.temporal_ms - before.others.temporal_ms) / n : null,
      postgres_cpu_ms: before.others && after.others ? (after.others.postgres_ms - before.others.postgres_ms) / n : null,
      api_peak_rss_bytes: peakRss(api.pid),
      worker_peak_rss_bytes: peakRss(worker.pid),
      refused,
      http_requests,
    };
    return { figures, history };
  } finally {
    for (const p of processes.reverse()) await p.stop();
    await db.end();
  }
}

/** The creating client's creates in flight: as many as the limit by default, so it can always fill it. */
const clients = (cfg: BenchConfig) => cfg.BENCH_BATCH_CLIENTS ?? pendingLimit();
const pendingLimit = () => loadConfig({ ...process.env, MAX_PENDING_JOBS_PER_WORKSPACE: undefined }).pendingJobsPerWorkspaceMax;

export async function benchBatchVsCreates(infra: Infra, cfg: BenchConfig, log: Log): Promise<BatchVsCreates> {
  const client = await connectClient({ address: infra.temporalAddress, namespace: 'default' });
  try {
    const creates = await side(infra, cfg, 'creates', log, client);
    const batch = await side(infra, cfg, 'batch', log, client);
    return {
      pending_limit: pendingLimit(),
      batch_concurrency: loadConfig(process.env).batchConcurrency,
      delay_ms: cfg.BENCH_BATCH_DELAY_MS,
      clients: clients(cfg),
      creates: creates.figures,
      batch: { ...batch.figures, history_events: batch.history!.events, runs: batch.history!.runs },
    };
  } finally {
    await client.connection.close();
  }
}

const mib = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MiB`;
const ms = (x: number | null) => (x === null ? '-' : x.toFixed(2));

export function formatBatchVsCreates(r: BatchVsCreates): string {
  const { creates: c, batch: b } = r;
  const row = (name: string, f: (s: SideFigures) => string) => `  ${name.padEnd(34)} ${f(c).padStart(14)} ${f(b).padStart(14)}`;
  const lines = [
    `== phase 9: ${c.requests} video requests (${r.delay_ms} ms simulated generation): one batch against individual creates ==`,
    `pending-job limit ${r.pending_limit} (the creating client: ${r.clients} in flight, a refused create sent again after ${RETRY_MS} ms); BATCH_CONCURRENCY ${r.batch_concurrency}`,
    `  ${''.padEnd(34)} ${'creates'.padStart(14)} ${'batch'.padStart(14)}`,
    row('time until all settled (s)', (s) => (s.settled_ms / 1000).toFixed(1)),
    row('requests/s', (s) => ((s.requests * 1000) / s.settled_ms).toFixed(1)),
    row('succeeded / failed', (s) => `${s.succeeded} / ${s.failed}`),
    row('HTTP requests sent (429s)', (s) => `${s.http_requests} (${s.refused})`),
    row('CPU ms per request: API', (s) => ms(s.api_cpu_ms)),
    row('CPU ms per request: worker', (s) => ms(s.worker_cpu_ms)),
    row('CPU ms per request: Temporal', (s) => ms(s.temporal_cpu_ms)),
    row('CPU ms per request: PostgreSQL', (s) => ms(s.postgres_cpu_ms)),
    row('peak RSS: API', (s) => mib(s.api_peak_rss_bytes)),
    row('peak RSS: worker', (s) => mib(s.worker_peak_rss_bytes)),
    `  history events of the batch's workflow: ${b.history_events} over ${b.runs} runs (${(b.history_events / b.requests).toFixed(1)} per request)`,
    `  target: the batch no slower (${b.settled_ms <= c.settled_ms ? 'met' : 'missed'}: ${((c.settled_ms / b.settled_ms) * 100).toFixed(0)} % of the creates' speed), ` +
      `the API's CPU per request at most half (${b.api_cpu_ms <= c.api_cpu_ms / 2 ? 'met' : 'missed'}: ${((b.api_cpu_ms / c.api_cpu_ms) * 100).toFixed(0)} %)`,
    '',
  ];
  return lines.join('\n');
}
