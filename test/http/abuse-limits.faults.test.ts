// Exhaustion and slow dependencies, against the real API, worker, PostgreSQL and Temporal: database
// errors that are the server's state rather than the request's, storage retention, no network call
// under the workspace lock, and the reconciler and the audit past the counts they used to stop at.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import * as messages from '../../workflows/messages.js';
import { unreachableDependency } from '../../src/dependency-errors.js';
import { withClient } from '../../src/db/pool.js';
import { auditLedger, type WorkflowState } from '../../src/billing/audit.js';
import { chargeVideoJob, settleVideoJob } from '../../src/video-jobs/billing.js';
import { createWorkspace } from '../../src/account/workspaces.js';
import { createReconcilerActivities, PENDING_PAGE_SIZE, type ReconcileReport } from '../../activities/reconciler.js';
import { runningVideoJobIds } from '../../src/temporal/workflow-states.js';
import { createLogger } from '../../src/logger.js';
import { assertAuditHolds, http as api, newCustomer, simJob, startStack, waitForJob } from '../helpers/stack.js';
import path from 'node:path';
import { LocalStorage } from '../../src/storage/local.js';
import { videoOutputKey } from '../../src/storage/retention.js';
import { stack, create, scratchDatabase, chargeOf, useAbuseStack } from './abuse-limits.setup.js';

useAbuseStack();

describe("database errors that are the server's state", () => {
  test('statement timeout, lock timeout and read-only errors (57014, 55P03, 25006) are a dependency unavailable (503), not a 500', async () => {
    const codes: Record<string, string> = {};
    const collect = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
        assert.fail('expected an error');
      } catch (err) {
        const code = (err as { code?: string }).code!;
        codes[code] = unreachableDependency(err) ?? 'none';
      }
    };
    await withClient(stack.db, async (c) => {
      await c.query("SET statement_timeout = '20ms'");
      await collect(() => c.query('SELECT pg_sleep(1)'));
      await c.query('RESET statement_timeout');
      await c.query('BEGIN READ ONLY');
      await collect(() => c.query('CREATE TEMP TABLE x (y int)'));
      await c.query('ROLLBACK');
    });
    // A workspace row to hold locked: the test makes its own rather than counting on earlier tests'.
    await newCustomer(stack, 1);
    await withClient(stack.db, async (holder) => {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM workspaces FOR UPDATE');
      await withClient(stack.db, async (c) => {
        await c.query("SET lock_timeout = '20ms'");
        await collect(() => c.query('SELECT 1 FROM workspaces FOR UPDATE'));
        await c.query('RESET lock_timeout');
      });
      await holder.query('ROLLBACK');
    });
    assert.deepEqual(codes, { '57014': 'postgres', '25006': 'postgres', '55P03': 'postgres' });
  });
});

