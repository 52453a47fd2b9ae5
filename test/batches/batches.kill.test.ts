// A batch of 60 videos and speech requests, with provider failures and shortfalls, survives a SIGKILL of
// its worker process mid-run: a new worker finishes it, no request runs twice (one provider operation per
// job, one speech row per request), none is lost, and the money is exact: one reservation, one release,
// each request charged what it delivered. The worker runs as a real separate process (src/worker-main.ts).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { SimulatedVoiceProvider } from '../../src/providers/voice/simulator.js';
import { fileLines, SPEECH_CHAR_MICRO_EUR, speechLine, VIDEO_UNIT_MICRO_EUR, videoLine, waitForBatch, type Outcome } from './setup.js';

let stack: Stack;
const children: ChildProcess[] = [];

before(async () => {
  stack = await startStack({ worker: false, env: { BATCH_CONCURRENCY: '8' } });
});
after(async () => {
  killAll(children);
  await stack?.stop();
});

test('SIGKILL of the worker mid-batch: a new worker finishes all 60 requests once each, with exact money', async () => {
  const first = await startEntryProcess(stack, 'worker', { track: children });
  const c = await newCustomer(stack, 100);
  const outcomes: Outcome[] = [];
  for (let i = 0; i < 40; i++) outcomes.push(i % 7 === 3 ? 'fail' : i % 7 === 5 ? 'short' : 'ok');
  const speech = Array.from({ length: 20 }, (_, i) => `speech number ${i} ${'x'.repeat(i)}`);
  const requests = [...outcomes.map((o, i) => videoLine(`v-${i}`, o, 1_500)), ...speech.map((input, i) => speechLine(`s-${i}`, input))];
  // Interleaved, so speech and videos run together.
  requests.sort((a, b) => Number(a.custom_id.slice(2)) - Number(b.custom_id.slice(2)) || a.custom_id.localeCompare(b.custom_id));
  // The voice provider refuses the next 3 speech calls.
  await new SimulatedVoiceProvider(stack.db).injectFaults('speech', { kind: 'rejected', count: 3, message: 'refused by the test' });

  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const reserved = 40 * 2 * VIDEO_UNIT_MICRO_EUR + speech.reduce((s, t) => s + t.length, 0) * SPEECH_CHAR_MICRO_EUR;
  assert.equal(created.body.reserved_in_euro * 1e6, reserved);

  // Kill the worker once some requests have ended and others run.
  for (let i = 0; ; i++) {
    const b = await http(stack.baseUrl, 'GET', `/v2/batches/${created.body.id}`, { token: c.key });
    if (b.body.request_counts.completed + b.body.request_counts.failed >= 12) break;
    assert.ok(i < 600, 'the batch did not progress');
    await new Promise((r) => setTimeout(r, 100));
  }
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  assert.equal(first.signalCode, 'SIGKILL');
  const running = await stack.db.query("SELECT count(*)::int AS n FROM batch_items WHERE batch_id = $1 AND status = 'running'", [
    created.body.id,
  ]);
  assert.ok(running.rows[0].n > 0, 'requests were running when the worker died');
  await startEntryProcess(stack, 'worker', { track: children });

  const batch = await waitForBatch(stack, c.key, created.body.id, 240_000);
  assert.equal(batch.status, 'completed');
  // No request ran twice: one provider operation per job, one job and one speech row per request.
  const ops = await stack.db.query(
    `SELECT count(*)::int AS jobs, count(DISTINCT o.request_id)::int AS distinct_ops, count(o.request_id)::int AS ops
       FROM video_jobs j LEFT JOIN simulator.video_operations o ON o.request_id = j.id::text WHERE j.batch_id = $1`,
    [batch.id],
  );
  assert.deepEqual(ops.rows[0], { jobs: 40, distinct_ops: 40, ops: 40 });
  const spoken = await stack.db.query<{ status: string; characters: number }>(
    'SELECT status, characters FROM speech_requests WHERE batch_id = $1',
    [batch.id],
  );
  assert.equal(spoken.rows.length, 20);
  const speechFailed = spoken.rows.filter((s) => s.status === 'released').length;
  assert.ok(speechFailed >= 1 && speechFailed <= 3, `speech failed: ${speechFailed}`);
  const videoFailed = outcomes.filter((o) => o === 'fail').length;
  assert.deepEqual(batch.request_counts, { total: 60, completed: 60 - videoFailed - speechFailed, failed: videoFailed + speechFailed });

  // Exact money: each video charged per video delivered, each speech delivered its characters; one reservation, one release.
  const videoCost = outcomes.reduce((s, o) => s + (o === 'ok' ? 2 : o === 'short' ? 1 : 0) * VIDEO_UNIT_MICRO_EUR, 0);
  const speechCost = spoken.rows.filter((s) => s.status === 'delivered').reduce((s, r) => s + r.characters * SPEECH_CHAR_MICRO_EUR, 0);
  const cost = videoCost + speechCost;
  assert.equal(Math.round(batch.cost_in_euro * 1e6), cost);
  assert.equal(await balanceMicro(stack, c.workspaceId), 100_000_000 - cost);
  const entries = await stack.db.query('SELECT kind, amount_micro_eur FROM ledger_entries WHERE batch_id = $1 ORDER BY id', [batch.id]);
  assert.deepEqual(entries.rows, [
    { kind: 'charge', amount_micro_eur: -reserved },
    { kind: 'refund', amount_micro_eur: reserved - cost },
  ]);
  const others = await stack.db.query(
    'SELECT count(*)::int AS n FROM ledger_entries l WHERE l.workspace_id = $1 AND l.batch_id IS NULL AND l.topup_id IS NULL',
    [c.workspaceId],
  );
  assert.equal(others.rows[0].n, 0, "the batch's requests have no ledger entries of their own");

  // The output and error files: every request once, in order.
  const out = await fileLines(stack, c.key, batch.output_file_id);
  const errors = await fileLines(stack, c.key, batch.error_file_id);
  assert.equal(out.length, batch.request_counts.completed);
  assert.equal(errors.length, batch.request_counts.failed);
  const ids = [...out, ...errors].map((l) => l.custom_id).sort();
  assert.deepEqual(ids, requests.map((r) => r.custom_id).sort());
  for (const l of out) assert.equal(l.response.status_code, 200);
  for (const l of errors) assert.ok(['generation_failed', 'provider_rejected'].includes(l.error.code), JSON.stringify(l));
  await assertAuditHolds(stack);
});
