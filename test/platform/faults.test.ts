// The fault suite: the scale-out topology (`npm run api` and `npm run worker` as real
// processes) on a PostgreSQL and a Temporal server of this file's own, which it kills with SIGKILL and
// starts again. Each fault is one an operator or an outage causes: a workflow terminated by hand, no
// worker for longer than a create waits, PostgreSQL or Temporal dying with jobs pending, a worker that
// stalls in the middle of a charge, a storage write that fails for one of n videos, and speech racing a
// small balance, and a provider's accepted operation that cannot be recorded (PostgreSQL killed, or the
// worker killed, between the provider's answer and the record). After each: every job terminal, balance =
// credits - what was delivered, the ledger audit (which looks up every pending job's workflow) ok, and
// provider calls (or the Replicate fake's predictions) counted where they matter.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { Client, Connection } from '@temporalio/client';
import { createPool, type Db } from '../../src/db/pool.js';
import { providerCalls } from '../../src/providers/simulator-usage.js';
import { jobIdForIdempotencyKey } from '../../src/video-jobs/service.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { freePort } from '../helpers/infra.js';
import { startKillablePostgres, startKillableTemporal } from '../helpers/killable-infra.js';
import { ADMIN_TOKEN, http, simJob } from '../helpers/stack.js';
import { ReplicateFake } from '../fakes/replicate-fake.js';
import { KLING_VIDEO_MICRO_EUR, klingJob } from '../helpers/provider-jobs.js';

const RECONCILE_INTERVAL_MS = 2_000;
const CREATE_TIMEOUT_MS = 6_000;

let root: string;
let pg: Awaited<ReturnType<typeof startKillablePostgres>>;
let temporal: Awaited<ReturnType<typeof startKillableTemporal>>;
let db: Db;
let client: Client;
let env: Record<string, string>;
let api: string;
const children: ChildProcess[] = [];
let worker: ChildProcess;
const replicate = new ReplicateFake();

before(async () => {
  root = fs.mkdtempSync(path.join(process.env['TEST_TMP_DIR'] ?? os.tmpdir(), 'faults-'));
  fs.chmodSync(root, 0o755);
  pg = await startKillablePostgres(root);
  temporal = await startKillableTemporal(root);
  await replicate.start();
  const port = await freePort();
  env = {
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: 'faults',
    ADMIN_TOKEN,
    URL_SIGNING_SECRET: 'fault-suite-url-signing-secret-0123456789',
    DATA_DIR: path.join(root, 'data'),
    PORT: String(port),
    VIDEO_POLL_INTERVAL_MS: '200',
    VIDEO_POLL_MAX_INTERVAL_MS: '500',
    VIDEO_JOB_TIMEOUT_MS: '180000',
    VIDEO_CREATE_TIMEOUT_MS: String(CREATE_TIMEOUT_MS),
    RECONCILE_INTERVAL_MS: String(RECONCILE_INTERVAL_MS),
    SIMULATOR: 'on',
    RATE_LIMIT_PER_MINUTE: '100000',
    // Replicate (its fake) serves the Kling model of the record faults; the simulator's jobs stay its own.
    ...replicate.env(),
  };
  api = `http://127.0.0.1:${port}`;
  worker = await startEntryProcess({ env }, 'worker', { track: children });
  await startEntryProcess({ env }, 'api', { track: children });
  db = createPool(pg.url, 5);
  client = new Client({ connection: await Connection.connect({ address: temporal.address }), namespace: 'default' });
});

after(async () => {
  killAll(children);
  await client?.connection.close();
  await db?.end();
  await temporal?.stop();
  await pg?.stop();
  await replicate.stop();
  if (!process.env['KEEP_TEST_DATA']) fs.rmSync(root, { recursive: true, force: true });
});

