// The ledger on a real PostgreSQL, below the workflow: idempotent charges and refunds under retries
// and concurrency, exact settlement arithmetic, and an audit that really detects a broken ledger.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { addCredits } from '../../src/billing/ledger.js';
import { auditLedger } from '../../src/billing/audit.js';
import { chargeVideoJob, decideAcceptance, settleVideoJob, type VideoJobCharge } from '../../src/video-jobs/billing.js';
import { createWorkspace } from '../../src/account/workspaces.js';
import { createTestDatabase } from '../helpers/stack.js';

let db: Db;
before(async () => {
  db = createPool(await createTestDatabase(), 30);
  await migrate(db);
  assert.deepEqual(await migrate(db), [], 'migrations apply once');
});
after(async () => {
  await db.end();
});

function job(workspaceId: string, n = 4, unit_micro_eur = 250_000): VideoJobCharge {
  return {
    jobId: randomUUID(),
    workflowId: `wf-${randomUUID()}`,
    workspaceId,
    model: 'sim-video-1',
    prompt: 'p',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n },
    estimated_cost_micro_eur: unit_micro_eur * n,
    created_at_ms: Date.now(),
    request_fingerprint: 'fp',
  };
}

const balance = async (id: string) =>
  (await db.query('SELECT balance_micro_eur FROM workspaces WHERE id = $1', [id])).rows[0].balance_micro_eur;

test('a charge retried (also concurrently) is applied once', async () => {
  const ws = await createWorkspace(db, { name: 'a', credits_micro_eur: 5_000_000 });
  const j = job(ws.id);
  const results = await Promise.all(Array.from({ length: 8 }, () => chargeVideoJob(db, j)));
  assert.ok(results.every((r) => r.ok));
  assert.equal(results.filter((r) => r.ok && !r.already_charged).length, 1);
  assert.equal(await balance(ws.id), 4_000_000);
  assert.equal((await auditLedger(db)).ok, true);
});

test('an attempt is charged once or refused for good: late, refused by the API, another attempt, sticky 402s; a first-release charge sees no refusal', async () => {
  const ws = await createWorkspace(db, { name: 'attempts', credits_micro_eur: 10_000_000 });
  const base = job(ws.id, 1, 1_000_000);
  const late = { ...base, attemptId: randomUUID(), accept_by_ms: Date.now() - 1 };
  assert.deepEqual(await chargeVideoJob(db, late), { ok: false, reason: 'not_accepted_in_time' });
  assert.deepEqual(
    await chargeVideoJob(db, { ...late, accept_by_ms: Date.now() + 60_000 }),
    { ok: false, reason: 'not_accepted_in_time' },
    'refused for good, also once in time',
  );
  const decided = { ...base, attemptId: randomUUID(), accept_by_ms: Date.now() + 60_000 };
  assert.deepEqual(await decideAcceptance(db, { jobId: base.jobId, attemptId: decided.attemptId, workspaceId: ws.id, fingerprint: 'fp' }), {
    decision: 'refused',
  });
  assert.deepEqual(await chargeVideoJob(db, decided), { ok: false, reason: 'not_accepted_in_time' }, 'the API refused this attempt first');
  const winner = { ...base, attemptId: randomUUID(), accept_by_ms: Date.now() + 60_000 };
  const charged = await chargeVideoJob(db, winner);
  assert.ok(charged.ok && !charged.already_charged);
  assert.equal(await balance(ws.id), 9_000_000);
  assert.deepEqual(await chargeVideoJob(db, { ...base, attemptId: randomUUID(), accept_by_ms: Date.now() + 60_000 }), {
    ok: false,
    reason: 'charged_by_another_attempt',
  });
  const again = await chargeVideoJob(db, winner);
  assert.ok(again.ok && again.already_charged && again.estimated_cost_micro_eur === 1_000_000);
  assert.equal(await balance(ws.id), 9_000_000, 'charged once');

  // A 402 with an Idempotency-Key is sticky: a later attempt of the same job is refused alike.
  const poor = await createWorkspace(db, { name: 'poor', credits_micro_eur: 500_000 });
  const sticky = { ...job(poor.id, 1, 1_000_000), attemptId: randomUUID(), accept_by_ms: Date.now() + 60_000, sticky_refusal: true };
  assert.deepEqual(await chargeVideoJob(db, sticky), { ok: false, reason: 'insufficient_credits', balance_micro_eur: 500_000 });
  await addCredits(db, { workspaceId: poor.id, amount_micro_eur: 5_000_000 });
  assert.deepEqual(await chargeVideoJob(db, { ...sticky, attemptId: randomUUID() }), {
    ok: false,
    reason: 'insufficient_credits',
    balance_micro_eur: 5_500_000,
  });

  // A job of the first release (one unnamed attempt, no deadline) is charged whatever was refused.
  const first = job(poor.id, 1, 1_000_000);
  await decideAcceptance(db, { jobId: first.jobId, attemptId: randomUUID(), workspaceId: poor.id, fingerprint: 'fp' });
  assert.ok((await chargeVideoJob(db, first)).ok);
  assert.equal(await balance(poor.id), 4_500_000);
  assert.equal((await auditLedger(db)).ok, true);
});

