// Migration 029 gives back what pending jobs added to the hourly rollups (reads take those from their
// rows), sums the hourly rollups into days once (requests of several days and hours, counted by the
// triggers before it), and from then on the triggers keep both levels: a job charged before it and
// settled after it lands in its day's row as in its hour's; a charge writes no rollup. A read by day or month (daily rows) gives
// what the hourly rows give summed, row for row, and the ledger audit (its daily check included) holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { addCredits } from '../../src/billing/ledger.js';
import { auditLedger } from '../../src/billing/audit.js';
import { chargeVideoJob } from '../../src/video-jobs/billing.js';
import { COUNTERS, readUsage, type UsageRequest } from '../../src/usage/service.js';
import { createTestDatabase } from '../helpers/stack.js';
import { migrateBefore } from '../helpers/migrations.js';
import { settleTwoVideos } from './jobs.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const MIGRATION = '029_usage_daily_rollups.sql';

/** The usage as the hourly rows give it per bucket of `bucket` (what reads by day gave before the daily rows). */
async function fromHourly(db: Db, workspaceId: string, bucket: 'day' | 'month'): Promise<unknown[]> {
  const r = await db.query(
    `SELECT extract(epoch FROM date_trunc($2, hour, 'UTC'))::bigint AS start, kind, model, ${COUNTERS.map((c) => `sum(${c})::bigint AS ${c}`).join(', ')}
       FROM usage_rollups WHERE workspace_id = $1 GROUP BY 1, 2, 3 HAVING sum(requests) > 0 ORDER BY 1, 2 NULLS FIRST, 3 NULLS FIRST`,
    [workspaceId, bucket],
  );
  return r.rows;
}