async function customer(credits_in_euro: number) {
  const ws = await http(api, 'POST', '/admin/v1/workspaces', {
    token: ADMIN_TOKEN,
    json: { name: `faults-${randomUUID().slice(0, 6)}`, credits_in_euro },
  });
  assert.equal(ws.status, 201, JSON.stringify(ws.body));
  const key = await http(api, 'POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, { token: ADMIN_TOKEN, json: {} });
  assert.equal(key.status, 201);
  return { workspaceId: ws.body.id as string, key: key.body.key as string, credits_micro_eur: Math.round(credits_in_euro * 1e6) };
}

const create = (key: string, body: unknown, idempotencyKey?: string) =>
  http(api, 'POST', '/v2/videos/generations', {
    token: key,
    json: body,
    ...(idempotencyKey ? { headers: { 'Idempotency-Key': idempotencyKey } } : {}),
  });

async function until<T>(what: string, timeout_ms: number, probe: () => Promise<T | null | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout_ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The job as the API answers it once it has finished (through any outage in between). */
const finished = (key: string, id: string, timeout_ms = 60_000) =>
  until(`job ${id} to finish`, timeout_ms, async () => {
    const r = await http(api, 'GET', `/v2/videos/generations/${id}`, { token: key });
    return r.status === 200 && r.body.status !== 'pending' ? r.body : null;
  });

/**
 * The money of a workspace is exact: no job pending, the balance is its credits minus the cost of what
 * every job and speech request delivered, the ledger agrees, and the audit (with its look at every
 * pending job's workflow) finds nothing it cannot account for.
 */
async function assertMoneyExact(c: { workspaceId: string; credits_micro_eur: number }) {
  const jobs = await db.query<{ status: string; cost_micro_eur: number | null }>(
    'SELECT status, cost_micro_eur FROM video_jobs WHERE workspace_id = $1',
    [c.workspaceId],
  );
  assert.ok(
    jobs.rows.every((j) => j.status !== 'pending'),
    'every job is terminal',
  );
  const speech = await db.query<{ cost: number }>(
    "SELECT COALESCE(sum(cost_micro_eur), 0)::bigint AS cost FROM speech_requests WHERE workspace_id = $1 AND status = 'delivered'",
    [c.workspaceId],
  );
  const costs = jobs.rows.reduce((sum, j) => sum + j.cost_micro_eur!, 0) + speech.rows[0]!.cost;
  const ws = await db.query<{ balance_micro_eur: number; held_micro_eur: number }>(
    'SELECT balance_micro_eur, held_micro_eur FROM workspaces WHERE id = $1',
    [c.workspaceId],
  );
  assert.equal(ws.rows[0]!.balance_micro_eur, c.credits_micro_eur - costs, 'balance = credits - costs');
  assert.equal(ws.rows[0]!.held_micro_eur, 0, 'nothing left held');
  const audit = await http(api, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
  assert.equal(audit.status, 200);
  assert.equal(audit.body.ok, true, JSON.stringify(audit.body));
}

/** Waits until a statement waits on a lock this test holds (`waiters`: a query returning a row per waiter). */
const untilWaiting = (what: string, waiters: string) => until(what, 10_000, async () => ((await db.query(waiters)).rowCount ?? 0) > 0);

/**
 * An operator's mistake while a worker waits on a lock the test holds: the worker is killed, the job's
 * workflow terminated, the lock let go and a new worker started. Returns when it was started.
 */
async function killWorkerAndTerminate(lock: { query(sql: string): Promise<unknown> }, jobId: string): Promise<number> {
  worker.kill('SIGKILL');
  await client.workflow.getHandle(videoJobWorkflowId(jobId)).terminate('operator mistake');
  await lock.query('ROLLBACK');
  const started_at = Date.now();
  worker = await startEntryProcess({ env }, 'worker', { track: children });
  return started_at;
}

const operationOf = async (jobId: string) =>
  (await db.query<{ operation_id: string | null }>('SELECT operation_id FROM video_jobs WHERE id = $1', [jobId])).rows[0]?.operation_id ??
  null;

describe('an operator terminates pending jobs in Temporal', () => {
  test('a job whose provider operation is known is resumed by the reconciler and billed for what it delivered', async () => {
    const c = await customer(5);
    const r = await create(c.key, simJob({ delay_ms: 4_000, videos: 1 }, { n: 2 }));
    assert.equal(r.status, 202);
    await until('the operation to be recorded', 10_000, () => operationOf(r.body.id));
    const handle = client.workflow.getHandle(videoJobWorkflowId(r.body.id));
    const terminated_run = (await handle.describe()).runId;
    const terminated_at = Date.now();
    await handle.terminate('operator mistake');
    const audit = await http(api, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
    if (audit.body.ok) {
      // The reconciler (every 2 s) can resume the job between the terminate and the audit; the audit
      // may then find it accounted for only because a new run of its workflow exists.
      assert.notEqual((await handle.describe()).runId, terminated_run, 'an audit that finds nothing to report saw a resumed job');
    } else {
      assert.deepEqual(
        audit.body.unaccounted_jobs.map((u: { job_id: string; reason: string }) => [u.job_id, u.reason]),
        [[r.body.id, 'workflow_not_running']],
        'the audit sees the pending job nothing runs',
      );
    }
    const job = await finished(c.key, r.body.id);
    const settle_ms = Date.now() - terminated_at;
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos.length, 1);
    assert.equal(job.cost_in_euro, 0.2);
    assert.equal(job.refunded_in_euro, 0.2);
    assert.ok(settle_ms < 2 * RECONCILE_INTERVAL_MS + 8_000, `settled ${settle_ms} ms after the terminate`);
    process.stderr.write(`faults: terminated job with a known operation settled ${settle_ms} ms after the terminate\n`);
    await assertMoneyExact(c);
  });

  test('a job terminated before its operation was recorded (its worker killed mid-submit) is failed and refunded in full', async () => {
    const c = await customer(5);
    // Hold the provider's submit in the middle: the simulated provider cannot write its operation.
    const lock = await db.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE simulator.video_operations IN SHARE MODE');
    let settled_ms = 0;
    try {
      const r = await create(c.key, simJob({ delay_ms: 0 }, { n: 2 }));
      assert.equal(r.status, 202);
      // The provider has the submit: its statement waits for the table this test holds.
      await untilWaiting(
        'the submit to reach the provider',
        "SELECT 1 FROM pg_locks WHERE relation = 'simulator.video_operations'::regclass AND NOT granted",
      );
      const t0 = await killWorkerAndTerminate(lock, r.body.id);
      const job = await finished(c.key, r.body.id);
      settled_ms = Date.now() - t0;
      assert.equal(job.status, 'failed');
      assert.equal(job.error.code, 'job_interrupted');
      assert.equal(job.cost_in_euro, 0);
      assert.equal(job.refunded_in_euro, 0.4);
      assert.equal(await operationOf(r.body.id), null);
    } finally {
      await lock.query('ROLLBACK').catch(() => {});
      lock.release();
    }
    process.stderr.write(`faults: terminated job with no known operation refunded ${settled_ms} ms after a worker was back\n`);
    await assertMoneyExact(c);
  });
});

describe('a worker killed in the middle of a reconcile', () => {
  test('the reconcile it was running is taken over within seconds, not after minutes of skipped runs', async () => {
    const c = await customer(5);
    const r = await create(c.key, simJob({ delay_ms: 8_000 }, { n: 1 }));
    assert.equal(r.status, 202);
    await until('the operation to be recorded', 10_000, () => operationOf(r.body.id));
    // Hold the jobs' table: the reconciler's next run waits on it, in the middle of its work (after
    // Temporal listed the running jobs, before it read the pending ones).
    const lock = await db.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE video_jobs IN ACCESS EXCLUSIVE MODE');
    let settle_ms = 0;
    try {
      await untilWaiting(
        'a reconcile to wait on the jobs',
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT id, created_at FROM video_jobs%'",
      );
      const t0 = await killWorkerAndTerminate(lock, r.body.id);
      // Only a reconcile restarts the terminated job: the one the dead worker held must not block them.
      const job = await finished(c.key, r.body.id, 45_000);
      settle_ms = Date.now() - t0;
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.cost_in_euro, 0.2);
      // Taken over after the activity's heartbeat timeout (10 s), not its old one (a minute: this test's wait).
      assert.ok(settle_ms < 10_000 + 2 * RECONCILE_INTERVAL_MS + 15_000, `settled ${settle_ms} ms after a worker was back`);
    } finally {
      await lock.query('ROLLBACK').catch(() => {});
      lock.release();
    }
    process.stderr.write(
      `faults: a reconcile held by a killed worker; the terminated job settled ${settle_ms} ms after a worker was back\n`,
    );
    await assertMoneyExact(c);
  });
});

describe('no worker for longer than a create waits', () => {
  test('creates answer 503 and are never charged, also once a worker returns; a retry with the key is one paid job', async () => {
    const c = await customer(5);
    worker.kill('SIGKILL');
    const submits = await providerCalls(db, 'video_submit');
    const [keyed, unkeyed] = await Promise.all([create(c.key, simJob(), 'no-worker-1'), create(c.key, simJob())]);
    for (const r of [keyed, unkeyed]) {
      assert.equal(r.status, 503, JSON.stringify(r.body));
      assert.equal(r.headers.get('retry-after'), '5');
      assert.match(r.body.error.message, /nothing was charged/);
    }
    worker = await startEntryProcess({ env }, 'worker', { track: children });
    // The run of the keyed attempt starts now, long after its acceptance window: it refuses to charge.
    const late = (await client.workflow.getHandle(videoJobWorkflowId(jobIdForIdempotencyKey(c.workspaceId, 'no-worker-1'))).result()) as {
      status: string;
    };
    assert.equal(late.status, 'not_accepted');
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(
      (await db.query('SELECT count(*)::int AS n FROM video_job_refusals WHERE workspace_id = $1', [c.workspaceId])).rows[0].n,
      2,
    );
    assert.equal((await db.query('SELECT count(*)::int AS n FROM video_jobs WHERE workspace_id = $1', [c.workspaceId])).rows[0].n, 0);
    assert.equal(await providerCalls(db, 'video_submit'), submits, 'nothing refused reached the provider');
    const retried = await create(c.key, simJob(), 'no-worker-1');
    assert.equal(retried.status, 202, JSON.stringify(retried.body));
    assert.equal(retried.body.id, jobIdForIdempotencyKey(c.workspaceId, 'no-worker-1'));
    assert.equal((await finished(c.key, retried.body.id)).status, 'succeeded');
    assert.equal(await providerCalls(db, 'video_submit'), submits + 1);
    await assertMoneyExact(c);
  });
});

describe('a worker stalls in the middle of a charge', () => {
  // The charge is one statement (video_job_charge): the worker can stall while it waits in PostgreSQL, not
  // inside an open transaction. Held out of the workspace row, the statement waits for it (at most 2 s a
  // wait); the worker is frozen meanwhile. `fresh_ms` only takes a wait that began less than this ago.
  const chargeWaitingForWorkspace = (fresh_ms: number) =>
    until(
      'the charge to wait for the workspace row',
      10_000,
      async () =>
        (
          await db.query(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%video_job_charge(%' AND clock_timestamp() - query_start < $1 * interval '1 millisecond'",
            [fresh_ms],
          )
        ).rowCount,
    );

  test('its charge, held out of the workspace row until the API answered 503, never commits; the retry with the key is charged once', async () => {
    const c = await customer(5);
    const row = await db.connect();
    await row.query('BEGIN');
    await row.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [c.workspaceId]);
    const pending = create(c.key, simJob(), 'stalled-charge');
    let answered;
    let held = true;
    try {
      await chargeWaitingForWorkspace(60_000);
      worker.kill('SIGSTOP'); // frozen while its charge waits
      // The statement gives up on the row (its lock timeout) and rolls back, without its worker.
      await until(
        'the charge to give up waiting',
        10_000,
        async () =>
          (await db.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%video_job_charge(%'"))
            .rowCount === 0,
      );
      // Released before the API stops waiting (its refusal's record needs the row's key lock).
      await row.query('COMMIT');
      held = false;
      row.release();
      answered = await pending;
    } finally {
      if (held) {
        await row.query('ROLLBACK');
        row.release();
      }
      worker.kill('SIGCONT');
    }
    assert.equal(answered.status, 503, JSON.stringify(answered.body));
    await new Promise((r) => setTimeout(r, 3_000));
    const jobId = jobIdForIdempotencyKey(c.workspaceId, 'stalled-charge');
    assert.equal(await operationOf(jobId), null);
    assert.equal(
      (await db.query('SELECT count(*)::int AS n FROM video_jobs WHERE id = $1', [jobId])).rows[0].n,
      0,
      'the stalled charge never committed',
    );
    assert.equal(
      (await db.query("SELECT count(*)::int AS n FROM video_job_refusals WHERE job_id = $1 AND reason = 'not_accepted_in_time'", [jobId]))
        .rows[0].n,
      1,
    );
    const retried = await create(c.key, simJob(), 'stalled-charge');
    assert.equal(retried.status, 202, JSON.stringify(retried.body));
    assert.equal((await finished(c.key, jobId)).status, 'succeeded');
    await assertMoneyExact(c);
  });

  test('a charge it sent completes without it: the API, done waiting for the frozen worker, finds the job charged and answers 202', async () => {
    const c = await customer(5);
    const row = await db.connect();
    await row.query('BEGIN');
    await row.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [c.workspaceId]);
    const sent_at_ms = Date.now();
    const pending = create(c.key, simJob(), 'frozen-worker');
    let answered;
    let held = true;
    try {
      await chargeWaitingForWorkspace(1_000);
      worker.kill('SIGSTOP');
      await row.query('COMMIT'); // the charge's statement goes on, in PostgreSQL, without its worker
      held = false;
      row.release();
      const jobId = jobIdForIdempotencyKey(c.workspaceId, 'frozen-worker');
      await until('the charge to commit', 5_000, async () => (await db.query('SELECT 1 FROM video_jobs WHERE id = $1', [jobId])).rowCount);
      // Frozen until the API has stopped waiting for the update (it then decides the attempt: charged), and
      // no longer: a worker frozen past its workflow task's timeout (10 s) is left out (see the note of
      // its run finds itself late and refuses unseen; the reconciler then refunds the job in full).
      await new Promise((r) => setTimeout(r, Math.max(0, sent_at_ms + CREATE_TIMEOUT_MS + 500 - Date.now())));
      worker.kill('SIGCONT');
      answered = await pending;
    } finally {
      worker.kill('SIGCONT');
      if (held) {
        await row.query('ROLLBACK');
        row.release();
      }
    }
    assert.equal(answered.status, 202, JSON.stringify(answered.body));
    assert.equal((await finished(c.key, answered.body.id)).status, 'succeeded');
    await assertMoneyExact(c);
  });
});

describe('one of n videos cannot be stored', () => {
  test('the stored videos are delivered and charged; the one that failed is refunded as a shortfall', async () => {
    const c = await customer(5);
    const jobId = jobIdForIdempotencyKey(c.workspaceId, 'partial-storage');
    // A directory where the second video's file goes: that write fails, for good, on every attempt.
    fs.mkdirSync(path.join(env['DATA_DIR']!, 'storage', 'videos', jobId, '1.mp4'), { recursive: true });
    const r = await create(c.key, simJob({ delay_ms: 0 }, { n: 3 }), 'partial-storage');
    assert.equal(r.status, 202);
    const job = await finished(c.key, jobId);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos.length, 2);
    assert.equal(job.cost_in_euro, 0.4);
    assert.equal(job.refunded_in_euro, 0.2);
    for (const v of job.videos) assert.equal((await fetch(v.url)).status, 200);
    await assertMoneyExact(c);
  });
});

describe('speech on a small balance', () => {
  test('20 concurrent requests on a balance covering 3: 3 provider calls; a replay never calls the provider or charges', async () => {
    const c = await customer(0.00225); // 3 x 750 micro-euros (5 characters of sim-speech-1)
    const speak = (headers: Record<string, string> = {}) =>
      http(api, 'POST', '/v2/audio/speech', { token: c.key, json: { input: 'hello', voice: 'sim-narrator' }, headers });
    const calls = await providerCalls(db, 'speech');
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => speak(i === 0 ? { 'Idempotency-Key': 'speech-replay' } : {})));
    const ok = results.filter((r) => r.status === 200).length;
    assert.equal(ok, 3);
    assert.equal(results.filter((r) => r.status === 402).length, 17);
    assert.equal((await providerCalls(db, 'speech')) - calls, 3);
    if (results[0]!.status === 200) {
      const replay = await speak({ 'Idempotency-Key': 'speech-replay' });
      assert.equal(replay.status, 200);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal((await providerCalls(db, 'speech')) - calls, 3, 'the replay did not reach the provider');
    }
    await assertMoneyExact(c);
  });
});