test('a charge is one statement whose lock waits are bounded: held out of its workspace, it gives up after 2 s having charged nothing', async () => {
  const ws = await createWorkspace(db, { name: 'locked', credits_micro_eur: 5_000_000 });
  const j = { ...job(ws.id, 1, 1_000_000), attemptId: randomUUID(), accept_by_ms: Date.now() + 60_000 };
  const holder = await db.connect();
  const statements: string[] = [];
  const counting = await db.connect();
  const query = counting.query.bind(counting) as (...args: unknown[]) => unknown;
  (counting as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    statements.push(String(typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text));
    return query(...args);
  };
  const oneClient = { query: counting.query.bind(counting), connect: async () => counting } as unknown as Db;
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [ws.id]);
    const t0 = Date.now();
    await assert.rejects(chargeVideoJob(oneClient, j), (err: { code?: string }) => err.code === '55P03', 'lock_not_available');
    const waited_ms = Date.now() - t0;
    assert.ok(waited_ms >= 1_900 && waited_ms < 5_000, `gave up after ${waited_ms} ms`);
    assert.equal(statements.length, 1, `one statement per charge, got: ${statements.join(' | ')}`);
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
    counting.release();
  }
  assert.equal((await db.query('SELECT count(*)::int AS n FROM video_jobs WHERE id = $1', [j.jobId])).rows[0].n, 0, 'no job recorded');
  assert.equal(await balance(ws.id), 5_000_000, 'nothing charged');
  const charged = await chargeVideoJob(db, j);
  assert.ok(
    charged.ok && !charged.already_charged && charged.balance_micro_eur === 4_000_000,
    'the same attempt charges once the lock is free',
  );
  assert.equal((await auditLedger(db)).ok, true);
});

test('a charge that would move the balance by anything but its estimate commits nothing (asserted inside the statement)', async () => {
  const ws = await createWorkspace(db, { name: 'tampered', credits_micro_eur: 5_000_000 });
  const trigger = `tamper_${ws.id.replace(/-/g, '')}`;
  // A faulty write path: every balance update of this workspace loses one more micro-euro.
  await db.query(
    `CREATE FUNCTION ${trigger}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.balance_micro_eur := NEW.balance_micro_eur - 1; RETURN NEW; END $$`,
  );
  await db.query(
    `CREATE TRIGGER ${trigger} BEFORE UPDATE OF balance_micro_eur ON workspaces FOR EACH ROW WHEN (NEW.id = '${ws.id}') EXECUTE FUNCTION ${trigger}()`,
  );
  try {
    const j = job(ws.id, 1, 1_000_000);
    await assert.rejects(chargeVideoJob(db, j), /invariant: charge moved the balance/);
    assert.equal((await db.query('SELECT count(*)::int AS n FROM video_jobs WHERE id = $1', [j.jobId])).rows[0].n, 0, 'no job recorded');
    assert.equal(
      (await db.query('SELECT count(*)::int AS n FROM ledger_entries WHERE video_job_id = $1', [j.jobId])).rows[0].n,
      0,
      'no ledger entry',
    );
    assert.equal(await balance(ws.id), 5_000_000);
  } finally {
    await db.query(`DROP TRIGGER ${trigger} ON workspaces`);
    await db.query(`DROP FUNCTION ${trigger}()`);
  }
  assert.equal((await auditLedger(db)).ok, true);
});