test('migration 029 sums the hourly rollups into days once; the triggers keep both levels after it', async () => {
  const db = createPool(await createTestDatabase(), 2);
  try {
    await migrateBefore(db, MIGRATION);
    const ws = randomUUID();
    await db.query(`INSERT INTO workspaces (id, name) VALUES ($1, 'before')`, [ws]);
    await addCredits(db, { workspaceId: ws, amount_micro_eur: 50_000_000 });
    const now = Date.now();
    // Jobs in two hours of one day (three days ago) and one of the day before.
    const day = Math.floor((now - 3 * DAY_MS) / DAY_MS) * DAY_MS;
    const times = [day + 2 * HOUR_MS, day + 2 * HOUR_MS + 60_000, day + 9 * HOUR_MS, day - 5 * HOUR_MS];
    const params = { durationSeconds: 4, resolution: '720p' as const, aspectRatio: '16:9' as const, n: 2 };
    const charge = async (jobId: string, created_at_ms: number) => {
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
    const settle = (jobId: string, outcome: 'succeeded' | 'failed') => settleTwoVideos(db, jobId, outcome);
    const ids = times.map(() => randomUUID());
    for (const [i, id] of ids.entries()) await charge(id, times[i]!);
    await settle(ids[0]!, 'succeeded');
    await settle(ids[3]!, 'failed');
    await db.query(
      `INSERT INTO voices (id, workspace_id, provider, voice_id, name, created_at) VALUES ($1, $2, 'simulator', 'sv', 'n', $3)`,
      [randomUUID(), ws, new Date(day + 9 * HOUR_MS)],
    );
    const hourlyRows = Number((await db.query('SELECT count(*) AS n FROM usage_rollups WHERE workspace_id = $1', [ws])).rows[0].n);
    assert.equal(hourlyRows, 4); // three hours of video, one of clones

    // This migration first (later ones, if any, after it).
    assert.equal((await migrate(db))[0], MIGRATION);
    const days = await db.query<{ day: Date; requests: string; pending: string }>(
      `SELECT day, sum(requests) AS requests, sum(pending) AS pending FROM usage_daily_rollups WHERE workspace_id = $1 GROUP BY day ORDER BY day`,
      [ws],
    );
    // The rollups keep settled requests only (the two jobs still pending are given back); reads add the pending from their rows.
    assert.deepEqual(
      days.rows.map((r) => [r.day.getTime(), Number(r.requests), Number(r.pending)]),
      [
        [day - DAY_MS, 1, 0],
        [day, 2, 0],
      ],
    );
    const pendingRead = await readUsage(db, { workspaceId: ws, bucket: 'day', start: Math.floor((day - 2 * DAY_MS) / 1000) });
    assert.deepEqual(
      pendingRead.data.map((r) => [r.start, r.requests, r.pending, r.charged_in_euro]),
      [
        [(day - DAY_MS) / 1000, 1, 0, 0.8],
        [day / 1000, 4, 2, 2.4],
      ],
    );
    const audit = await auditLedger(db);
    assert.equal(audit.ok, true, JSON.stringify(audit).slice(0, 2000));

    // Charged before the migration, settled after it: both levels move; a job charged after it lands in both.
    await settle(ids[1]!, 'succeeded');
    await settle(ids[2]!, 'failed');
    // A charge writes no rollup (its job is pending); its settlement writes the whole job.
    const late = randomUUID();
    const rollupRows = async () => (await db.query('SELECT count(*) AS n FROM usage_rollups WHERE workspace_id = $1', [ws])).rows[0].n;
    const rowsBefore = await rollupRows();
    await charge(late, day + 23 * HOUR_MS);
    assert.equal(await rollupRows(), rowsBefore);
    assert.equal((await auditLedger(db)).ok, true);
    await settle(late, 'succeeded');
    assert.equal(await rollupRows(), rowsBefore + 1);
    const after = await auditLedger(db);
    assert.deepEqual([after.usage_ledger_mismatches, after.usage_row_mismatches, after.usage_daily_mismatches], [[], [], []]);
    assert.equal(after.ok, true);

    // Reads by day and month (daily rows) give what the hourly rows give, row for row.
    for (const bucket of ['day', 'month'] as const) {
      const q: UsageRequest = { workspaceId: ws, bucket, group_by: ['kind', 'model'], start: Math.floor((day - 2 * DAY_MS) / 1000) };
      const usage = await readUsage(db, q);
      const micro = (eur: number) => Math.round(eur * 1_000_000);
      assert.deepEqual(
        usage.data.map((r) => ({
          start: r.start,
          kind: r.kind,
          model: r.model,
          requests: r.requests,
          succeeded: r.succeeded,
          failed: r.failed,
          pending: r.pending,
          charged_micro_eur: micro(r.charged_in_euro),
          refunded_micro_eur: micro(r.refunded_in_euro),
          cost_micro_eur: micro(r.cost_in_euro),
          videos: r.videos,
          video_seconds: r.video_seconds,
          characters: r.characters,
        })),
        await fromHourly(db, ws, bucket),
      );
    }
    const byDay = await readUsage(db, { workspaceId: ws, bucket: 'day', group_by: ['kind'], start: Math.floor((day - 2 * DAY_MS) / 1000) });
    const video = byDay.data
      .filter((r) => r.kind === 'video')
      .map((r) => [r.start, r.requests, r.succeeded, r.failed, r.pending, r.videos]);
    assert.deepEqual(video, [
      [(day - DAY_MS) / 1000, 1, 0, 1, 0, 0],
      [day / 1000, 4, 3, 1, 0, 6],
    ]);

    // A daily row that drifts from its hours fails the audit, naming it.
    await db.query(`UPDATE usage_daily_rollups SET videos = videos + 1 WHERE workspace_id = $1 AND day = $2 AND kind = 'video'`, [
      ws,
      new Date(day),
    ]);
    const drifted = await auditLedger(db);
    assert.equal(drifted.ok, false);
    assert.deepEqual(
      drifted.usage_daily_mismatches.map((m) => [m.day, m.kind, m.daily[7], m.hourly[7]]),
      [[new Date(day).toISOString(), 'video', 7, 6]],
    );
  } finally {
    await db.end();
  }
});
