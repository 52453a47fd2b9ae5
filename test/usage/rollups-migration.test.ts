// Migration 021 counts what existed before it once (jobs pending and settled, speech delivered, held and
// released, clones), and from then on the rows keep the rollups: a job charged before the migration and
// settled after it lands in its creation hour, exact against the ledger.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createPool } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { addCredits } from '../../src/billing/ledger.js';
import { auditLedger } from '../../src/billing/audit.js';
import { chargeVideoJob, settleVideoJob } from '../../src/video-jobs/billing.js';
import { readUsage } from '../../src/usage/service.js';
import { createTestDatabase } from '../helpers/stack.js';
import { migrateBefore } from '../helpers/migrations.js';

const HOUR_MS = 3_600_000;

test('migration 021 counts the existing requests once; a job settled after it updates its creation hour', async () => {
  const db = createPool(await createTestDatabase(), 2);
  try {
    await migrateBefore(db, '021');
    const ws = randomUUID();
    await db.query(`INSERT INTO workspaces (id, name) VALUES ($1, 'before')`, [ws]);
    await addCredits(db, { workspaceId: ws, amount_micro_eur: 50_000_000 });
    const created_at_ms = Date.now() - 5 * HOUR_MS;
    const params = { durationSeconds: 4, resolution: '720p' as const, aspectRatio: '16:9' as const, n: 2 };
    const charge = async (jobId: string) => {
      const r = await chargeVideoJob(db, {
        jobId,
        workflowId: `wf-${jobId}`,
        workspaceId: ws,
        model: 'sim-video-1',
        prompt: 'p',
        params,
        estimated_cost_micro_eur: 800_000,
        created_at_ms,
        request_fingerprint: 'f',
        backend: 'simulator',
      });
      assert.equal(r.ok, true);
    };
    const [settledBefore, settledAfter] = [randomUUID(), randomUUID()];
    await charge(settledBefore);
    await charge(settledAfter);
    const video = { storage_key: 'k', content_type: 'video/mp4', bytes: 1 };
    await settleVideoJob(db, {
      jobId: settledBefore,
      outcome: 'succeeded',
      delivered: 1,
      videos: [video],
      error: null,
      completed_at_ms: Date.now(),
    });
    // Speech as the previous release recorded it: delivered (with its ledger charge), held, released; and a clone.
    const speech = async (status: string, cost: number) => {
      const id = randomUUID();
      await db.query(
        `INSERT INTO speech_requests (id, workspace_id, idempotency_key, request_fingerprint, model, voice, characters, response_format,
                                      cost_micro_eur, status, held_at, audio_bytes, audio_storage_key, audio_content_type)
         VALUES ($1::uuid, $2, $1::text, 'f', 'sim-speech-1', 'v', 10, 'mp3', $3, $4, CASE WHEN $4 = 'held' THEN now() END,
                 CASE WHEN $4 = 'delivered' THEN 1 END, CASE WHEN $4 = 'delivered' THEN 'a' END, CASE WHEN $4 = 'delivered' THEN 'audio/mpeg' END)`,
        [id, ws, cost, status],
      );
      if (status === 'held') await db.query('UPDATE workspaces SET held_micro_eur = held_micro_eur + $2 WHERE id = $1', [ws, cost]);
      if (status === 'delivered') {
        await db.query(
          `INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, speech_request_id, balance_after_micro_eur)
           SELECT $1, 'charge', -$2::bigint, 'speech_request:' || $3::text || ':charge', $3::uuid, balance_micro_eur - $2::bigint FROM workspaces WHERE id = $1`,
          [ws, cost, id],
        );
        await db.query('UPDATE workspaces SET balance_micro_eur = balance_micro_eur - $2 WHERE id = $1', [ws, cost]);
      }
    };
    await speech('delivered', 1_500);
    await speech('held', 1_500);
    await speech('released', 1_500);
    await db.query(`INSERT INTO voices (id, workspace_id, provider, voice_id, name) VALUES ($1, $2, 'simulator', 'sv', 'n')`, [
      randomUUID(),
      ws,
    ]);

    // The rollups' migration, then those after it.
    assert.equal((await migrate(db))[0], '021_usage_rollups.sql');
    const audit = await auditLedger(db);
    assert.deepEqual([audit.usage_ledger_mismatches, audit.usage_row_mismatches], [[], []]);

    // Charged before the migration, settled after: a failure refunds it all, in its creation hour.
    await settleVideoJob(db, {
      jobId: settledAfter,
      outcome: 'failed',
      delivered: 0,
      videos: [],
      error: { code: 'x', message: 'y' },
      completed_at_ms: Date.now(),
    });
    const after = await auditLedger(db);
    assert.deepEqual([after.usage_ledger_mismatches, after.usage_row_mismatches], [[], []]);
    const usage = await readUsage(db, { workspaceId: ws, bucket: 'hour', group_by: ['kind'] });
    const row = (kind: string) => usage.data.find((r) => r.kind === kind)!;
    assert.equal(row('video').start, Math.floor(created_at_ms / HOUR_MS) * 3600);
    assert.deepEqual(
      [
        row('video').requests,
        row('video').succeeded,
        row('video').failed,
        row('video').pending,
        row('video').cost_in_euro,
        row('video').videos,
      ],
      [2, 1, 1, 0, 0.4, 1],
    );
    assert.deepEqual([row('speech').requests, row('speech').succeeded, row('speech').failed, row('speech').pending], [3, 1, 1, 1]);
    assert.equal(row('speech').cost_in_euro, 0.0015);
    assert.equal(row('voice_clone').requests, 1);
    assert.equal(usage.total.charged_in_euro, 1.6015);
    assert.equal(usage.total.refunded_in_euro, 1.2);
  } finally {
    await db.end();
  }
});
