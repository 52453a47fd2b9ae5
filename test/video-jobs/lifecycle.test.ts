// The job lifecycle and per-key spend limits, end to end on the real
// stack: list with cursor pagination and filters, cancel (also racing completion), delete, and 50
// creates racing against a key's limit. The ledger audit after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  ADMIN_TOKEN,
  assertAuditHolds,
  balanceMicro,
  http,
  newCustomer,
  simJob,
  startStack,
  waitForJob,
  type Stack,
} from '../helpers/stack.js';
import { providerCalls } from '../../src/providers/simulator-usage.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

// sim-video-1 at 720p, with audio: 0.05 EUR per second; a 4 s video is 200_000 micro-euros.
const UNIT = 200_000;
const create = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: key, json: body, headers });

describe('list', () => {
  test('newest first, a page at a time with after and has_more; filters by status and model; only the workspace', async () => {
    const c = await newCustomer(stack, 10);
    const other = await newCustomer(stack, 10);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await create(c.key, simJob({ delay_ms: 0, ...(i === 2 ? { outcome: 'fail' } : {}) }, { n: 1, prompt: `job ${i}` }));
      assert.equal(r.status, 202);
      ids.push(r.body.id);
    }
    await create(other.key, simJob({ delay_ms: 0 }, { n: 1 }));
    for (const id of ids) await waitForJob(stack, c.key, id);
    const newestFirst = [...ids].reverse();

    const page1 = await http(stack.baseUrl, 'GET', '/v2/videos/generations?limit=2', { token: c.key });
    assert.equal(page1.status, 200);
    assert.equal(page1.body.object, 'list');
    assert.deepEqual(
      page1.body.data.map((j: { id: string }) => j.id),
      newestFirst.slice(0, 2),
    );
    assert.equal(page1.body.has_more, true);
    const page2 = await http(stack.baseUrl, 'GET', `/v2/videos/generations?limit=2&after=${page1.body.data[1].id}`, { token: c.key });
    assert.deepEqual(
      page2.body.data.map((j: { id: string }) => j.id),
      newestFirst.slice(2, 4),
    );
    const page3 = await http(stack.baseUrl, 'GET', `/v2/videos/generations?limit=2&after=${page2.body.data[1].id}`, { token: c.key });
    assert.deepEqual(
      page3.body.data.map((j: { id: string }) => j.id),
      newestFirst.slice(4),
    );
    assert.equal(page3.body.has_more, false);
    // Every job as GET answers it, videos signed.
    const one = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${ids[4]}`, { token: c.key });
    assert.deepEqual({ ...page1.body.data[0], videos: [] }, { ...one.body, videos: [] });
    assert.equal(page1.body.data[0].videos.length, 1);

    const failed = await http(stack.baseUrl, 'GET', '/v2/videos/generations?status=failed', { token: c.key });
    assert.deepEqual(
      failed.body.data.map((j: { id: string }) => j.id),
      [ids[2]],
    );
    const byModel = await http(stack.baseUrl, 'GET', '/v2/videos/generations?model=sim-video-1&limit=100', { token: c.key });
    assert.equal(byModel.body.data.length, 5);
    const noneOfThat = await http(stack.baseUrl, 'GET', '/v2/videos/generations?model=veo-3.1-generate-001', { token: c.key });
    assert.deepEqual(noneOfThat.body.data, []);

    for (const [query, param] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['status=done', 'status'],
      ['after=not-a-uuid', 'after'],
      ['colour=red', 'colour'],
    ] as const) {
      const r = await http(stack.baseUrl, 'GET', `/v2/videos/generations?${query}`, { token: c.key });
      assert.equal(r.status, 400, query);
      assert.equal(r.body.error.param, param, query);
    }
    // Another workspace's job is no cursor here: as an id that names no job, a 404 naming after.
    const theirs = await http(stack.baseUrl, 'GET', '/v2/videos/generations', { token: other.key });
    assert.equal(theirs.body.data.length, 1);
    for (const after of [theirs.body.data[0].id, randomUUID()]) {
      const r = await http(stack.baseUrl, 'GET', `/v2/videos/generations?after=${after}`, { token: c.key });
      assert.equal(r.status, 404);
      assert.equal(r.body.error.param, 'after');
    }
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/videos/generations')).status, 401);
  });

  test('served by an index: the plan of a filtered page is an index scan, never a sort of the workspace', async () => {
    const c = await newCustomer(stack, 1);
    for (const status of ['pending', 'succeeded', 'failed']) {
      const plan = await stack.db.query(
        `EXPLAIN SELECT id FROM video_jobs WHERE workspace_id = $1 AND deleted_at IS NULL AND status = $2 ORDER BY created_at DESC, id DESC LIMIT 21`,
        [c.workspaceId, status],
      );
      const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      assert.match(text, /Index (Only )?Scan using video_jobs_list_status/, text);
      assert.doesNotMatch(text, /Sort/, text);
    }
  });
});

describe('cancel', () => {
  test('a pending job is cancelled: its provider operation stops (not billed, its answer recorded), it is refunded in full and failed with code cancelled', async () => {
    const c = await newCustomer(stack, 5);
    const r = await create(c.key, simJob({ delay_ms: 60_000 }, { n: 2 }));
    assert.equal(r.status, 202);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * UNIT);
    // wait until the provider has it
    for (
      let t = 0;
      (await stack.db.query('SELECT operation_id FROM video_jobs WHERE id = $1', [r.body.id])).rows[0].operation_id === null;
      t++
    ) {
      assert.ok(t < 100);
      await new Promise((res) => setTimeout(res, 50));
    }
    const cancels = await providerCalls(stack.db, 'video_cancel');
    const cancelled = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${r.body.id}/cancel`, { token: c.key });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.status, 'failed');
    assert.deepEqual(cancelled.body.error, { code: 'cancelled', message: 'the job was cancelled' });
    assert.equal(cancelled.body.cost_in_euro, 0);
    assert.equal(cancelled.body.refunded_in_euro, 0.4);
    assert.equal(await providerCalls(stack.db, 'video_cancel'), cancels + 1, 'the provider was asked to cancel');
    const op = await stack.db.query('SELECT cancelled_at FROM simulator.video_operations WHERE request_id = $1', [r.body.id]);
    assert.ok(op.rows[0].cancelled_at, 'the operation is cancelled at the provider');
    // The simulator does not bill a cancelled operation: the job records the provider's answer as such.
    const rec = await stack.db.query('SELECT cancel_billed, cancel_answer FROM video_jobs WHERE id = $1', [r.body.id]);
    assert.equal(rec.rows[0].cancel_billed, false);
    assert.match(rec.rows[0].cancel_answer, /^cancelled; not billed/);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    const again = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${r.body.id}/cancel`, { token: c.key });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'job_not_cancellable');
    await assertAuditHolds(stack);
  });

  test('a finished job is a 409, another workspace a 404, an unknown id a 404', async () => {
    const c = await newCustomer(stack, 5);
    const other = await newCustomer(stack, 5);
    const r = await create(c.key, simJob({ delay_ms: 0 }, { n: 1 }));
    await waitForJob(stack, c.key, r.body.id);
    const done = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${r.body.id}/cancel`, { token: c.key });
    assert.equal(done.status, 409);
    assert.equal(done.body.error.code, 'job_not_cancellable');
    assert.equal((await http(stack.baseUrl, 'POST', `/v2/videos/generations/${r.body.id}/cancel`, { token: other.key })).status, 404);
    assert.equal((await http(stack.baseUrl, 'POST', `/v2/videos/generations/${randomUUID()}/cancel`, { token: c.key })).status, 404);
    await assertAuditHolds(stack);
  });

  test('cancel racing completion: each job is either succeeded and charged, or cancelled and refunded, never both', async () => {
    const c = await newCustomer(stack, 20);
    const jobs = await Promise.all(Array.from({ length: 12 }, () => create(c.key, simJob({ delay_ms: 1_000 }, { n: 1 }))));
    let cancelled = 0;
    let finishedFirst = 0;
    await Promise.all(
      jobs.map(async (j, i) => {
        // Spread over the time the job is found done, copied and settled (its first polls: about a second apart).
        await new Promise((res) => setTimeout(res, 250 * i));
        const r = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${j.body.id}/cancel`, { token: c.key });
        assert.ok(r.status === 200 || r.status === 409, JSON.stringify(r.body));
        if (r.status === 200) cancelled++;
        else finishedFirst++;
      }),
    );
    let charged = 0;
    for (const j of jobs) {
      const job = await waitForJob(stack, c.key, j.body.id);
      if (job.status === 'succeeded') {
        assert.equal(job.cost_in_euro, 0.2);
        assert.equal(job.refunded_in_euro, 0);
        charged++;
      } else {
        assert.equal(job.error.code, 'cancelled');
        assert.equal(job.cost_in_euro, 0);
        assert.equal(job.refunded_in_euro, 0.2);
        const entries = await stack.db.query('SELECT kind FROM ledger_entries WHERE video_job_id = $1 ORDER BY id', [j.body.id]);
        assert.deepEqual(
          entries.rows.map((e) => e.kind),
          ['charge', 'refund'],
        );
      }
    }
    assert.equal(charged, finishedFirst);
    process.stderr.write(`lifecycle: cancel racing completion: ${cancelled} cancelled, ${finishedFirst} finished first\n`);
    assert.equal(charged + cancelled, 12);
    assert.equal(await balanceMicro(stack, c.workspaceId), 20_000_000 - charged * UNIT);
    await assertAuditHolds(stack);
  });

  test('a pending job whose workflow an operator terminated is restarted and then cancelled, refunded in full', async () => {
    const c = await newCustomer(stack, 5);
    const r = await create(c.key, simJob({ delay_ms: 60_000 }, { n: 1 }));
    // Terminated once its provider operation is known: the restart resumes it, and the cancel then
    // cancels it (a job terminated before that is failed and refunded by the restart itself: faults.test).
    for (let i = 0; ; i++) {
      const row = await stack.db.query('SELECT operation_id FROM video_jobs WHERE id = $1', [r.body.id]);
      if (row.rows[0]?.operation_id) break;
      assert.ok(i < 200, 'the operation was never recorded');
      await new Promise((res) => setTimeout(res, 50));
    }
    await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(r.body.id)).terminate('operator mistake');
    const cancelled = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${r.body.id}/cancel`, { token: c.key });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.error.code, 'cancelled');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    await assertAuditHolds(stack);
  });
});

