// End-to-end jobs against the fal and Replicate fakes: a stack whose callback URLs reach its own API, a
// job created and watched through the real API (every answer sampled, so progress can be checked to
// only move forward), and what the job left in the ledger and in its workflow's history.
import assert from 'node:assert/strict';
import { freePort } from './infra.js';
import { http, startStack, type Stack } from './stack.js';
import { startReceiver, type Receiver } from './webhook-receiver.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';
import { readVideoJob } from '../../src/video-jobs/records.js';

/** A model of one video per request on fal and then Replicate: 1080p, 5 s at EUR 0.10/s. */
export const KLING = 'kling-v2.5-turbo-pro';
export const KLING_VIDEO_MICRO_EUR = 500_000;

export const klingJob = (extra: Record<string, unknown> = {}) => ({
  prompt: 'a lighthouse at dusk, waves crashing',
  model: KLING,
  durationSeconds: 5,
  resolution: '1080p',
  aspectRatio: '16:9',
  n: 1,
  ...extra,
});

/**
 * A stack whose API listens on a port fixed before it starts, so the worker's callback base URL
 * (PUBLIC_BASE_URL) names it: the fakes' callbacks reach this stack's own route.
 */
export async function providerStack(env: Record<string, string>, poll_interval_ms: number): Promise<Stack> {
  const port = await freePort();
  return startStack({
    env: {
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      VIDEO_POLL_INTERVAL_MS: String(poll_interval_ms),
      VIDEO_POLL_MAX_INTERVAL_MS: String(poll_interval_ms),
      VIDEO_JOB_TIMEOUT_MS: '120000',
      ...env,
    },
  });
}

export async function createJob(stack: Stack, key: string, body: Record<string, unknown>): Promise<string> {
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: key, json: body });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  return created.body.id as string;
}

/** Waits until the job's submission recorded its operation (the provider has the request). */
export async function waitSubmitted(stack: Stack, id: string): Promise<{ operation_id: string; backend: string }> {
  for (let i = 0; ; i++) {
    const job = await readVideoJob(stack.db, id);
    if (job?.operation_id && job.backend) return { operation_id: job.operation_id, backend: job.backend };
    assert.ok(i < 500, `job ${id} never recorded its operation`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface Watched {
  job: any;
  /** When the first finished answer was read (Date.now()). */
  seen_at_ms: number;
  /** Every pending answer's progress and queue position, in order. */
  samples: { progress: number | null; queue_position: number | null }[];
}

/** Reads the job every `every_ms` until it has finished. */
export async function watchJob(stack: Stack, key: string, id: string, timeout_ms = 30_000, every_ms = 25): Promise<Watched> {
  const deadline = Date.now() + timeout_ms;
  const samples: Watched['samples'] = [];
  for (;;) {
    const r = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: key });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok('progress' in r.body && 'queue_position' in r.body && 'backend' in r.body, JSON.stringify(r.body));
    if (r.body.status !== 'pending') return { job: r.body, seen_at_ms: Date.now(), samples };
    samples.push({ progress: r.body.progress, queue_position: r.body.queue_position });
    if (Date.now() > deadline) throw new Error(`job ${id} still pending after ${timeout_ms} ms`);
    await new Promise((res) => setTimeout(res, every_ms));
  }
}

/** Asserts a sampled series never moves back: progress never falls, a queue position never grows. */
export function assertOnlyForward(samples: Watched['samples']): void {
  let progress = -1;
  let position = Infinity;
  for (const [i, s] of samples.entries()) {
    if (s.progress !== null) {
      assert.ok(s.progress >= progress, `progress went back to ${s.progress} at sample ${i}: ${JSON.stringify(samples)}`);
      progress = s.progress;
    } else assert.equal(progress, -1, `progress went back to null at sample ${i}`);
    if (s.queue_position !== null) {
      assert.ok(s.queue_position <= position, `queue_position grew to ${s.queue_position} at sample ${i}: ${JSON.stringify(samples)}`);
      position = s.queue_position;
    }
  }
}

/** The job's ledger entries: kind and amount, in order. */
export async function ledgerOf(stack: Stack, id: string): Promise<[string, number][]> {
  const r = await stack.db.query<{ kind: string; amount_micro_eur: string }>(
    'SELECT kind, amount_micro_eur FROM ledger_entries WHERE video_job_id = $1 ORDER BY id',
    [id],
  );
  return r.rows.map((e) => [e.kind, Number(e.amount_micro_eur)]);
}

/** How many signals the job's (closed) workflow received. */
export async function signalsOf(stack: Stack, id: string): Promise<number> {
  const handle = stack.api.temporal.workflow.getHandle(videoJobWorkflowId(id));
  await handle.result();
  const events = (await handle.fetchHistory()).events ?? [];
  return events.filter((e) => e.workflowExecutionSignaledEventAttributes).length;
}

/** The job's poll row (gone once it settled). */
export async function pollRowOf(stack: Stack, id: string): Promise<{ next_poll_at: Date; signalled_at: Date | null } | undefined> {
  return (await stack.db.query('SELECT next_poll_at, signalled_at FROM video_job_polls WHERE job_id = $1', [id])).rows[0];
}

/** A webhook endpoint of the workspace, at a receiver of this test. */
export async function webhookReceiver(stack: Stack, key: string): Promise<Receiver> {
  const receiver = await startReceiver();
  const r = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: key, json: { url: receiver.url } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return receiver;
}

/** The event the receiver got for a job. */
export async function eventFor(receiver: Receiver, id: string, timeout_ms = 15_000): Promise<any> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const event = receiver.received.map((w) => JSON.parse(w.body)).find((e) => e.data?.id === id);
    if (event) return event;
    assert.ok(Date.now() < deadline, `no webhook event for job ${id}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
