// Migration 033 sums the daily rollups by model once (requests of two models, two API keys and two
// backends on one day, a voice clone without a model, counted by the triggers before it), and from then
// on the triggers keep the daily rows by model too: a job charged before it and settled after it lands in
// its day and model. Reads by day or month grouped by model alone (daily rows by model) give what reads
// grouped by model and key give (daily rows) summed over keys, and the ledger audit checks the new level.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createPool } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { addCredits } from '../../src/billing/ledger.js';
import { auditLedger } from '../../src/billing/audit.js';
import { chargeVideoJob } from '../../src/video-jobs/billing.js';
import { COUNTERS, readUsage, usageQuery } from '../../src/usage/service.js';
import type { UsageRow } from '../../src/usage/schemas.js';
import { createTestDatabase } from '../helpers/stack.js';
import { migrateBefore } from '../helpers/migrations.js';
import { settleTwoVideos } from './jobs.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const MIGRATION = '033_usage_daily_model_rollups.sql';
const MODELS = [
  { model: 'sim-video-1', backend: 'simulator' },
  { model: 'veo-3.1-fast-generate-001', backend: 'vertex' },
] as const;

/** A row's counters in COUNTERS' order (money back in micro-euros). */
const countersOf = (r: UsageRow): number[] => {
  const micro = (eur: number) => Math.round(eur * 1_000_000);
  return [
    r.requests,
    r.succeeded,
    r.failed,
    r.pending,
    micro(r.charged_in_euro),
    micro(r.refunded_in_euro),
    micro(r.cost_in_euro),
    r.videos,
    r.video_seconds,
    r.characters,
  ];
};

/** Rows grouped by model and key, summed over keys: [start, model, counters...], in start and model order. */
function summedOverKeys(rows: UsageRow[]): unknown[] {
  const sums = new Map<string, { start: number; model: string | null; c: number[] }>();
  for (const r of rows) {
    const k = `${r.start}/${r.model ?? ''}`;
    const s = sums.get(k) ?? { start: r.start, model: r.model ?? null, c: COUNTERS.map(() => 0) };
    countersOf(r).forEach((v, i) => (s.c[i]! += v));
    sums.set(k, s);
  }
  return [...sums.values()]
    .filter((s) => s.c[0]! > 0)
    .sort((a, b) => a.start - b.start || (a.model ?? '').localeCompare(b.model ?? ''))
    .map((s) => [s.start, s.model, ...s.c]);
}

