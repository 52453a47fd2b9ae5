// Real jobs through the real API, PostgreSQL and Temporal, against the fal and Replicate fakes: completion
// by callback (seen within a second or two although the poll interval is ten minutes) and by polling
// (callbacks dropped), provider failure, shortfall of a job of two videos on a one-video-per-request
// model, cancel before and after the provider started, fallback from a refusing first backend, forged
// and replayed callbacks, and progress that only moves forward. The ledger audit holds after each.
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { FalFake, type FalPlan } from '../fakes/fal-fake.js';
import { ReplicateFake, type ReplicatePlan } from '../fakes/replicate-fake.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, type Stack } from '../helpers/stack.js';
import { registry } from '../../src/metrics.js';
import {
  assertOnlyForward,
  createJob,
  eventFor,
  KLING_VIDEO_MICRO_EUR,
  klingJob,
  ledgerOf,
  pollRowOf,
  providerStack,
  signalsOf,
  sleep,
  waitSubmitted,
  watchJob,
  webhookReceiver,
} from '../helpers/provider-jobs.js';
import type { Receiver } from '../helpers/webhook-receiver.js';

/** Polls so rare that within a test only a callback can finish a job. */
const NEVER_POLLED_MS = 600_000;
const POLLED_MS = 150;
const NEVER = 1_000_000;

/** How a test drives one provider's fake, the same way for both. */
interface Driver {
  backend: 'fal' | 'replicate';
  /** The service's environment: the backends configured. */
  env(): Record<string, string>;
  reset(): void;
  /** Plans of the next requests: waiting in the queue, or started (running); `fails` with the model's message. */
  plan(...plans: { started?: boolean; fails?: string }[]): void;
  /** Requests that end by polls alone: queued for a few polls, then running a few, then done. */
  planPolled(): void;
  dropCallbacks(drop: boolean): void;
  /** The provider's request ids, in submission order. */
  requests(): string[];
  finish(request_id: string): Promise<void>;
  /** The callbacks delivered (or dropped): their receiver's answer. */
  callbacks(): { answered: number | undefined }[];
  redeliver(request_id: string): Promise<number>;
  /** Callbacks for a request that must fail verification: another signer, a changed body, too old, unsigned. */
  forgeries(request_id: string): { headers: Record<string, string>; body: Buffer }[];
  /** The progress the fake's polled plan reports while running (null: the provider gives none). */
  reportsProgress: boolean;
  reportsQueuePosition: boolean;
}

const fal = new FalFake();
const replicate = new ReplicateFake();

/** What both fakes do alike. */
interface Fake<P> {
  plans: P[];
  defaultPlan: P;
  dropCallbacks: boolean;
  readonly callbacks: { answered: number | undefined }[];
  reset(): void;
  finish(request_id: string): Promise<void>;
  redeliver(request_id: string): Promise<number>;
}

/** A driver of a fake: what differs is how a plan reads, its request ids and how its callbacks are signed. */
function driverOf<P>(
  fake: Fake<P>,
  d: Pick<Driver, 'backend' | 'env' | 'requests' | 'forgeries' | 'reportsProgress' | 'reportsQueuePosition'> & {
    planOf: (p: { started?: boolean; fails?: string }) => P;
    polled: P;
  },
): Driver {
  return {
    ...d,
    reset: () => fake.reset(),
    plan: (...plans) => void (fake.plans = plans.map(d.planOf)),
    planPolled: () => void (fake.defaultPlan = d.polled),
    dropCallbacks: (drop) => void (fake.dropCallbacks = drop),
    finish: (id) => fake.finish(id),
    callbacks: () => fake.callbacks,
    redeliver: (id) => fake.redeliver(id),
  };
}

const falDriver = driverOf<FalPlan>(fal, {
  backend: 'fal',
  env: () => ({ ...fal.env(), ...replicate.env() }),
  planOf: (p) => ({
    queue_polls: p.started ? 0 : NEVER,
    progress_polls: NEVER,
    ...(p.fails ? { outcome: 'error', error_message: p.fails } : {}),
  }),
  polled: { queue_polls: 3, progress_polls: 2 },
  requests: () => [...fal.submitted.keys()],
  forgeries: (id) => {
    const body = fal.callbackBody(id);
    const other = generateKeyPairSync('ed25519').privateKey;
    return [
      { headers: fal.signCallback(id, body, { key: other }), body },
      { headers: fal.signCallback(id, body), body: Buffer.from(body.toString().replace('"OK"', '"ERROR"')) },
      { headers: fal.signCallback(id, body, { timestamp_s: Math.floor(Date.now() / 1000) - 600 }), body },
      { headers: {}, body },
    ];
  },
  reportsProgress: false,
  reportsQueuePosition: true,
});

