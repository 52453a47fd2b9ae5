// Every money path of a video job, end to end through the HTTP API, a real Temporal workflow and
// real PostgreSQL, with the ledger audit checked after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { inspectMp4 } from '../helpers/mp4.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

// sim-video-1 at 720p costs 0.05 EUR per second: a 4 s video is 200_000 micro-euros.
const UNIT_4S_720P = 200_000;

describe('video jobs', () => {
  test('success with n videos: 202 + Location, charged the estimate, playable MP4s behind signed URLs', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { n: 3 }) });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal(created.headers.get('location'), `/v2/videos/generations/${created.body.id}`);
    assert.equal(created.body.object, 'video.generation_job');
    assert.equal(created.body.status, 'pending');
    assert.equal(created.body.model, 'sim-video-1');
    assert.deepEqual(created.body.params, { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 3 });
    assert.equal(created.body.estimated_cost_in_euro, 0.6);
    assert.match(created.body.id, /^[0-9a-f-]{36}$/);
    assert.ok(Math.abs(created.body.created - Date.now() / 1000) < 60);
    // charged up front, before the job finishes
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 3 * UNIT_4S_720P);

    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.cost_in_euro, 0.6);
    assert.equal(job.refunded_in_euro, 0);
    assert.equal(job.error, null);
    assert.equal(job.videos.length, 3);
    assert.ok(job.completed >= job.created);
    for (const v of job.videos) {
      assert.equal(v.content_type, 'video/mp4');
      assert.ok(v.expires_at > Date.now() / 1000);
      const res = await fetch(v.url);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'video/mp4');
      const info = inspectMp4(Buffer.from(await res.arrayBuffer()));
      assert.ok(Math.abs(info.duration_seconds - 4) < 0.05);
      assert.ok(info.width > info.height, '16:9 is landscape');
    }
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 3 * UNIT_4S_720P);
    await assertAuditHolds(stack);
  });

  test('shortfall: k of n videos keeps k/n of the charge and refunds exactly (n-k)/n', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ videos: 1 }, { n: 4 }) });
    assert.equal(created.status, 202);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 4 * UNIT_4S_720P);
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.videos.length, 1);
    assert.equal(job.cost_in_euro, 0.2);
    assert.equal(job.refunded_in_euro, 0.6);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - UNIT_4S_720P);
    await assertAuditHolds(stack);
  });

  test('provider failure refunds everything and reports the provider message', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ outcome: 'fail', message: 'content policy violation' }),
    });
    assert.equal(created.status, 202);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * UNIT_4S_720P);
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'failed');
    assert.deepEqual(job.error, { code: 'generation_failed', message: 'content policy violation' });
    assert.equal(job.cost_in_euro, 0);
    assert.equal(job.refunded_in_euro, 0.4);
    assert.deepEqual(job.videos, []);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    await assertAuditHolds(stack);
  });

  test('zero videos delivered is a failure, refunded in full', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ videos: 0 }) });
    assert.equal(created.status, 202);
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'failed');
    assert.equal(job.error.code, 'no_videos');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    await assertAuditHolds(stack);
  });

  test('insufficient credits: 402, nothing charged, no job', async () => {
    const c = await newCustomer(stack, 0.3);
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob() }); // costs 0.4
    assert.equal(r.status, 402);
    assert.equal(r.body.error.type, 'insufficient_credits_error');
    assert.equal(r.body.error.code, 'insufficient_credits');
    assert.equal(await balanceMicro(stack, c.workspaceId), 300_000);
    const jobs = await stack.db.query('SELECT 1 FROM video_jobs WHERE workspace_id = $1', [c.workspaceId]);
    assert.equal(jobs.rowCount, 0);
    await assertAuditHolds(stack);
  });

  test('idempotent retry returns the same job and charges once; another body with the key is 409', async () => {
    const c = await newCustomer(stack, 10);
    const headers = { 'Idempotency-Key': 'order-42' };
    const first = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers });
    const second = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers });
    assert.equal(first.status, 202);
    assert.equal(second.status, 202);
    assert.equal(second.body.id, first.body.id);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 2 * UNIT_4S_720P);
    const other = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { n: 1 }), headers });
    assert.equal(other.status, 409);
    assert.equal(other.body.error.type, 'idempotency_error');
    const done = await waitForJob(stack, c.key, first.body.id);
    assert.equal(done.status, 'succeeded');
    // a retry after the job finished still answers the same job, and still charges once
    const third = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers });
    assert.equal(third.status, 202);
    assert.equal(third.body.id, first.body.id);
    assert.equal(third.body.status, 'succeeded');
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 2 * UNIT_4S_720P);
    const charges = await stack.db.query("SELECT 1 FROM ledger_entries WHERE workspace_id = $1 AND kind = 'charge'", [c.workspaceId]);
    assert.equal(charges.rowCount, 1);
    // the same key from another workspace is another job
    const d = await newCustomer(stack, 10);
    const theirs = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: d.key, json: simJob(), headers });
    assert.equal(theirs.status, 202);
    assert.notEqual(theirs.body.id, first.body.id);
    await waitForJob(stack, d.key, theirs.body.id);
    await assertAuditHolds(stack);
  });

  test("a job's submit reaches the worker with the workflow task that schedules it (eager activity dispatch, config/temporal-dynamic-config.yaml)", async () => {
    const url = process.env['TEST_TEMPORAL_METRICS_URL'];
    assert.ok(url, 'the test infrastructure exposes the Temporal server metrics');
    const eagerDispatches = async () => {
      const text = await (await fetch(url)).text();
      return text
        .split('\n')
        .filter((line) => /^activity_eager_execution[{ ]/.test(line))
        .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
    };
    const before = await eagerDispatches();
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal((await waitForJob(stack, c.key, created.body.id)).status, 'succeeded');
    // The server exports its counters periodically, not as they change: a job awaited in the worker can
    // finish before its eager dispatch shows.
    let after = await eagerDispatches();
    for (let i = 0; after <= before && i < 50; i++) {
      await new Promise((r) => setTimeout(r, 200));
      after = await eagerDispatches();
    }
    assert.ok(after > before, 'the server dispatched an activity eagerly');
    await assertAuditHolds(stack);
  });

  test('a job of another workspace is 404, exactly like an unknown id', async () => {
    const a = await newCustomer(stack, 5);
    const b = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: a.key, json: simJob() });
    assert.equal(created.status, 202);
    const theirs = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: b.key });
    const unknown = await http(stack.baseUrl, 'GET', '/v2/videos/generations/00000000-0000-4000-8000-000000000000', { token: b.key });
    assert.equal(theirs.status, 404);
    assert.deepEqual(theirs.body, { ...unknown.body, error: { ...unknown.body.error, message: theirs.body.error.message } });
    assert.equal(theirs.body.error.code, 'job_not_found');
    await waitForJob(stack, a.key, created.body.id);
    await assertAuditHolds(stack);
  });

  test('reference-family models are served by the simulator and always succeed; parameters are ignored', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'a fox in snow', durationSeconds: 4, parameters: { simulate: { outcome: 'fail' } } },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal(created.body.model, 'veo-3.1-fast-generate-001'); // the default model
    assert.equal(created.body.estimated_cost_in_euro, 0.8); // 0.20 EUR/s (with audio, the default) x 4 s x 1
    const job = await waitForJob(stack, c.key, created.body.id, 60_000);
    assert.equal(job.status, 'succeeded');
    await assertAuditHolds(stack);
  });

  test('a cancelled workflow refunds everything', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 60_000 }) });
    assert.equal(created.status, 202);
    await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).cancel();
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'failed');
    assert.equal(job.error.code, 'cancelled');
    assert.equal(job.refunded_in_euro, 0.4);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000);
    await assertAuditHolds(stack);
  });

  test('the job record survives the workflow: status is answered from PostgreSQL when the workflow is gone', async () => {
    const c = await newCustomer(stack, 5);
    const headers = { 'Idempotency-Key': 'survives-retention' };
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers });
    const done = await waitForJob(stack, c.key, created.body.id);
    // Simulate retention expiry: the workflow's history is deleted from Temporal.
    await stack.api.temporal.workflowService.deleteWorkflowExecution({
      namespace: stack.config.temporal.namespace,
      workflowExecution: { workflowId: videoJobWorkflowId(created.body.id) },
    });
    for (let i = 0; i < 100; i++) {
      try {
        await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).describe();
      } catch {
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const again = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: c.key });
    assert.equal(again.status, 200);
    assert.equal(again.body.status, 'succeeded');
    assert.equal(again.body.videos.length, done.videos.length);
    assert.equal(again.body.cost_in_euro, done.cost_in_euro);
    // The Idempotency-Key still holds: the same body answers the same job, another body is a 409.
    const retry = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob(), headers });
    assert.equal(retry.status, 202, JSON.stringify(retry.body));
    assert.equal(retry.body.id, created.body.id);
    const other = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { n: 1 }), headers });
    assert.equal(other.status, 409);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 400_000);
    await assertAuditHolds(stack);
  });
});

describe('signed URLs', () => {
  test('a tampered or unsigned URL is refused', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { n: 1 }) });
    const job = await waitForJob(stack, c.key, created.body.id);
    const url = new URL(job.videos[0].url);
    const tampered = new URL(url);
    tampered.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 3600));
    assert.equal((await fetch(tampered)).status, 403);
    const otherFile = new URL(url.toString().replace('/0.mp4', '/1.mp4'));
    assert.equal((await fetch(otherFile)).status, 403);
    const bare = new URL(url.origin + url.pathname);
    const r = await fetch(bare);
    assert.equal(r.status, 403);
    assert.equal(((await r.json()) as any).error.code, 'invalid_signature');
    assert.equal((await fetch(url)).status, 200);
  });
});