describe('storage retention', () => {
  const reconcile = async () => {
    const activities = createReconcilerActivities({
      db: stack.db,
      logger: createLogger('silent', 'test'),
      taskQueue: `nowhere-${randomUUID()}`,
      video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
      storage: new LocalStorage(path.join(stack.config.dataDir, 'storage')),
      retention: { speech_audio_ms: stack.config.speechAudioRetentionMs },
    });
    return (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(activities.reconcileMoney)) as ReconcileReport;
  };
  const storage = () => new LocalStorage(path.join(stack.config.dataDir, 'storage'));

  test("a copy that finishes after its job was settled without it (a cancel's clean-up ran first) leaves no file behind", async () => {
    const c = await newCustomer(stack, 10);
    const created = await create(stack, c.key, simJob({ videos: 1 }));
    assert.equal(created.status, 202);
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.videos.length, 1);
    // The late copy of the video the job does not list, and of a cancelled job's video.
    await storage().put(videoOutputKey(created.body.id, 1), Buffer.from('late copy'));
    const cancelled = await create(stack, c.key, simJob({ delay_ms: 10_000 }));
    const cancel = await api(stack.baseUrl, 'POST', `/v2/videos/generations/${cancelled.body.id}/cancel`, { token: c.key });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    await storage().put(videoOutputKey(cancelled.body.id, 0), Buffer.from('late copy'));
    await stack.db.query("UPDATE video_jobs SET completed_at = now() - interval '1 hour' WHERE id = ANY($1::uuid[])", [
      [created.body.id, cancelled.body.id],
    ]);
    const report = await reconcile();
    assert.ok(report.orphan_files_deleted >= 2, JSON.stringify(report));
    assert.equal(await storage().open(videoOutputKey(created.body.id, 1)), null);
    assert.equal(await storage().open(videoOutputKey(cancelled.body.id, 0)), null);
    const kept = await storage().open(videoOutputKey(created.body.id, 0));
    assert.ok(kept, 'the delivered video stays');
    kept.stream.destroy();
    await assertAuditHolds(stack);
  });

  test('speech audio is kept for replays only for SPEECH_AUDIO_RETENTION_MS; a replay after that answers 410', async () => {
    const c = await newCustomer(stack, 1);
    const headers = { 'idempotency-key': `speech-${randomUUID()}` };
    const first = await api(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: c.key,
      json: { input: 'hello there', voice: 'sim-narrator' },
      headers,
    });
    assert.equal(first.status, 200);
    const replay = await api(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: c.key,
      json: { input: 'hello there', voice: 'sim-narrator' },
      headers,
    });
    assert.equal(replay.status, 200);
    const row = await stack.db.query('SELECT id, audio_storage_key FROM speech_requests WHERE workspace_id = $1', [c.workspaceId]);
    const key = row.rows[0].audio_storage_key as string;
    assert.ok(key);
    await stack.db.query("UPDATE speech_requests SET created_at = now() - interval '2 days' WHERE id = $1", [row.rows[0].id]);
    const report = await reconcile();
    assert.ok(report.speech_audio_expired >= 1, JSON.stringify(report));
    assert.equal(await storage().open(key), null, 'the audio is deleted');
    const late = await api(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: c.key,
      json: { input: 'hello there', voice: 'sim-narrator' },
      headers,
    });
    assert.equal(late.status, 410, JSON.stringify(late.body));
    assert.equal(late.body.error.code, 'speech_no_longer_available');
    await assertAuditHolds(stack);
  });
});

describe('no network call under the workspace lock', () => {
  test("settlement signs the webhook event's download URLs before it locks the workspace: a slow signer holds no workspace lock", async () => {
    const db = await scratchDatabase();
    try {
      const ws = await createWorkspace(db, { name: 'settle', credits_micro_eur: 1_000_000 });
      const charge = chargeOf(ws.id);
      assert.equal((await chargeVideoJob(db, charge)).ok, true);
      await db.query(
        "INSERT INTO webhook_endpoints (id, workspace_id, url, events, secret) VALUES (gen_random_uuid(), $1, 'https://hooks.example.com/x', ARRAY['video.generation.succeeded'], 'whsec_test')",
        [ws.id],
      );
      // A signer that takes as long as the test says (an S3 credential refresh, say).
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let signing = false;
      const downloadUrls = {
        async downloadUrl(key: string) {
          signing = true;
          await gate;
          return { url: `https://files.example.com/${key}`, expires_at: 2_000_000_000 };
        },
      };
      const settling = settleVideoJob(
        db,
        {
          jobId: charge.jobId,
          outcome: 'succeeded',
          delivered: 1,
          videos: [{ storage_key: 'videos/x/0.mp4', content_type: 'video/mp4', bytes: 10 }],
          error: null,
          completed_at_ms: Date.now(),
        },
        { downloadUrls, baseUrl: 'https://api.example.com' },
      );
      for (let i = 0; !signing; i++) {
        assert.ok(i < 100, 'the signer was called');
        await new Promise((r) => setTimeout(r, 20));
      }
      // While a URL is being signed, the workspace row is free: another charge or top-up is not kept waiting.
      try {
        await withClient(db, async (c) => {
          await c.query('BEGIN');
          try {
            await c.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE NOWAIT', [ws.id]);
          } finally {
            await c.query('ROLLBACK');
          }
        });
      } finally {
        release();
      }
      const settled = await settling;
      assert.equal(settled.status, 'succeeded');
      const event = await db.query('SELECT payload FROM webhook_events WHERE video_job_id = $1', [charge.jobId]);
      const data = JSON.parse(event.rows[0].payload).data;
      assert.equal(data.status, 'succeeded');
      assert.equal(data.videos[0].url, 'https://files.example.com/videos/x/0.mp4');
      assert.equal((await db.query('SELECT count(*)::int AS n FROM webhook_deliveries')).rows[0].n, 1);
      assert.equal((await auditLedger(db)).ok, true);
    } finally {
      await db.end();
    }
  });
});