const replicateDriver = driverOf<ReplicatePlan>(replicate, {
  backend: 'replicate',
  env: () => replicate.env(),
  planOf: (p) => ({
    starting_polls: p.started ? 0 : NEVER,
    processing_polls: NEVER,
    ...(p.fails ? { outcome: 'failed', error: p.fails } : {}),
  }),
  polled: { starting_polls: 1, processing_polls: 4 },
  requests: () => [...replicate.predictions.keys()],
  forgeries: (id) => {
    const body = replicate.predictionBody(id);
    return [
      { headers: replicate.signCallback(body, { secret: `whsec_${Buffer.from('not-the-account-secret-0001').toString('base64')}` }), body },
      { headers: replicate.signCallback(body), body: Buffer.from(body.toString().replace('"starting"', '"succeeded"')) },
      { headers: replicate.signCallback(body, { at: new Date(Date.now() - 600_000) }), body },
      { headers: {}, body },
    ];
  },
  reportsProgress: true,
  reportsQueuePosition: false,
});

before(async () => {
  await fal.start();
  await replicate.start();
});
after(async () => {
  await fal.stop();
  await replicate.stop();
});

/**
 * The hooks of a suite with its own stack: started before its tests (given to `use`), the fakes reset
 * before each test, the ledger audit after each, the receivers of `receivers` closed at the end.
 */
function suiteStack(
  env: () => Record<string, string>,
  poll_interval_ms: number,
  use: (stack: Stack) => void,
  receivers: Receiver[] = [],
): void {
  let stack: Stack | undefined;
  before(async () => {
    stack = await providerStack(env(), poll_interval_ms);
    use(stack);
  });
  after(async () => {
    for (const r of receivers) await r.close();
    await stack?.stop();
  });
  beforeEach(() => {
    fal.reset();
    replicate.reset();
  });
  afterEach(async () => {
    await assertAuditHolds(stack!);
  });
}