test('settlement keeps delivered/n and refunds the rest, once, however often it is retried', async () => {
  const ws = await createWorkspace(db, { name: 'b', credits_micro_eur: 5_000_000 });
  const j = job(ws.id, 3, 333_333);
  assert.ok((await chargeVideoJob(db, j)).ok);
  const s = {
    jobId: j.jobId,
    outcome: 'succeeded' as const,
    delivered: 2,
    videos: [0, 1].map((i) => ({ storage_key: `videos/x/${i}.mp4`, content_type: 'video/mp4', bytes: 1 })),
    error: null,
    completed_at_ms: Date.now(),
  };
  const results = await Promise.all(Array.from({ length: 5 }, () => settleVideoJob(db, s)));
  assert.equal(results.filter((r) => !r.already_settled).length, 1);
  for (const r of results) {
    assert.equal(r.cost_micro_eur, 666_666);
    assert.equal(r.refunded_micro_eur, 333_333);
  }
  assert.equal(await balance(ws.id), 5_000_000 - 666_666);
  assert.equal((await auditLedger(db)).ok, true);
});

test('settlement rejects impossible deliveries', async () => {
  const ws = await createWorkspace(db, { name: 'c', credits_micro_eur: 5_000_000 });
  const j = job(ws.id, 2);
  await chargeVideoJob(db, j);
  await assert.rejects(
    settleVideoJob(db, { jobId: j.jobId, outcome: 'succeeded', delivered: 3, videos: [], error: null, completed_at_ms: Date.now() }),
    /invariant/,
  );
  await assert.rejects(
    settleVideoJob(db, { jobId: randomUUID(), outcome: 'failed', delivered: 0, videos: [], error: null, completed_at_ms: Date.now() }),
    /never charged/,
  );
  assert.equal(await balance(ws.id), 4_500_000);
});

test('insufficient balance charges nothing; concurrent charges never overdraw', async () => {
  const ws = await createWorkspace(db, { name: 'd', credits_micro_eur: 2_500_000 });
  const results = await Promise.all(Array.from({ length: 10 }, () => chargeVideoJob(db, job(ws.id, 1, 1_000_000))));
  assert.equal(results.filter((r) => r.ok).length, 2);
  assert.equal(await balance(ws.id), 500_000);
});

test('the balance can never go negative, even by a direct write', async () => {
  const ws = await createWorkspace(db, { name: 'e' });
  await assert.rejects(db.query('UPDATE workspaces SET balance_micro_eur = -1 WHERE id = $1', [ws.id]), /check/i);
});

test('ledger entries are append-only', async () => {
  const ws = await createWorkspace(db, { name: 'f', credits_micro_eur: 1_000_000 });
  await assert.rejects(db.query('UPDATE ledger_entries SET amount_micro_eur = 5 WHERE workspace_id = $1', [ws.id]), /append-only/);
  await assert.rejects(db.query('DELETE FROM ledger_entries WHERE workspace_id = $1', [ws.id]), /append-only/);
});

test('top-ups with the same idempotency key apply once', async () => {
  const ws = await createWorkspace(db, { name: 'g' });
  const rs = await Promise.all(
    Array.from({ length: 5 }, () => addCredits(db, { workspaceId: ws.id, amount_micro_eur: 700_000, idempotencyKey: 'k1' })),
  );
  assert.equal(new Set(rs.map((r) => r.topup_id)).size, 1);
  assert.equal(await balance(ws.id), 700_000);
});

test('the audit detects a balance that disagrees with the ledger, and a job billed wrongly', async () => {
  assert.equal((await auditLedger(db)).ok, true);
  const ws = await createWorkspace(db, { name: 'h', credits_micro_eur: 1_000_000 });
  await db.query('UPDATE workspaces SET balance_micro_eur = balance_micro_eur + 1 WHERE id = $1', [ws.id]);
  const broken = await auditLedger(db);
  assert.equal(broken.ok, false);
  assert.deepEqual(
    broken.balance_mismatches.map((m) => m.workspace_id),
    [ws.id],
  );
  await db.query('UPDATE workspaces SET balance_micro_eur = balance_micro_eur - 1 WHERE id = $1', [ws.id]);
  assert.equal((await auditLedger(db)).ok, true);
  const j = job(ws.id, 1, 100_000);
  await chargeVideoJob(db, j);
  // A finished job whose recorded cost disagrees with its ledger entries (bypassing settlement).
  await db.query("UPDATE video_jobs SET status = 'succeeded', cost_micro_eur = 0, refunded_micro_eur = 100000 WHERE id = $1", [j.jobId]);
  const wrong = await auditLedger(db);
  assert.equal(wrong.ok, false);
  assert.deepEqual(
    wrong.job_mismatches.map((m) => m.job_id),
    [j.jobId],
  );
});