describe('delete', () => {
  test('a finished job: its videos are deleted (URLs stop working), the job is a 404, the ledger keeps its entries', async () => {
    const c = await newCustomer(stack, 5);
    const r = await create(c.key, simJob({ delay_ms: 0 }, { n: 2 }), { 'Idempotency-Key': 'to-delete' });
    const job = await waitForJob(stack, c.key, r.body.id);
    assert.equal(job.status, 'succeeded');
    for (const v of job.videos) assert.equal((await fetch(v.url)).status, 200);
    const pending = await create(c.key, simJob({ delay_ms: 60_000 }, { n: 1 }));
    const refused = await http(stack.baseUrl, 'DELETE', `/v2/videos/generations/${pending.body.id}`, { token: c.key });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, 'job_pending');

    const deleted = await http(stack.baseUrl, 'DELETE', `/v2/videos/generations/${r.body.id}`, { token: c.key });
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { id: r.body.id, object: 'video.generation_job', deleted: true });
    for (const v of job.videos) assert.notEqual((await fetch(v.url)).status, 200, 'the signed URL no longer serves the video');
    assert.equal((await http(stack.baseUrl, 'GET', `/v2/videos/generations/${r.body.id}`, { token: c.key })).status, 404);
    assert.equal((await http(stack.baseUrl, 'DELETE', `/v2/videos/generations/${r.body.id}`, { token: c.key })).status, 404);
    const listed = await http(stack.baseUrl, 'GET', '/v2/videos/generations', { token: c.key });
    assert.ok(!listed.body.data.some((j: { id: string }) => j.id === r.body.id));
    // Its Idempotency-Key never makes a new (charged) job.
    const replay = await create(c.key, simJob({ delay_ms: 0 }, { n: 2 }), { 'Idempotency-Key': 'to-delete' });
    assert.equal(replay.status, 409);
    assert.equal(replay.body.error.code, 'idempotency_key_job_deleted');
    const entries = await stack.db.query('SELECT kind FROM ledger_entries WHERE video_job_id = $1', [r.body.id]);
    assert.deepEqual(
      entries.rows.map((e) => e.kind),
      ['charge'],
    );
    const statement = await http(stack.baseUrl, 'GET', '/v2/ledger?limit=100', { token: c.key });
    assert.ok(
      statement.body.data.some((e: { job_id: string | null }) => e.job_id === r.body.id),
      'the statement keeps the entry',
    );
    await http(stack.baseUrl, 'POST', `/v2/videos/generations/${pending.body.id}/cancel`, { token: c.key });
    await assertAuditHolds(stack);
  });
});

