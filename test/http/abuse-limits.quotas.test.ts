// Limits per key and per workspace, against the real API, worker, PostgreSQL and Temporal: read rate
// limits, the per-workspace limit of pending jobs (enforced by the charge itself), and webhook
// deliveries shared fairly between workspaces and between one workspace's endpoints.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { chargeVideoJob } from '../../src/video-jobs/billing.js';
import { createWorkspace } from '../../src/account/workspaces.js';
import { createLogger } from '../../src/logger.js';
import { startApi, type RunningApi } from '../../src/runtime/api.js';
import {
  ADMIN_TOKEN,
  assertAuditHolds,
  balanceMicro,
  http as api,
  infra,
  newCustomer,
  simJob,
  startStack,
  waitForJob,
  type Stack,
} from '../helpers/stack.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { stack, create, withImage, inputsOf, scratchDatabase, chargeOf, useAbuseStack } from './abuse-limits.setup.js';

useAbuseStack();

describe('reads', () => {
  let limited: RunningApi;
  before(async () => {
    // A second API process on the same database and Temporal, with a small read budget.
    limited = await startApi({
      config: { ...stack.config, port: 0, rateLimitReadsPerMinute: 5 },
      db: stack.db,
      temporalAddress: infra().temporalAddress,
      secrets: { adminToken: ADMIN_TOKEN, urlSigningSecret: stack.config.urlSigningSecret!, adminTokenGenerated: false },
      logger: createLogger('silent', 'test'),
    });
  });
  after(async () => {
    await limited.close();
  });

  test('reads are rate limited per key (429 with Retry-After), apart from writes and other keys', async () => {
    const a = await newCustomer(stack, 10);
    const b = await newCustomer(stack, 10);
    const created = await create({ baseUrl: limited.url }, a.key, simJob());
    assert.equal(created.status, 202);
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 7; i++) {
      last = await api(limited.url, 'GET', `/v2/videos/generations/${created.body.id}`, { token: a.key });
      statuses.push(last.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert.equal(last!.body.error.code, 'rate_limited');
    assert.ok(Number(last!.headers.get('retry-after')) >= 1, 'Retry-After');
    const list = await api(limited.url, 'GET', '/v2/videos/generations', { token: a.key });
    assert.equal(list.status, 429, 'every read of the key shares its budget');
    assert.equal((await api(limited.url, 'GET', '/v2/videos/generations', { token: b.key })).status, 200, 'another key is not limited');
    const write = await create({ baseUrl: limited.url }, a.key, simJob());
    assert.equal(write.status, 202, 'writes have their own budget');
    await waitForJob(stack, a.key, created.body.id);
    await waitForJob(stack, a.key, write.body.id);
  });
});

describe('pending jobs per workspace', () => {
  test('the charge refuses a job beyond the workspace limit, charging and recording nothing; exact under concurrency', async () => {
    const db = await scratchDatabase({ 'video_api.max_pending_jobs': 4 });
    try {
      const ws = await createWorkspace(db, { name: 'limits', credits_micro_eur: 10_000_000 });
      // The session's default (the worker's MAX_PENDING_JOBS_PER_WORKSPACE) applies: 4.
      const results = await Promise.all(Array.from({ length: 10 }, () => chargeVideoJob(db, chargeOf(ws.id))));
      assert.equal(results.filter((r) => r.ok).length, 4);
      assert.deepEqual([...new Set(results.filter((r) => !r.ok).map((r) => !r.ok && r.reason))], ['too_many_pending_jobs']);
      const balance = await db.query('SELECT balance_micro_eur FROM workspaces WHERE id = $1', [ws.id]);
      assert.equal(balance.rows[0].balance_micro_eur, 10_000_000 - 4 * 100_000, 'only the accepted jobs are charged');
      assert.equal((await db.query('SELECT count(*)::int AS n FROM video_jobs')).rows[0].n, 4);
      // The workspace's own figure wins over the default; a finished job frees its place.
      await db.query('UPDATE workspaces SET max_pending_jobs = 5 WHERE id = $1', [ws.id]);
      assert.equal((await chargeVideoJob(db, chargeOf(ws.id))).ok, true);
      assert.deepEqual(await chargeVideoJob(db, chargeOf(ws.id)), { ok: false, reason: 'too_many_pending_jobs' });
      await db.query(
        "UPDATE video_jobs SET status = 'failed', cost_micro_eur = 0, refunded_micro_eur = estimated_cost_micro_eur, completed_at = now() WHERE id = (SELECT id FROM video_jobs LIMIT 1)",
      );
      assert.equal((await chargeVideoJob(db, chargeOf(ws.id))).ok, true);
    } finally {
      await db.end();
    }
  });

  test('the admin API sets and shows a workspace limit (null = the default); bad values are 400', async () => {
    const c = await newCustomer(stack, 1);
    const shown = await api(stack.baseUrl, 'GET', `/admin/v1/workspaces/${c.workspaceId}`, { token: ADMIN_TOKEN });
    assert.equal(shown.body.max_pending_jobs, null);
    const set = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, {
      token: ADMIN_TOKEN,
      json: { max_pending_jobs: 3 },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.max_pending_jobs, 3);
    for (const bad of [0, -1, 1.5, 'x']) {
      const r = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, {
        token: ADMIN_TOKEN,
        json: { max_pending_jobs: bad },
      });
      assert.equal(r.status, 400, String(bad));
      assert.equal(r.body.error.param, 'max_pending_jobs');
    }
    const reset = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, {
      token: ADMIN_TOKEN,
      json: { max_pending_jobs: null },
    });
    assert.equal(reset.body.max_pending_jobs, null);
    const missing = await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${randomUUID()}/limits`, {
      token: ADMIN_TOKEN,
      json: { max_pending_jobs: 3 },
    });
    assert.equal(missing.status, 404);
  });

  test('a create beyond the workspace limit answers 429 too_many_pending_jobs and charges nothing', async () => {
    const c = await newCustomer(stack, 10);
    await api(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/limits`, { token: ADMIN_TOKEN, json: { max_pending_jobs: 1 } });
    const first = await create(stack, c.key, simJob({ delay_ms: 3_000 }));
    assert.equal(first.status, 202, JSON.stringify(first.body));
    const before = await balanceMicro(stack, c.workspaceId);
    const second = await create(stack, c.key, withImage(3), { 'idempotency-key': `pending-${randomUUID()}` });
    assert.equal(second.status, 429, JSON.stringify(second.body));
    assert.equal(second.body.error.code, 'too_many_pending_jobs');
    assert.equal(await balanceMicro(stack, c.workspaceId), before, 'nothing charged');
    assert.equal(await inputsOf(stack.db, { workspace_id: c.workspaceId }), 0, 'nothing kept');
    await waitForJob(stack, c.key, first.body.id);
    await assertAuditHolds(stack);
  });
});