describe('PostgreSQL dies with jobs pending', () => {
  test('every request that needs it answers 503 (never 500) while it is down; afterwards the jobs finish, billed exactly', async () => {
    const c = await customer(5);
    const jobs = await Promise.all(
      Array.from({ length: 3 }, (_, i) => create(c.key, simJob({ delay_ms: 3_000, videos: 1 + (i % 2) }, { n: 2 }))),
    );
    for (const j of jobs) assert.equal(j.status, 202);
    // A key the API has not seen yet: its lookup needs PostgreSQL (a key seen in the last seconds is
    // remembered, so with it a request that needs nothing else, such as the model list, may still answer).
    const unseen = await customer(1);
    await pg.kill();
    const during = [
      await create(c.key, simJob()),
      await http(api, 'GET', `/v2/videos/generations/${jobs[0]!.body.id}`, { token: c.key }),
      await http(api, 'GET', '/v2/models', { token: unseen.key }),
      await http(api, 'POST', '/v2/audio/speech', { token: c.key, json: { input: 'hi', voice: 'sim-narrator' } }),
      await http(api, 'GET', `/admin/v1/workspaces/${c.workspaceId}`, { token: ADMIN_TOKEN }),
      await http(api, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN }),
    ];
    for (const r of during) {
      assert.equal(r.status, 503, JSON.stringify(r.body));
      assert.equal(r.body.error.type, 'api_error');
      assert.equal(r.headers.get('retry-after'), '5');
    }
    // Readiness is checked at most every 1.5 s.
    await until('/readyz to answer 503', 5_000, async () => (await http(api, 'GET', '/readyz')).status === 503);
    await new Promise((r) => setTimeout(r, 2_000));
    await pg.restart();
    await until('the API to be ready again', 20_000, async () => (await http(api, 'GET', '/readyz')).status === 200);
    for (const [i, j] of jobs.entries()) {
      const job = await finished(c.key, j.body.id);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.videos.length, 1 + (i % 2));
    }
    const after = await create(c.key, simJob({ delay_ms: 0 }));
    assert.equal(after.status, 202);
    await finished(c.key, after.body.id);
    await assertMoneyExact(c);
  });
});

