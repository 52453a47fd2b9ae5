// The customer's balance and ledger statement (GET /v2/balance, GET /v2/ledger) on the real stack:
// every kind of entry, the balance after each exact (also under racing requests), newest first with
// cursor pagination, only the caller's workspace, served by an index; and migration 006 filling the
// balance after each existing entry.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPool, inTransaction, type Db } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { LEDGER_PAGE_SQL } from '../../src/account/statement.js';
import {
  ADMIN_TOKEN,
  assertAuditHolds,
  balanceMicro,
  createTestDatabase,
  http,
  newCustomer,
  simJob,
  startStack,
  waitForJob,
  type Stack,
} from '../helpers/stack.js';
import { migrateBefore } from '../helpers/migrations.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

async function statement(key: string, query = '') {
  const r = await http(stack.baseUrl, 'GET', `/v2/ledger${query}`, { token: key });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { object: 'list'; data: any[]; has_more: boolean };
}

/** Every entry, newest first, walking the pages `limit` at a time. */
async function allEntries(key: string, limit: number) {
  const out: any[] = [];
  let after = '';
  for (let page = 0; page < 100; page++) {
    const r = await statement(key, `?limit=${limit}${after ? `&after=${after}` : ''}`);
    assert.ok(r.data.length <= limit);
    out.push(...r.data);
    if (!r.has_more) return out;
    after = r.data.at(-1).id;
  }
  throw new Error('too many pages');
}

/** Every workspace's entries carry the running sum of its entries in id order. */
async function assertBalanceAfterExact(db: Db) {
  const r = await db.query(
    `SELECT count(*)::int AS wrong FROM (
       SELECT balance_after_micro_eur, SUM(amount_micro_eur) OVER (PARTITION BY workspace_id ORDER BY id) AS running FROM ledger_entries) s
      WHERE balance_after_micro_eur <> running`,
  );
  assert.equal(r.rows[0].wrong, 0, 'balance_after_micro_eur is the running sum');
  const latest = await db.query(
    `SELECT count(*)::int AS wrong FROM workspaces w
       JOIN LATERAL (SELECT balance_after_micro_eur FROM ledger_entries l WHERE l.workspace_id = w.id ORDER BY id DESC LIMIT 1) e ON true
      WHERE e.balance_after_micro_eur <> w.balance_micro_eur`,
  );
  assert.equal(latest.rows[0].wrong, 0, "each workspace's newest entry shows its balance");
}

test('balance and statement: credits, charges, refunds and speech, each with the balance it left, newest first', async () => {
  const c = await newCustomer(stack, 10);
  const other = await newCustomer(stack, 3);
  const balance = await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key });
  assert.deepEqual(balance.body, { object: 'balance', balance_in_euro: 10, owed_in_euro: 0 });
  assert.equal((await http(stack.baseUrl, 'GET', '/v2/balance')).status, 401);

  const run = async (simulate: Record<string, unknown>) => {
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ delay_ms: 0, ...simulate }),
    });
    assert.equal(created.status, 202);
    return waitForJob(stack, c.key, created.body.id);
  };
  const full = await run({}); // charged 0.4, kept
  const shortfall = await run({ videos: 1 }); // charged 0.4, refunded 0.2
  const failed = await run({ outcome: 'fail' }); // charged 0.4, refunded 0.4
  const speech = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
    method: 'POST',
    headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'Hello there, statement.', voice: 'sim-narrator' }),
  });
  assert.equal(speech.status, 200);
  await speech.arrayBuffer();
  const speechCost = Number(speech.headers.get('x-cost-in-euro'));
  const speechId = speech.headers.get('x-speech-request-id');
  const topup = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/credits`, {
    token: ADMIN_TOKEN,
    json: { amount_in_euro: 2.5 },
  });
  assert.equal(topup.status, 200);

  const entries = await allEntries(c.key, 100);
  assert.deepEqual(
    entries.map((e) => [e.type, e.amount_in_euro, e.job_id, e.speech_request_id]),
    [
      ['credit', 2.5, null, null],
      ['charge', speechCost, null, speechId],
      ['refund', 0.4, failed.id, null],
      ['charge', 0.4, failed.id, null],
      ['refund', 0.2, shortfall.id, null],
      ['charge', 0.4, shortfall.id, null],
      ['charge', 0.4, full.id, null],
      ['credit', 10, null, null],
    ],
  );
  // Each balance_after is the previous one moved by the entry; the newest is the balance.
  const micro = (eur: number) => Math.round(eur * 1e6);
  for (let i = 0; i < entries.length - 1; i++) {
    const e = entries[i];
    const sign = e.type === 'charge' ? -1 : 1;
    assert.equal(micro(e.balance_after_in_euro), micro(entries[i + 1].balance_after_in_euro) + sign * micro(e.amount_in_euro), e.id);
  }
  assert.equal(entries.at(-1).balance_after_in_euro, 10);
  assert.equal(micro(entries[0].balance_after_in_euro), await balanceMicro(stack, c.workspaceId));
  assert.deepEqual(
    (await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key })).body.balance_in_euro,
    entries[0].balance_after_in_euro,
  );
  for (const e of entries) {
    assert.match(e.id, /^le_\d+$/);
    assert.equal(e.object, 'ledger_entry');
    assert.ok(e.amount_in_euro > 0);
    assert.ok(Number.isInteger(e.created) && Math.abs(e.created - Date.now() / 1000) < 300);
  }

  // Pages of 3: the same entries, in the same order; has_more false only on the last.
  assert.deepEqual(await allEntries(c.key, 3), entries);
  const first = await statement(c.key, '?limit=3');
  assert.equal(first.has_more, true);
  assert.deepEqual((await statement(c.key)).data, entries, 'default limit 20 covers them');
  assert.deepEqual((await statement(c.key, `?after=${entries.at(-1).id}`)).data, []);

  // Only the caller's workspace; another workspace's entry id as a cursor reveals nothing of it.
  const theirs = await allEntries(other.key, 100);
  assert.deepEqual(
    theirs.map((e) => [e.type, e.amount_in_euro, e.balance_after_in_euro]),
    [['credit', 3, 3]],
  );
  const crossed = await statement(other.key, `?after=${entries[0].id}`);
  assert.ok(
    crossed.data.every((e) => theirs.some((t) => t.id === e.id)),
    "a cursor from another workspace pages through the caller's own entries only",
  );

  for (const [q, param] of [
    ['?limit=0', 'limit'],
    ['?limit=101', 'limit'],
    ['?limit=x', 'limit'],
    ['?after=123', 'after'],
    ['?after=le_x', 'after'],
    ['?before=le_1', 'before'],
  ]) {
    const r = await http(stack.baseUrl, 'GET', `/v2/ledger${q}`, { token: c.key });
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error.param, param, q);
  }
  await assertBalanceAfterExact(stack.db);
  await assertAuditHolds(stack);
});

test('balance after each entry stays exact under racing charges and top-ups', async () => {
  const c = await newCustomer(stack, 1); // covers 2 of the jobs below (0.4 each)
  const results = await Promise.all([
    ...Array.from({ length: 12 }, () =>
      http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) }),
    ),
    ...Array.from({ length: 6 }, () =>
      http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/credits`, { token: ADMIN_TOKEN, json: { amount_in_euro: 0.3 } }),
    ),
  ]);
  const accepted = results.filter((r) => r.status === 202);
  for (const r of accepted) await waitForJob(stack, c.key, r.body.id);
  const entries = await allEntries(c.key, 7);
  assert.equal(entries.length, 1 + 6 + accepted.length);
  await assertBalanceAfterExact(stack.db);
  assert.equal(Math.round(entries[0].balance_after_in_euro * 1e6), await balanceMicro(stack, c.workspaceId));
  await assertAuditHolds(stack);
});