test('migration 033 sums the daily rollups by model once; the triggers keep them after it; reads by model use them', async () => {
  const db = createPool(await createTestDatabase(), 2);
  try {
    await migrateBefore(db, MIGRATION);
    const ws = randomUUID();
    await db.query(`INSERT INTO workspaces (id, name) VALUES ($1, 'before')`, [ws]);
    await addCredits(db, { workspaceId: ws, amount_micro_eur: 50_000_000 });
    const keys = [randomUUID(), randomUUID()];
    for (const [i, id] of keys.entries()) {
      await db.query(`INSERT INTO api_keys (id, workspace_id, key_sha256, key_prefix) VALUES ($1, $2, sha256($3::bytea), $4)`, [
        id,
        ws,
        id,
        `vva_${i}`,
      ]);
    }
    const day = Math.floor((Date.now() - 3 * DAY_MS) / DAY_MS) * DAY_MS;
    const params = { durationSeconds: 4, resolution: '720p' as const, aspectRatio: '16:9' as const, n: 2 };
    const charge = async (jobId: string, created_at_ms: number, m: (typeof MODELS)[number], apiKeyId: string) => {
      const r = await chargeVideoJob(db, {
        jobId,
        workflowId: `wf-${jobId}`,
        workspaceId: ws,
        apiKeyId,
        model: m.model,
        prompt: 'p',
        params,
        estimated_cost_micro_eur: 800_000,
        created_at_ms,
        request_fingerprint: 'f',
        backend: m.backend,
      });
      assert.equal(r.ok, true, JSON.stringify(r));
    };
    const settle = (jobId: string, outcome: 'succeeded' | 'failed') => settleTwoVideos(db, jobId, outcome);
    // Each model by each key on one day (two hours), one more the day before; all settled but one.
    const jobs = [
      { id: randomUUID(), at: day + 2 * HOUR_MS, m: MODELS[0], key: keys[0]!, outcome: 'succeeded' as const },
      { id: randomUUID(), at: day + 3 * HOUR_MS, m: MODELS[0], key: keys[1]!, outcome: 'failed' as const },
      { id: randomUUID(), at: day + 2 * HOUR_MS, m: MODELS[1], key: keys[0]!, outcome: 'succeeded' as const },
      { id: randomUUID(), at: day + 9 * HOUR_MS, m: MODELS[1], key: keys[1]!, outcome: 'succeeded' as const },
      { id: randomUUID(), at: day - 5 * HOUR_MS, m: MODELS[1], key: keys[1]!, outcome: 'failed' as const },
    ];
    for (const j of jobs) await charge(j.id, j.at, j.m, j.key);
    for (const j of jobs.slice(0, 4)) await settle(j.id, j.outcome);
    await db.query(
      `INSERT INTO voices (id, workspace_id, provider, voice_id, name, created_at, api_key_id) VALUES ($1, $2, 'simulator', 'sv', 'n', $3, $4)`,
      [randomUUID(), ws, new Date(day + 9 * HOUR_MS), keys[0]],
    );

    assert.equal((await migrate(db))[0], MIGRATION);
    const byModel = async () =>
      (
        await db.query<{ day: Date; model: string | null; requests: string; succeeded: string; failed: string; videos: string }>(
          `SELECT day, model, requests, succeeded, failed, videos FROM usage_daily_model_rollups WHERE workspace_id = $1 ORDER BY day, model NULLS FIRST`,
          [ws],
        )
      ).rows.map((r) => [r.day.getTime(), r.model, Number(r.requests), Number(r.succeeded), Number(r.failed), Number(r.videos)]);
    // One row per day and model, every key's and backend's requests in it; the clone's model is NULL.
    assert.deepEqual(await byModel(), [
      [day, null, 1, 1, 0, 0],
      [day, MODELS[0].model, 2, 1, 1, 2],
      [day, MODELS[1].model, 2, 2, 0, 4],
    ]);
    assert.equal((await auditLedger(db)).ok, true);

    // Charged before the migration, settled after it: its day and model move (a new row, here).
    await settle(jobs[4]!.id, 'failed');
    assert.deepEqual((await byModel())[0], [day - DAY_MS, MODELS[1].model, 1, 0, 1, 0]);
    // A job charged after it: nothing until it settles, then its day and model.
    const late = randomUUID();
    await charge(late, day + 23 * HOUR_MS, MODELS[0], keys[1]!);
    assert.deepEqual((await byModel())[2], [day, MODELS[0].model, 2, 1, 1, 2]);
    await settle(late, 'succeeded');
    assert.deepEqual((await byModel())[2], [day, MODELS[0].model, 3, 2, 1, 4]);
    const after = await auditLedger(db);
    assert.deepEqual([after.usage_daily_mismatches, after.usage_model_mismatches], [[], []]);
    assert.equal(after.ok, true);

    // Reads by model alone read the new rows and give what reads by model and key give, summed over keys,
    // the pending job included (counted from its row).
    const pending = randomUUID();
    await charge(pending, day + 4 * HOUR_MS, MODELS[1], keys[0]!);
    const start = Math.floor((day - 2 * DAY_MS) / 1000);
    assert.match(
      usageQuery({ workspaceId: ws, bucket: 'day', group_by: ['model'], start }, Date.now() / 1000).text,
      /usage_daily_model_rollups/,
    );
    assert.match(
      usageQuery({ workspaceId: ws, bucket: 'day', group_by: ['model', 'api_key'], start }, Date.now() / 1000).text,
      /usage_daily_rollups /,
    );
    for (const bucket of ['day', 'month'] as const) {
      const alone = await readUsage(db, { workspaceId: ws, bucket, group_by: ['model'], start });
      const withKeys = await readUsage(db, { workspaceId: ws, bucket, group_by: ['model', 'api_key'], start });
      assert.deepEqual(
        alone.data.map((r) => [r.start, r.model, ...countersOf(r)]),
        summedOverKeys(withKeys.data),
      );
      assert.deepEqual(alone.total, withKeys.total);
      if (bucket === 'day') assert.equal(alone.data.find((r) => r.model === MODELS[1].model && r.start === day / 1000)?.pending, 1);
    }
    // Across workspaces, by workspace and model (the operators' read): the same rows.
    const admin = await readUsage(db, { workspaceId: null, bucket: 'day', group_by: ['workspace', 'model'], start });
    assert.deepEqual(
      admin.data.filter((r) => r.workspace_id === ws).map((r) => [r.start, r.model, ...countersOf(r)]),
      summedOverKeys((await readUsage(db, { workspaceId: ws, bucket: 'day', group_by: ['model', 'api_key'], start })).data),
    );

    // A row by model that drifts from its day's rows fails the audit, naming it.
    await db.query(
      `UPDATE usage_daily_model_rollups SET cost_micro_eur = cost_micro_eur + 1 WHERE workspace_id = $1 AND day = $2 AND model = $3`,
      [ws, new Date(day), MODELS[0].model],
    );
    const drifted = await auditLedger(db);
    assert.equal(drifted.ok, false);
    assert.deepEqual(
      drifted.usage_model_mismatches.map((m) => [m.day, m.model, m.by_model[6]! - m.daily[6]!]),
      [[new Date(day).toISOString(), MODELS[0].model, 1]],
    );
  } finally {
    await db.end();
  }
});