for (const d of [falDriver, replicateDriver]) {
  describe(`${d.backend}: completion by callback (polls every ${NEVER_POLLED_MS / 60_000} minutes)`, () => {
    let stack: Stack;
    suiteStack(d.env, NEVER_POLLED_MS, (s) => (stack = s));

    /** A job of `n` videos submitted to the fake, its requests planned as given. */
    const submitted = async (key: string, n: number, ...plans: { started?: boolean; fails?: string }[]) => {
      d.plan(...(plans.length > 0 ? plans : Array.from({ length: n }, () => ({}))));
      const id = await createJob(stack, key, klingJob({ n }));
      const op = await waitSubmitted(stack, id);
      assert.equal(op.backend, d.backend);
      assert.equal(d.requests().length, n, 'one provider request per video');
      return id;
    };

    test('the job is seen finished within 2 s of its callback; one signal, charged once; the webhook event carries backend and progress', async (t) => {
      const c = await newCustomer(stack, 5);
      const receiver = await webhookReceiver(stack, c.key);
      const delays: number[] = [];
      try {
        for (let i = 0; i < 5; i++) {
          const id = await submitted(c.key, 1);
          await sleep(300);
          const pending = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
          assert.equal(pending.body.status, 'pending', 'nothing ends it but the callback');
          assert.equal(pending.body.backend, d.backend);
          const [request_id] = d.requests();
          const delivered_at = Date.now();
          await d.finish(request_id!);
          assert.equal(d.callbacks()[0]!.answered, 200);
          const { job, seen_at_ms } = await watchJob(stack, c.key, id, 10_000, 10);
          const delay_ms = seen_at_ms - delivered_at;
          delays.push(delay_ms);
          assert.equal(job.status, 'succeeded', JSON.stringify(job));
          assert.ok(delay_ms < 2_000, `seen ${delay_ms} ms after the callback`);
          assert.equal(job.backend, d.backend);
          assert.equal(job.progress, 100);
          assert.equal(job.queue_position, null);
          assert.equal(job.videos.length, 1);
          assert.equal(job.cost_in_euro, 0.5);
          assert.equal(job.refunded_in_euro, 0);
          const video = await fetch(job.videos[0].url);
          assert.equal(video.status, 200);
          assert.ok((await video.arrayBuffer()).byteLength > 1000);
          assert.deepEqual(await ledgerOf(stack, id), [['charge', -KLING_VIDEO_MICRO_EUR]]);
          assert.equal(await signalsOf(stack, id), 1);
          const event = await eventFor(receiver, id);
          assert.equal(event.type, 'video.generation.succeeded');
          assert.equal(event.data.backend, d.backend, 'the event names the backend that ran the job');
          assert.equal(event.data.progress, 100);
          assert.ok('queue_position' in event.data);
          d.reset();
        }
        assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 5 * KLING_VIDEO_MICRO_EUR);
      } finally {
        t.diagnostic(
          `${d.backend}: callback delivered -> job seen finished on GET: ${delays.map((ms) => `${ms} ms`).join(', ')} (poll interval ${NEVER_POLLED_MS} ms)`,
        );
        await receiver.close();
      }
    });

    test('a callback that arrives while the submission is still being recorded is not lost', async () => {
      const c = await newCustomer(stack, 5);
      // The request ends (and calls back) right after the provider answered the submission.
      if (d.backend === 'fal') fal.plans = [{ complete_after_ms: 0 }];
      else replicate.plans = [{ complete_after_ms: 0 }];
      const started = Date.now();
      const id = await createJob(stack, c.key, klingJob());
      const { job } = await watchJob(stack, c.key, id, 10_000, 10);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.ok(Date.now() - started < 5_000, `finished ${Date.now() - started} ms after creation`);
    });

    test("the provider fails the job: refunded in full, with the model's message about the input", async () => {
      const c = await newCustomer(stack, 5);
      const receiver = await webhookReceiver(stack, c.key);
      try {
        const message = 'The prompt was flagged by the content checker: violence';
        const id = await submitted(c.key, 1, { fails: message });
        await d.finish(d.requests()[0]!);
        const { job } = await watchJob(stack, c.key, id, 10_000);
        assert.equal(job.status, 'failed');
        assert.match(job.error.message, /flagged by the content checker: violence/);
        assert.equal(job.cost_in_euro, 0);
        assert.equal(job.refunded_in_euro, 0.5);
        assert.deepEqual(job.videos, []);
        assert.deepEqual(await ledgerOf(stack, id), [
          ['charge', -KLING_VIDEO_MICRO_EUR],
          ['refund', KLING_VIDEO_MICRO_EUR],
        ]);
        assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
        const event = await eventFor(receiver, id);
        assert.equal(event.type, 'video.generation.failed');
        assert.equal(event.data.backend, d.backend);
        assert.deepEqual(event.data.error, job.error);
        assert.ok('progress' in event.data && 'queue_position' in event.data);
      } finally {
        await receiver.close();
      }
    });

    test('two videos, one per request, one of which fails: the job succeeds with one, the other refunded', async () => {
      const c = await newCustomer(stack, 5);
      const id = await submitted(c.key, 2, {}, { fails: 'The model could not render this scene' });
      for (const r of d.requests()) await d.finish(r);
      const { job } = await watchJob(stack, c.key, id, 10_000);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.estimated_cost_in_euro, 1);
      assert.equal(job.videos.length, 1);
      assert.equal(job.cost_in_euro, 0.5);
      assert.equal(job.refunded_in_euro, 0.5);
      assert.deepEqual(await ledgerOf(stack, id), [
        ['charge', -2 * KLING_VIDEO_MICRO_EUR],
        ['refund', KLING_VIDEO_MICRO_EUR],
      ]);
      assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - KLING_VIDEO_MICRO_EUR);
    });

    test('cancelled while the provider still queues it: refunded in full; once the provider started it: charged', async () => {
      const c = await newCustomer(stack, 5);
      /** Cancels the job: its answer, and the provider's answer recorded with it. */
      const cancel = async (id: string, expected: { cost_in_euro: number; refunded_in_euro: number; billed: boolean }) => {
        const r = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.status, 'failed');
        assert.equal(r.body.error.code, 'cancelled');
        assert.deepEqual(r.body.videos, []);
        assert.deepEqual(
          { cost_in_euro: r.body.cost_in_euro, refunded_in_euro: r.body.refunded_in_euro },
          { cost_in_euro: expected.cost_in_euro, refunded_in_euro: expected.refunded_in_euro },
        );
        const rec = await stack.db.query('SELECT cancel_billed, cancel_answer FROM video_jobs WHERE id = $1', [id]);
        assert.equal(rec.rows[0].cancel_billed, expected.billed);
        assert.match(rec.rows[0].cancel_answer, expected.billed ? /billed/ : /not billed/);
      };
      const queued = await submitted(c.key, 1, { started: false });
      await cancel(queued, { cost_in_euro: 0, refunded_in_euro: 0.5, billed: false });
      assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
      d.reset();

      const running = await submitted(c.key, 1, { started: true });
      await cancel(running, { cost_in_euro: 0.5, refunded_in_euro: 0, billed: true });
      assert.doesNotMatch(
        (await stack.db.query('SELECT cancel_answer FROM video_jobs WHERE id = $1', [running])).rows[0].cancel_answer,
        /not billed/,
      );
      assert.deepEqual(await ledgerOf(stack, running), [['charge', -KLING_VIDEO_MICRO_EUR]]);
      assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - KLING_VIDEO_MICRO_EUR);
      // The provider's callback of the cancelled request changes nothing.
      assert.equal(
        await stack.db.query('SELECT 1 FROM video_job_polls WHERE job_id = ANY($1::uuid[])', [[queued, running]]).then((r) => r.rowCount),
        0,
      );
    });

    test('two videos cancelled with one request running and one queued: one charged, one refunded; with one finished: neither delivered nor charged', async () => {
      const c = await newCustomer(stack, 5);
      const cancelled = async (id: string) => {
        const r = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.status, 'failed');
        assert.equal(r.body.error.code, 'cancelled');
        assert.deepEqual(r.body.videos, [], 'a cancelled job delivers nothing');
        const rec = await stack.db.query('SELECT cancel_billed, cancel_billed_units, cancel_answer FROM video_jobs WHERE id = $1', [id]);
        return { job: r.body, rec: rec.rows[0] };
      };

      const runningAndQueued = await submitted(c.key, 2, { started: true }, { started: false });
      const first = await cancelled(runningAndQueued);
      assert.deepEqual([first.job.cost_in_euro, first.job.refunded_in_euro], [0.5, 0.5]);
      assert.deepEqual([first.rec.cancel_billed, first.rec.cancel_billed_units], [true, 1]);
      assert.match(first.rec.cancel_answer, /1 of 2 requests were running/);
      assert.deepEqual(await ledgerOf(stack, runningAndQueued), [
        ['charge', -2 * KLING_VIDEO_MICRO_EUR],
        ['refund', KLING_VIDEO_MICRO_EUR],
      ]);
      d.reset();

      const finishedAndRunning = await submitted(c.key, 2, { started: true }, { started: true });
      await d.finish(d.requests()[0]!);
      await sleep(300);
      const pending = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${finishedAndRunning}`, { token: c.key });
      assert.equal(pending.body.status, 'pending', 'one request still runs');
      const second = await cancelled(finishedAndRunning);
      assert.deepEqual([second.job.cost_in_euro, second.job.refunded_in_euro], [0.5, 0.5]);
      assert.deepEqual([second.rec.cancel_billed, second.rec.cancel_billed_units], [true, 1]);
      assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * KLING_VIDEO_MICRO_EUR);
    });

    test('forged callbacks for a pending job: 401 in the error shape, the job not polled, nothing changes', async () => {
      const c = await newCustomer(stack, 5);
      const id = await submitted(c.key, 1);
      const [request_id] = d.requests();
      const row = await pollRowOf(stack, id);
      assert.ok(row, 'the job has its poll row');
      for (const f of d.forgeries(request_id!)) {
        const r = await http(stack.baseUrl, 'POST', `/v2/provider-callbacks/${d.backend}/${id}`, { headers: f.headers, rawBody: f.body });
        assert.equal(r.status, 401, JSON.stringify(r.body));
        assert.equal(r.body.error.type, 'authentication_error');
        assert.equal(r.body.error.code, 'invalid_signature');
      }
      assert.deepEqual(await pollRowOf(stack, id), row, 'not made due');
      await sleep(500);
      const still = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
      assert.equal(still.body.status, 'pending');
      assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - KLING_VIDEO_MICRO_EUR);
      // The real callback still ends it.
      await d.finish(request_id!);
      assert.equal((await watchJob(stack, c.key, id, 10_000)).job.status, 'succeeded');
      assert.equal(await signalsOf(stack, id), 1);
    });

    test('the same callback again and again (before and after settlement): acknowledged, one signal, one settlement', async () => {
      const c = await newCustomer(stack, 5);
      const id = await submitted(c.key, 1, { fails: 'The prompt was refused' });
      const [request_id] = d.requests();
      await d.finish(request_id!);
      const replays = await Promise.all([d.redeliver(request_id!), d.redeliver(request_id!), d.redeliver(request_id!)]);
      assert.deepEqual(replays, [200, 200, 200]);
      const { job } = await watchJob(stack, c.key, id, 10_000);
      assert.equal(job.status, 'failed');
      assert.equal(await d.redeliver(request_id!), 200, 'after settlement: acknowledged');
      await sleep(500);
      assert.equal(await signalsOf(stack, id), 1, 'told once that the operation ended');
      assert.deepEqual(await ledgerOf(stack, id), [
        ['charge', -KLING_VIDEO_MICRO_EUR],
        ['refund', KLING_VIDEO_MICRO_EUR],
      ]);
      const after = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
      assert.deepEqual(after.body, job);
      assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    });
  });

  describe(`${d.backend}: completion by polling (callbacks dropped, polls every ${POLLED_MS} ms)`, () => {
    let stack: Stack;
    const receivers: Receiver[] = [];
    suiteStack(d.env, POLLED_MS, (s) => (stack = s), receivers);
    const receiverFor = async (key: string) => {
      const r = await webhookReceiver(stack, key);
      receivers.push(r);
      return r;
    };

    test('the job ends by polls alone; progress and queue_position only move forward on GET and are in the webhook event', async () => {
      const c = await newCustomer(stack, 5);
      const receiver = await receiverFor(c.key);
      d.dropCallbacks(true);
      d.planPolled();
      const id = await createJob(stack, c.key, klingJob());
      const { job, samples } = await watchJob(stack, c.key, id, 20_000, 20);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.backend, d.backend);
      assert.equal(job.progress, 100);
      assert.equal(job.cost_in_euro, 0.5);
      assert.ok(d.callbacks().length === 1 && d.callbacks()[0]!.answered === undefined, 'the callback was dropped');
      assertOnlyForward(samples);
      const progress = new Set(samples.flatMap((s) => (s.progress === null ? [] : [s.progress])));
      const positions = new Set(samples.flatMap((s) => (s.queue_position === null ? [] : [s.queue_position])));
      if (d.reportsProgress) assert.ok(progress.size >= 2, `progress seen: ${JSON.stringify(samples)}`);
      else assert.equal(progress.size, 0);
      if (d.reportsQueuePosition) assert.ok(positions.size >= 2, `queue positions seen: ${JSON.stringify(samples)}`);
      else assert.equal(positions.size, 0);
      const event = await eventFor(receiver, id);
      assert.equal(event.data.backend, d.backend);
      assert.equal(event.data.progress, 100);
      assert.equal(event.data.queue_position, null);
      assert.equal(await signalsOf(stack, id), 1);
      assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - KLING_VIDEO_MICRO_EUR);
    });

    if (d.reportsProgress) {
      test('a job that fails after some progress: its webhook event says the progress GET says', async () => {
        const c = await newCustomer(stack, 5);
        const receiver = await receiverFor(c.key);
        d.dropCallbacks(true);
        replicate.defaultPlan = { starting_polls: 0, processing_polls: 3, outcome: 'failed', error: 'The model ran out of memory' };
        const id = await createJob(stack, c.key, klingJob());
        const { job, samples } = await watchJob(stack, c.key, id, 20_000, 20);
        assert.equal(job.status, 'failed');
        assertOnlyForward(samples);
        assert.ok(typeof job.progress === 'number' && job.progress > 0, `progress kept: ${job.progress}`);
        const event = await eventFor(receiver, id);
        assert.equal(event.data.progress, job.progress);
        assert.equal(event.data.backend, d.backend);
        assert.equal(job.refunded_in_euro, 0.5);
      });
    }
  });
}

describe('fallback: the first backend refuses the submission', () => {
  let stack: Stack;
  suiteStack(
    () => ({ ...fal.env(), ...replicate.env() }),
    NEVER_POLLED_MS,
    (s) => (stack = s),
  );

  test('fal answers 503: the job runs on Replicate, says so, at the same price', async () => {
    const c = await newCustomer(stack, 5);
    fal.fault({ route: 'submit', status: 503, body: { detail: 'Service temporarily unavailable' } });
    replicate.plans = [{ starting_polls: NEVER }];
    const id = await createJob(stack, c.key, klingJob());
    const op = await waitSubmitted(stack, id);
    assert.equal(op.backend, 'replicate');
    assert.equal(fal.requestsTo('submit').length, 1);
    assert.equal(replicate.requestsTo('create').length, 1);
    const pending = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
    assert.equal(pending.body.backend, 'replicate');
    assert.equal(pending.body.estimated_cost_in_euro, 0.5);
    await replicate.finishAll();
    const { job } = await watchJob(stack, c.key, id, 10_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.backend, 'replicate');
    assert.equal(job.cost_in_euro, 0.5);
    assert.deepEqual(await ledgerOf(stack, id), [['charge', -KLING_VIDEO_MICRO_EUR]]);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - KLING_VIDEO_MICRO_EUR);
  });

  test('fal answers 429 with Retry-After: counted by backend, operation and code with the wait it asked; the job settles on Replicate, counted by its model and backend', async () => {
    // A sample's value by its exposed name (a histogram's _sum is a value of the histogram's metric).
    const count = async (name: string, labels: Record<string, string>) =>
      (await registry.getMetricsAsJSON())
        .flatMap((m) => m.values.map((v) => ({ ...v, name: (v as { metricName?: string }).metricName ?? m.name })))
        .filter((v) => v.name === name && Object.entries(labels).every(([k, x]) => v.labels[k] === x))
        .reduce((sum, v) => sum + v.value, 0);
    const refused = { backend: 'fal', operation: 'submit', code: 'rate_limited' };
    const before = {
      errors: await count('video_provider_errors_total', refused),
      waits: await count('video_provider_retry_after_seconds_sum', { backend: 'fal', operation: 'submit' }),
      settled: await count('video_jobs_settled_by_backend_total', { backend: 'replicate', outcome: 'succeeded', model: klingJob().model }),
    };
    const c = await newCustomer(stack, 5);
    fal.fault({ route: 'submit', status: 429, body: { detail: 'Too many requests' }, headers: { 'retry-after': '7' } });
    replicate.plans = [{ starting_polls: NEVER }];
    const id = await createJob(stack, c.key, klingJob());
    assert.equal((await waitSubmitted(stack, id)).backend, 'replicate');
    assert.equal(await count('video_provider_errors_total', refused), before.errors + 1);
    assert.equal(await count('video_provider_retry_after_seconds_sum', { backend: 'fal', operation: 'submit' }), before.waits + 7);
    await replicate.finishAll();
    const { job } = await watchJob(stack, c.key, id, 10_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(
      await count('video_jobs_settled_by_backend_total', { backend: 'replicate', outcome: 'succeeded', model: klingJob().model }),
      before.settled + 1,
    );
  });

  test("fal refuses the input (422): final, no fallback; refunded in full with fal's message", async () => {
    const c = await newCustomer(stack, 5);
    fal.fault({
      route: 'submit',
      status: 422,
      body: { detail: [{ loc: ['body', 'prompt'], msg: 'the prompt is longer than this model accepts', type: 'value_error' }] },
    });
    const id = await createJob(stack, c.key, klingJob());
    const { job } = await watchJob(stack, c.key, id, 10_000);
    assert.equal(job.status, 'failed');
    assert.equal(job.error.code, 'invalid_request');
    assert.match(job.error.message, /prompt: the prompt is longer than this model accepts/);
    assert.equal(job.refunded_in_euro, 0.5);
    assert.equal(replicate.requestsTo('create').length, 0, 'a final refusal is not sent elsewhere');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
  });
});