test("the statement is served by the (workspace_id, id) index, in its order: no scan of other workspaces' entries, no sort", async () => {
  const c = await newCustomer(stack, 1);
  const plan = await inTransaction(stack.db, async (tx) => {
    await tx.query('SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off');
    const r = await tx.query(`EXPLAIN (FORMAT JSON) ${LEDGER_PAGE_SQL}`, [c.workspaceId, 1_000_000, 21]);
    return JSON.stringify(r.rows[0]['QUERY PLAN']);
  });
  assert.match(plan, /"Index Name":"ledger_entries_workspace_id"/);
  assert.doesNotMatch(plan, /"Node Type":"Sort"/);
  assert.doesNotMatch(plan, /Seq Scan/);
});

test('migration 006 fills the balance after each existing entry with the running sum of its workspace', async () => {
  const db = createPool(await createTestDatabase(), 2);
  try {
    // The schema as it was before 006, with entries written by the old code (no balance_after).
    await migrateBefore(db, '006');
    const [w1, w2] = ['11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222'];
    const job = '33333333-3333-4333-8333-333333333333';
    await db.query(`INSERT INTO workspaces (id, name, balance_micro_eur) VALUES ($1, 'one', 1300000), ($2, 'two', 700000)`, [w1, w2]);
    const topup = async (ws: string, id: string, amount: number) => {
      await db.query('INSERT INTO topups (id, workspace_id, amount_micro_eur) VALUES ($1, $2, $3)', [id, ws, amount]);
      await db.query(
        `INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, topup_id) VALUES ($1, 'topup', $2, $3, $4)`,
        [ws, amount, `topup:${id}`, id],
      );
    };
    await topup(w1, 'a0000000-0000-4000-8000-000000000001', 1_000_000);
    await topup(w2, 'a0000000-0000-4000-8000-000000000002', 500_000);
    await db.query(
      `INSERT INTO video_jobs (id, workspace_id, workflow_id, model, prompt, request_fingerprint, params, status, estimated_cost_micro_eur, cost_micro_eur, refunded_micro_eur, created_at)
       VALUES ($1, $2, 'wf', 'sim-video-1', 'p', 'f', '{"n": 2}', 'succeeded', 400000, 200000, 200000, now())`,
      [job, w1],
    );
    await db.query(
      `INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, video_job_id) VALUES ($1, 'charge', -400000, 'c', $2)`,
      [w1, job],
    );
    await topup(w2, 'a0000000-0000-4000-8000-000000000003', 200_000);
    await db.query(
      `INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, video_job_id) VALUES ($1, 'refund', 200000, 'r', $2)`,
      [w1, job],
    );
    await topup(w1, 'a0000000-0000-4000-8000-000000000004', 500_000);

    const applied = await migrate(db);
    assert.ok(
      applied.some((f) => f.startsWith('006_')),
      applied.join(', '),
    );
    const r = await db.query('SELECT workspace_id, kind, amount_micro_eur, balance_after_micro_eur FROM ledger_entries ORDER BY id');
    assert.deepEqual(
      r.rows.map((e) => [e.workspace_id === w1 ? 'one' : 'two', e.kind, e.balance_after_micro_eur]),
      [
        ['one', 'topup', 1_000_000],
        ['two', 'topup', 500_000],
        ['one', 'charge', 600_000],
        ['two', 'topup', 700_000],
        ['one', 'refund', 800_000],
        ['one', 'topup', 1_300_000],
      ],
    );
    await assertBalanceAfterExact(db);
    await assert.rejects(
      db.query('UPDATE ledger_entries SET balance_after_micro_eur = 0'),
      /append-only/,
      'the ledger is append-only again',
    );
  } finally {
    await db.end();
  }
});
