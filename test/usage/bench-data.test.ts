// The usage benchmark's data (bench/usage-data.ts) is what the product would have written: on a sample,
// the rollups its grouped count gives equal what the usage triggers write, a step written with the
// triggers off and counted afterwards keeps the ledger audit (usage included) holding, and the triggers
// are on again afterwards for every other writer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createPool } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { addCredits } from '../../src/billing/ledger.js';
import { auditLedger } from '../../src/billing/audit.js';
import { writeUsageStep } from '../../bench/usage-data.js';
import { createTestDatabase } from '../helpers/stack.js';

const DAY_MS = 86_400_000;

async function workspaceWithKeys(db: pg.Pool, keys: number): Promise<{ workspaceId: string; apiKeyIds: string[] }> {
  const workspaceId = randomUUID();
  await db.query(`INSERT INTO workspaces (id, name) VALUES ($1, 'usage bench data')`, [workspaceId]);
  await addCredits(db, { workspaceId, amount_micro_eur: 100_000_000_000 });
  const apiKeyIds = Array.from({ length: keys }, () => randomUUID());
  for (const id of apiKeyIds) {
    await db.query(
      `INSERT INTO api_keys (id, workspace_id, key_sha256, key_prefix) VALUES ($1::uuid, $2, sha256(convert_to($1::uuid::text, 'UTF8')), 'vva_t')`,
      [id, workspaceId],
    );
  }
  return { workspaceId, apiKeyIds };
}

test('generated usage: the grouped count equals the triggers, and the audit holds after counted steps', async () => {
  const url = await createTestDatabase();
  const db = createPool(url, 2);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await migrate(db);
    const span = { from_ms: Date.now() - 90 * DAY_MS, span_ms: 90 * DAY_MS };
    const triggered = await workspaceWithKeys(db, 2);
    const sample = await writeUsageStep(client, { ...triggered, ...span, entries: 3_000, compareWithTriggers: true });
    assert.ok(sample.compared && sample.compared.groups > 100, JSON.stringify(sample.compared));
    assert.equal(sample.compared.differing, 0);
    assert.ok(Math.abs(sample.entries - 3_000) < 30, `${sample.entries} entries`);

    const counted = await workspaceWithKeys(db, 3);
    for (const entries of [2_000, 3_000]) {
      const step = await writeUsageStep(client, { ...counted, ...span, entries });
      assert.equal(step.compared, undefined);
    }
    const report = await auditLedger(db);
    assert.equal(report.ok, true, JSON.stringify(report).slice(0, 2000));
    assert.ok(report.ledger_entries > 8_000, `${report.ledger_entries} entries`);

    // The triggers are on again: a row inserted now is counted by them.
    const triggers = await db.query<{ tgname: string; tgenabled: string }>(
      "SELECT tgname, tgenabled FROM pg_trigger WHERE tgname IN ('usage_video_jobs_insert', 'usage_speech_requests_insert') ORDER BY 1",
    );
    assert.deepEqual(
      triggers.rows.map((r) => [r.tgname, r.tgenabled]),
      [
        ['usage_speech_requests_insert', 'O'],
        ['usage_video_jobs_insert', 'O'],
      ],
    );
  } finally {
    await client.end();
    await db.end();
  }
});