test("the audit recomputes a finished job's cost from the videos it delivered", async () => {
  const ws = await createWorkspace(db, { name: 'i', credits_micro_eur: 1_000_000 });
  const j = job(ws.id, 2, 100_000);
  await chargeVideoJob(db, j);
  const video = { storage_key: 'videos/x/0.mp4', content_type: 'video/mp4', bytes: 1 };
  await settleVideoJob(db, {
    jobId: j.jobId,
    outcome: 'succeeded',
    delivered: 1,
    videos: [video],
    error: null,
    completed_at_ms: Date.now(),
  });
  const before = await auditLedger(db);
  assert.ok(!before.job_mismatches.some((m) => m.job_id === j.jobId));
  // Ledger and recorded cost agree, but the job lists a video it was not billed for.
  await db.query('UPDATE video_jobs SET videos = $2 WHERE id = $1', [j.jobId, JSON.stringify([video, video])]);
  const after = await auditLedger(db);
  assert.equal(after.ok, false);
  assert.ok(after.job_mismatches.some((m) => m.job_id === j.jobId && m.status === 'succeeded:cost'));
});

test('a cancelled job keeps unit x the requests its provider bills that the cancel stopped; the audit holds it to that', async () => {
  const ws = await createWorkspace(db, { name: 'j', credits_micro_eur: 1_000_000 });
  const cancelled = { outcome: 'failed' as const, delivered: 0, videos: [], completed_at_ms: Date.now() };
  const error = { code: 'cancelled', message: 'the job was cancelled' };
  // Two videos: one request running (billed, stopped), one queued (free).
  const j = job(ws.id, 2, 500_000);
  await chargeVideoJob(db, j);
  const settled = await settleVideoJob(db, {
    ...cancelled,
    jobId: j.jobId,
    error,
    billed_without_delivery: true,
    cancel_units: { billed_units: 1, ended_units: 0 },
  });
  assert.deepEqual([settled.cost_micro_eur, settled.refunded_micro_eur], [500_000, 500_000]);
  // One finished (billed, but neither delivered nor charged) and one running.
  const k = job(ws.id, 2, 100_000);
  await chargeVideoJob(db, k);
  const finished = await settleVideoJob(db, {
    ...cancelled,
    jobId: k.jobId,
    error,
    billed_without_delivery: true,
    cancel_units: { billed_units: 2, ended_units: 1 },
  });
  assert.deepEqual([finished.cost_micro_eur, finished.refunded_micro_eur], [100_000, 100_000]);
  // Settled by a worker that gave no counts: the whole charge is kept, as the previous release did.
  const l = job(ws.id, 2, 100_000);
  await chargeVideoJob(db, l);
  const uncounted = await settleVideoJob(db, { ...cancelled, jobId: l.jobId, error, billed_without_delivery: true });
  assert.deepEqual([uncounted.cost_micro_eur, uncounted.refunded_micro_eur], [200_000, 0]);
  const rows = await db.query('SELECT id, cancel_billed_units FROM video_jobs WHERE id = ANY($1::uuid[])', [[j.jobId, k.jobId, l.jobId]]);
  assert.deepEqual(
    new Map(rows.rows.map((r) => [r.id, r.cancel_billed_units])),
    new Map([
      [j.jobId, 1],
      [k.jobId, 1],
      [l.jobId, 2],
    ]),
  );
  const audit = await auditLedger(db);
  assert.ok(![j, k, l].some((x) => audit.job_mismatches.some((m) => m.job_id === x.jobId)), JSON.stringify(audit.job_mismatches));

  // The ledger and the recorded cost agree (the whole charge kept), but the provider bills one request of two.
  const m = job(ws.id, 2, 100_000);
  await chargeVideoJob(db, m);
  await settleVideoJob(db, { ...cancelled, jobId: m.jobId, error, billed_without_delivery: true });
  await db.query('UPDATE video_jobs SET cancel_billed_units = 1 WHERE id = $1', [m.jobId]);
  const wrong = await auditLedger(db);
  assert.equal(wrong.ok, false);
  assert.deepEqual(
    wrong.job_mismatches
      .filter((x) => x.job_id === m.jobId)
      .map((x) => [x.status, x.expected_net_charge_micro_eur, x.ledger_net_charge_micro_eur]),
    [
      ['failed:cost', 100_000, 200_000],
      ['failed:cancel', 100_000, 200_000],
    ],
  );
  await db.query('UPDATE video_jobs SET cancel_billed_units = NULL WHERE id = $1', [m.jobId]);
});
