// What the benchmark asks of the product, through its public API (and its database, read only, for
// the simulator's own records): a customer, video jobs with a simulated generation time, cancels.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../src/db/pool.js';
import { http, newCustomer } from '../test/helpers/stack.js';
import { inPool } from './load.js';
import { PRODUCT_CREATE_PATH } from './product-server.js';

/** Enough credits for every job the longest variant creates. */
const CUSTOMER_CREDITS_EUR = 1_000_000;

export interface Customer {
  baseUrl: string;
  key: string;
  workspaceId: string;
}

export async function productCustomer(baseUrl: string): Promise<Customer> {
  return { baseUrl, ...(await newCustomer({ baseUrl }, CUSTOMER_CREDITS_EUR)) };
}

/** The generation of jobs that must stay pending for a whole phase: longer than the bench runs, within the simulator's maximum. */
export const PENDING_DELAY_MS = 50 * 60_000;
/**
 * The product's job deadline for those phases, past that generation (the default, 30 minutes, is shorter:
 * on a loaded machine the first of 10,000 jobs reached it before the last was created, and failed).
 */
export const PENDING_JOB_ENV = { VIDEO_JOB_TIMEOUT_MS: String(PENDING_DELAY_MS + 10 * 60_000) };

/** A 4 s, one-video job of sim-video-1 whose generation takes `delay_ms` from its submission. */
export const simulatedJob = (delay_ms: number, label: string) => ({
  prompt: `bench ${label}`,
  model: 'sim-video-1',
  durationSeconds: 4,
  n: 1,
  parameters: { simulate: { delay_ms } },
});

export interface Created {
  id: string | null;
  /** null when answered 202. */
  error: string | null;
}

export async function createJob(c: Customer, body: object, opts: { idempotencyKey?: boolean } = {}): Promise<Created> {
  const r = await http(c.baseUrl, 'POST', PRODUCT_CREATE_PATH, {
    token: c.key,
    json: body,
    ...(opts.idempotencyKey ? { headers: { 'idempotency-key': randomUUID() } } : {}),
  });
  if (r.status !== 202) return { id: null, error: `${r.status} ${JSON.stringify(r.body)}` };
  return { id: r.body.id, error: null };
}

export async function getJob(c: Customer, id: string): Promise<{ status: string; error: unknown }> {
  const r = await http(c.baseUrl, 'GET', `${PRODUCT_CREATE_PATH}/${id}`, { token: c.key });
  if (r.status !== 200) throw new Error(`GET job ${id}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Cancels the jobs (a job already finished is left as it is) and waits until none of them is pending. */
export async function cancelJobs(c: Customer, db: Db, ids: string[], concurrency: number, timeout_ms = 300_000): Promise<void> {
  await inPool(ids.length, concurrency, async (i) => {
    const r = await http(c.baseUrl, 'POST', `${PRODUCT_CREATE_PATH}/${ids[i]}/cancel`, { token: c.key });
    if (r.status !== 200 && r.status !== 409) throw new Error(`cancel ${ids[i]}: ${r.status} ${JSON.stringify(r.body)}`);
  });
  const deadline = Date.now() + timeout_ms;
  while ((await pendingJobs(db)) > 0) {
    if (Date.now() > deadline) throw new Error(`jobs still pending ${timeout_ms} ms after their cancel`);
    await sleep(250);
  }
}

export async function pendingJobs(db: Db): Promise<number> {
  const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM video_jobs WHERE status = 'pending'");
  return r.rows[0]!.n;
}

/** Jobs whose submitted operation waits for the poller (their rows of video_job_polls). */
export async function polledJobs(db: Db): Promise<number> {
  const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM video_job_polls');
  return r.rows[0]!.n;
}

/** Pending jobs not yet submitted (no row of video_job_polls): a job that ended instead is not waited for. */
export async function unsubmittedJobs(db: Db): Promise<number> {
  const r = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM video_jobs j WHERE j.status = 'pending' AND NOT EXISTS (SELECT 1 FROM video_job_polls p WHERE p.job_id = j.id)",
  );
  return r.rows[0]!.n;
}

/** When the simulator's operation of a job completes (Unix ms): its submission plus its delay. */
export async function operationDoneAtMs(db: Db, job_id: string): Promise<number> {
  const r = await db.query<{ done_at_ms: number }>(
    `SELECT extract(epoch FROM submitted_at) * 1000 + (request->'simulate'->>'delay_ms')::float8 AS done_at_ms
       FROM simulator.video_operations WHERE request_id = $1`,
    [job_id],
  );
  if (!r.rows[0]) throw new Error(`no simulator operation for job ${job_id}`);
  return r.rows[0].done_at_ms;
}

/** Polls GET every `every_ms` until the job is no longer pending; the first answer that says so, and when it came. */
export async function awaitOutcome(
  c: Customer,
  id: string,
  every_ms: number,
  timeout_ms: number,
): Promise<{ status: string; error: unknown; seen_at_ms: number }> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const job = await getJob(c, id);
    if (job.status !== 'pending') return { ...job, seen_at_ms: Date.now() };
    if (Date.now() > deadline) throw new Error(`job ${id} still pending after ${timeout_ms} ms`);
    await sleep(every_ms);
  }
}

/**
 * Waits until none of the jobs is pending (read every `every_ms`), then tells how they ended and each
 * one's time from its charge to its settlement (created_at to completed_at, on the database clock), sorted.
 */
export async function settledJobs(
  db: Db,
  ids: string[],
  every_ms: number,
  timeout_ms: number,
): Promise<{ charge_to_settled_ms: number[]; succeeded: number; failed: number }> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM video_jobs WHERE id = ANY($1::uuid[]) AND status = 'pending'", [
      ids,
    ]);
    if (r.rows[0]!.n === 0) break;
    if (Date.now() > deadline) throw new Error(`${r.rows[0]!.n} jobs still pending ${timeout_ms} ms after their creates`);
    await sleep(every_ms);
  }
  const jobs = await db.query<{ status: string; ms: number }>(
    'SELECT status, (extract(epoch FROM completed_at - created_at) * 1000)::float8 AS ms FROM video_jobs WHERE id = ANY($1::uuid[])',
    [ids],
  );
  return {
    charge_to_settled_ms: jobs.rows.map((j) => j.ms).sort((a, b) => a - b),
    succeeded: jobs.rows.filter((j) => j.status === 'succeeded').length,
    failed: jobs.rows.filter((j) => j.status !== 'succeeded').length,
  };
}