describe('Temporal dies with jobs pending', () => {
  test('creates answer 503 and charge nothing while it is down; status still answers; afterwards the jobs finish, billed exactly', async () => {
    const c = await customer(5);
    const jobs = await Promise.all(Array.from({ length: 3 }, () => create(c.key, simJob({ delay_ms: 3_000 }, { n: 2 }))));
    for (const j of jobs) assert.equal(j.status, 202);
    await temporal.kill();
    const down = await create(c.key, simJob(), 'during-temporal-outage');
    assert.equal(down.status, 503, JSON.stringify(down.body));
    assert.equal(down.headers.get('retry-after'), '5');
    const status = await http(api, 'GET', `/v2/videos/generations/${jobs[0]!.body.id}`, { token: c.key });
    assert.equal(status.status, 200);
    assert.equal(status.body.status, 'pending');
    // Ready all along: Temporal is not part of readiness (reads like the one above still work).
    assert.equal((await http(api, 'GET', '/readyz')).status, 200);
    await new Promise((r) => setTimeout(r, 2_000));
    await temporal.restart();
    for (const j of jobs) assert.equal((await finished(c.key, j.body.id, 90_000)).status, 'succeeded');
    // The refused key retried as its 503 says: with the same key, after its Retry-After. Just after the
    // restart a first try may still not be accepted within the create's window (6 s here): that answer
    // is the same clean 503, and charges nothing (checked by the money check below).
    let retried = await create(c.key, simJob({ delay_ms: 0 }), 'during-temporal-outage');
    for (let tries = 1; retried.status === 503 && tries < 3; tries++) {
      assert.equal(retried.headers.get('retry-after'), '5', JSON.stringify(retried.body));
      assert.equal(retried.body.error.type, 'api_error');
      await new Promise((r) => setTimeout(r, 5_000));
      retried = await create(c.key, simJob({ delay_ms: 0 }), 'during-temporal-outage');
    }
    assert.equal(retried.status, 202, JSON.stringify(retried.body));
    await finished(c.key, retried.body.id);
    await assertMoneyExact(c);
  });
});