describe('API key spend limits', () => {
  test('50 creates racing against a key limit: exactly as many accepted as the limit covers; the rest 402, nothing charged', async () => {
    const c = await newCustomer(stack, 100);
    const key = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: { spend_limit_in_euro: 2.2 },
    });
    assert.equal(key.status, 201, JSON.stringify(key.body));
    assert.equal(key.body.spend_limit_in_euro, 2.2);
    // n=2 at 0.2 EUR each: 0.4 per job; 2.2 covers 5 jobs (2.0), not 6.
    const results = await Promise.all(Array.from({ length: 50 }, () => create(key.body.key, simJob({ delay_ms: 0 }, { n: 2 }))));
    const accepted = results.filter((r) => r.status === 202);
    const refused = results.filter((r) => r.status === 402);
    assert.equal(accepted.length, 5, JSON.stringify(results.filter((r) => r.status !== 202 && r.status !== 402).map((r) => r.body)));
    assert.equal(refused.length, 45);
    for (const r of refused) assert.equal(r.body.error.code, 'key_spend_limit_exceeded');
    assert.equal(await balanceMicro(stack, c.workspaceId), 100_000_000 - 5 * 2 * UNIT);
    const spent = await stack.db.query('SELECT spent_micro_eur FROM api_keys WHERE id = $1', [key.body.id]);
    assert.equal(spent.rows[0].spent_micro_eur, 2_000_000);
    for (const r of accepted) await waitForJob(stack, key.body.key, r.body.id);
    await assertAuditHolds(stack);
  });

  test("the key's spend is net of refunds: a shortfall gives room back; speech counts too; the workspace's other keys are not limited", async () => {
    const c = await newCustomer(stack, 100);
    const limited = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: { spend_limit_in_euro: 0.8 },
    });
    const k = limited.body.key;
    const full = await create(k, simJob({ delay_ms: 0, videos: 1 }, { n: 4 })); // 0.8 charged, 0.6 refunded
    assert.equal(full.status, 202);
    const blocked = await create(k, simJob({ delay_ms: 0 }, { n: 1 }));
    assert.equal(blocked.status, 402, 'the whole limit is taken until the refund');
    await waitForJob(stack, k, full.body.id);
    assert.equal((await create(k, simJob({ delay_ms: 0 }, { n: 3 }))).status, 202, '0.2 spent: 0.6 left');
    const speech = await http(stack.baseUrl, 'POST', '/v2/audio/speech', { token: k, json: { input: 'hello', voice: 'sim-narrator' } });
    assert.equal(speech.status, 402);
    assert.equal(speech.body.error.code, 'key_spend_limit_exceeded');
    assert.equal((await create(c.key, simJob({ delay_ms: 0 }, { n: 4 }))).status, 202, "the workspace's unlimited key");
    const keyed = await create(k, simJob({ delay_ms: 0 }, { n: 1 }), { 'Idempotency-Key': 'over-limit' });
    assert.equal(keyed.status, 402);
    const again = await create(k, simJob({ delay_ms: 0 }, { n: 1 }), { 'Idempotency-Key': 'over-limit' });
    assert.equal(again.status, 402, 'a refused key stays refused under its Idempotency-Key');
    assert.equal(again.body.error.code, 'key_spend_limit_exceeded');
    for (const j of (await http(stack.baseUrl, 'GET', '/v2/videos/generations?status=pending', { token: c.key })).body.data)
      await waitForJob(stack, c.key, j.id);
    await assertAuditHolds(stack);
  });

  test('the limit is validated (400) and revocation still works with it', async () => {
    const c = await newCustomer(stack, 1);
    const bad = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: { spend_limit_in_euro: -1 },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'spend_limit_in_euro');
    const k = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: { spend_limit_in_euro: 0 },
    });
    assert.equal(k.status, 201);
    assert.equal((await create(k.body.key, simJob({ delay_ms: 0 }, { n: 1 }))).status, 402);
    assert.equal((await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${k.body.id}`, { token: ADMIN_TOKEN })).status, 200);
    assert.equal((await create(k.body.key, simJob({ delay_ms: 0 }, { n: 1 }))).status, 401);
    await assertAuditHolds(stack);
  });
});