describe('the reconciler and the audit see every pending job', () => {
  test(`the reconciler pages through every pending job (more than ${PENDING_PAGE_SIZE}) in one run, and recovery runs carry the job's search attributes`, async () => {
    const db = await scratchDatabase({ 'video_api.max_pending_jobs': 100_000 });
    try {
      const ws = await createWorkspace(db, { name: 'many', credits_micro_eur: 1_000_000_000 });
      const count = PENDING_PAGE_SIZE + 3;
      for (let i = 0; i < count; i++) assert.equal((await chargeVideoJob(db, chargeOf(ws.id, 1_000))).ok, true);
      // Their workflows never existed: each is restarted as a recovery run, on a task queue no worker polls.
      const taskQueue = `nowhere-${randomUUID()}`;
      const activities = createReconcilerActivities({
        db,
        logger: createLogger('silent', 'test'),
        taskQueue,
        video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
      });
      const report = (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(
        activities.reconcileMoney,
      )) as ReconcileReport;
      assert.equal(report.pending_checked, count);
      assert.equal(report.jobs_restarted.length, count);
      const described = await stack.api.temporal.workflow.getHandle(`video-job-${report.jobs_restarted.at(-1)}`).describe();
      assert.equal(described.typedSearchAttributes.get(messages.WORKSPACE_ID_SA), ws.id);
      for (const id of report.jobs_restarted)
        await stack.api.temporal.workflow
          .getHandle(`video-job-${id}`)
          .terminate('test over')
          .catch(() => {});
    } finally {
      await db.end();
    }
  });

  test('the reconciler asks Temporal nothing per running job: one listing, and a look of its own only for a job it does not list (every job when the listing fails)', async () => {
    // The stack's own scheduled reconcile would restart the terminated job first: it runs only by hand here.
    const s = await startStack({ env: { RECONCILE_INTERVAL_MS: String(24 * 3_600_000) } });
    try {
      const c = await newCustomer(s, 10);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await api(s.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 600_000 }, { n: 1 }) });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        ids.push(r.body.id);
      }
      const taskQueue = s.config.temporal.taskQueue;
      const reconcile = async (client = s.api.temporal) => {
        const activities = createReconcilerActivities({
          db: s.db,
          logger: createLogger('silent', 'test'),
          taskQueue,
          video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
        });
        return (await new MockActivityEnvironment(undefined, { client }).run(activities.reconcileMoney)) as ReconcileReport;
      };
      const listed = async (want: (running: Set<string>) => boolean) => {
        for (let i = 0; i < 100; i++) {
          if (want(await runningVideoJobIds(s.api.temporal, taskQueue))) return;
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.fail('visibility never caught up');
      };
      await listed((running) => ids.every((id) => running.has(id)));
      const quiet = await reconcile();
      assert.equal(quiet.pending_checked, 3);
      assert.equal(quiet.jobs_looked_up, 0, 'running jobs are not looked up one by one');
      assert.deepEqual(quiet.jobs_restarted, []);
      // A visibility store that cannot list: the run goes on, looking up every pending job on its own.
      const workflow = Object.create(s.api.temporal.workflow, {
        list: {
          value: () => {
            throw new Error('visibility is down');
          },
        },
      });
      const unlisted = await reconcile(Object.create(s.api.temporal, { workflow: { value: workflow } }));
      assert.equal(unlisted.jobs_looked_up, 3);
      assert.deepEqual(unlisted.jobs_restarted, [], 'each looked up, found running');

      await s.api.temporal.workflow.getHandle(messages.videoJobWorkflowId(ids[0]!)).terminate('operator mistake');
      await listed((running) => !running.has(ids[0]!));
      const resumed = await reconcile();
      assert.equal(resumed.pending_checked, 3);
      assert.equal(resumed.jobs_looked_up, 1);
      assert.deepEqual(resumed.jobs_restarted, [ids[0]]);

      for (const id of ids)
        assert.equal((await api(s.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key })).status, 200);
      for (const id of ids) assert.equal((await waitForJob(s, c.key, id)).status, 'failed');
      await assertAuditHolds(s);
    } finally {
      await s.stop();
    }
  });

  test('the audit looks up every pending job (not the oldest 2,000), stale speech holds and top-ups without their entry', async () => {
    const db = await scratchDatabase({ 'video_api.max_pending_jobs': 100_000 });
    try {
      const ws = await createWorkspace(db, { name: 'audit', credits_micro_eur: 1_000_000_000 });
      await db.query(
        `SELECT video_job_charge(gen_random_uuid()::text, gen_random_uuid(), $1, 'wf-' || g, 'sim-video-1', 'p', 'fp', '{"n": 1}', 1000,
                                 extract(epoch FROM now()) * 1000 + g, NULL, false, NULL, 'simulator', extract(epoch FROM now()) * 1000 + 3600000)
           FROM generate_series(1, 2001) g`,
        [ws.id],
      );
      const newest = (await db.query('SELECT id FROM video_jobs ORDER BY created_at DESC LIMIT 1')).rows[0].id as string;
      // Temporal as the audit sees it: every workflow running but the newest job's, which is gone.
      const workflowStates = async (ids: string[]) =>
        new Map<string, WorkflowState>(ids.map((id) => [id, id === newest ? 'not_found' : 'running']));
      const report = await auditLedger(db, { workflowStates });
      assert.equal(report.pending_jobs_checked, 2001);
      assert.deepEqual(
        report.unaccounted_jobs.map((j) => [j.job_id, j.reason]),
        [[newest, 'workflow_not_running']],
      );
      assert.equal(report.ok, false);

      const clean = await scratchDatabase();
      try {
        const w = await createWorkspace(clean, { name: 'holds', credits_micro_eur: 1_000_000 });
        assert.equal((await auditLedger(clean)).ok, true);
        // A top-up without its ledger entry.
        const topup = randomUUID();
        await clean.query('INSERT INTO topups (id, workspace_id, amount_micro_eur) VALUES ($1, $2, 5000)', [topup, w.id]);
        const t = await auditLedger(clean);
        assert.equal(t.ok, false);
        assert.deepEqual(
          t.topup_mismatches.map((m) => m.topup_id),
          [topup],
        );
        await clean.query('DELETE FROM topups WHERE id = $1', [topup]);
        // A speech hold that outlived its request by an hour (the reconciler did not release it).
        const held = randomUUID();
        await clean.query(
          `INSERT INTO speech_requests (id, workspace_id, idempotency_key, request_fingerprint, model, voice, characters, response_format, cost_micro_eur, status, held_at)
           VALUES ($1, $2, 'k', 'fp', 'sim-tts-1', 'v', 10, 'mp3', 100, 'held', now() - interval '2 hours')`,
          [held, w.id],
        );
        await clean.query('UPDATE workspaces SET held_micro_eur = held_micro_eur + 100 WHERE id = $1', [w.id]);
        const h = await auditLedger(clean);
        assert.equal(h.ok, false);
        assert.deepEqual(
          h.stale_speech_holds.map((s) => s.speech_request_id),
          [held],
        );
      } finally {
        await clean.end();
      }
    } finally {
      await db.end();
    }
  });
});