describe('a provider accepted an operation the worker could not record', () => {
  /** Every prediction at Replicate for the job: recorded with it, or cancelled (aborted: cancelled before it started). */
  async function assertEveryPredictionRecordedOrCancelled(jobId: string) {
    const recorded = (await operationOf(jobId))?.split(',') ?? [];
    const predictions = [...replicate.predictions.values()];
    for (const p of predictions) {
      assert.ok(
        recorded.includes(p.id) || p.status === 'canceled' || p.status === 'aborted',
        `prediction ${p.id} (${p.status}) is neither recorded nor cancelled`,
      );
    }
    return { predictions: predictions.length, recorded: recorded.length };
  }

  test('PostgreSQL killed between the answer and the record: the operation is recorded once it is back, or cancelled; the job is charged once', async () => {
    const c = await customer(5);
    replicate.reset();
    replicate.dropCallbacks = true;
    replicate.defaultPlan = { starting_polls: 1, processing_polls: 1 };
    // The prediction is made after 3 s: PostgreSQL is down by then, and for 8 s more.
    replicate.fault({ route: 'create', delay_ms: 3_000 });
    const r = await create(c.key, klingJob());
    assert.equal(r.status, 202, JSON.stringify(r.body));
    await until('the create to reach Replicate', 10_000, async () => replicate.requestsTo('create').length === 1);
    await pg.kill();
    await new Promise((res) => setTimeout(res, 11_000));
    await pg.restart();
    const job = await finished(c.key, r.body.id, 90_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.cost_in_euro, KLING_VIDEO_MICRO_EUR / 1e6);
    const counted = await assertEveryPredictionRecordedOrCancelled(r.body.id);
    assert.equal(counted.recorded, 1);
    assert.ok(counted.predictions <= 2, `${counted.predictions} predictions for one video`);
    process.stderr.write(
      `faults: PostgreSQL killed between accept and record: ${counted.predictions} prediction(s), ${counted.predictions - 1} cancelled\n`,
    );
    await assertMoneyExact(c);
  });

  test('the worker killed while its record waits: the retry finds the accepted prediction and records it; one prediction in all', async () => {
    const c = await customer(5);
    replicate.reset();
    replicate.dropCallbacks = true;
    replicate.defaultPlan = { starting_polls: 1, processing_polls: 1 };
    const lock = await db.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE video_job_polls IN SHARE MODE');
    let r;
    try {
      r = await create(c.key, klingJob());
      assert.equal(r.status, 202, JSON.stringify(r.body));
      // The poller's own claims wait on the lock too: the record's wait is the one after Replicate's answer.
      await until('Replicate to accept the prediction', 30_000, async () => replicate.predictions.size === 1);
      await untilWaiting(
        'the record to wait for the poll rows',
        "SELECT 1 FROM pg_locks WHERE relation = 'video_job_polls'::regclass AND NOT granted",
      );
      assert.equal(replicate.predictions.size, 1, 'Replicate accepted the prediction');
      // The attempt's heartbeat (the accepted prediction) reaches Temporal; then the worker dies, and its
      // connections with it.
      await new Promise((res) => setTimeout(res, 1_000));
      worker.kill('SIGKILL');
      await db.query("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE relation = 'video_job_polls'::regclass AND NOT granted");
      await lock.query('ROLLBACK');
      worker = await startEntryProcess({ env }, 'worker', { track: children });
    } finally {
      await lock.query('ROLLBACK').catch(() => {});
      lock.release();
    }
    const job = await finished(c.key, r.body.id, 90_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    const counted = await assertEveryPredictionRecordedOrCancelled(r.body.id);
    assert.deepEqual(counted, { predictions: 1, recorded: 1 }, 'the retry did not create another prediction');
    assert.equal(replicate.requestsTo('create').length, 1);
    await assertMoneyExact(c);
  });
});