describe('webhook deliveries are fair per workspace', () => {
  let sw: Stack;
  before(async () => {
    // Four delivery slots per worker, two per workspace.
    sw = await startStack({
      env: { WEBHOOK_MAX_CONCURRENT_ATTEMPTS: '4', WEBHOOK_MAX_CONCURRENT_ATTEMPTS_PER_WORKSPACE: '2', WEBHOOK_RETRY_INITIAL_MS: '60000' },
    });
  });
  after(async () => {
    await sw.stop();
  });

  test("one workspace's dead endpoints never delay another workspace's deliveries: it holds at most its share of the attempts", async () => {
    const dead = await startReceiver({ fallback: 'hang' });
    const alive = await startReceiver();
    try {
      const a = await newCustomer(sw, 10);
      const b = await newCustomer(sw, 10);
      // A: three endpoints that hang (one attempt at a time each); B: one that answers.
      for (const [c, r] of [
        [a, dead],
        [a, dead],
        [a, dead],
        [b, alive],
      ] as const) {
        const hook = await api(sw.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: r.url } });
        assert.equal(hook.status, 201, JSON.stringify(hook.body));
      }
      // Eight jobs of A whose 24 deliveries hang (each attempt waits out the sender's 10 s timeout).
      const jobs = await Promise.all(Array.from({ length: 8 }, () => create(sw, a.key, simJob({ delay_ms: 0 }))));
      for (const j of jobs) await waitForJob(sw, a.key, j.body.id);
      await dead.waitFor(2, 10_000);
      await new Promise((r) => setTimeout(r, 1_000));
      assert.equal(dead.received.length, 2, "A's attempts in progress at once: its share, not every slot");
      const bJob = await create(sw, b.key, simJob({ delay_ms: 0 }));
      const done = await waitForJob(sw, b.key, bJob.body.id);
      const finished_ms = done.completed * 1000;
      const [got] = await alive.waitFor(1, 8_000);
      assert.ok(got!.at_ms - finished_ms < 5_000, `B's delivery waited ${got!.at_ms - finished_ms} ms behind A's`);
    } finally {
      await dead.close();
      await alive.close();
    }
  });

  test("a workspace's hanging endpoint never delays its other endpoints: an endpoint holds one of its slots at a time", async () => {
    const dead = await startReceiver({ fallback: 'hang' });
    const alive = await startReceiver();
    try {
      const c = await newCustomer(sw, 10);
      for (const r of [dead, alive]) {
        const hook = await api(sw.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: r.url } });
        assert.equal(hook.status, 201, JSON.stringify(hook.body));
      }
      const jobs = await Promise.all(Array.from({ length: 4 }, () => create(sw, c.key, simJob({ delay_ms: 0 }))));
      const finished = await Promise.all(jobs.map((j) => waitForJob(sw, c.key, j.body.id)));
      const received = await alive.waitFor(4, 12_000);
      const last_ms = Math.max(...received.map((r) => r.at_ms));
      const first_done_ms = Math.min(...finished.map((j) => j.completed * 1000));
      assert.ok(
        last_ms - first_done_ms < 8_000,
        `the healthy endpoint got its 4 events ${last_ms - first_done_ms} ms after the first job finished`,
      );
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(dead.received.length, 1, 'the hanging endpoint holds one attempt at a time');
    } finally {
      await dead.close();
      await alive.close();
    }
  });
});
