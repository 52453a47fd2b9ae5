// Batches on /v2: a mixed batch of videos and speech with failures and shortfalls ends with exact
// money and correct output and error files; a cancel refunds at once what never ran; a bad line is a
// 400 naming it and charges nothing; a batch the balance cannot cover is a 402 that starts nothing.
// The ledger audit holds after each.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { fileLines, SPEECH_CHAR_MICRO_EUR, speechLine, VIDEO_UNIT_MICRO_EUR, videoLine, waitForBatch } from './setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ env: { BATCH_CONCURRENCY: '4' } });
});
after(async () => {
  await stack?.stop();
});

test('a mixed batch runs every request once and settles exactly: one reservation, one release', async () => {
  const c = await newCustomer(stack, 20);
  const requests = [
    videoLine('v-ok', 'ok'),
    videoLine('v-fail', 'fail'),
    videoLine('v-short', 'short'),
    speechLine('s-1', 'hello there'),
    speechLine('s-2', 'a second line'),
  ];
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests, metadata: { run: 'one' } } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const chars = 'hello there'.length + 'a second line'.length;
  const reserved = 3 * 2 * VIDEO_UNIT_MICRO_EUR + chars * SPEECH_CHAR_MICRO_EUR;
  assert.equal(created.body.reserved_in_euro, reserved / 1e6);
  assert.equal(await balanceMicro(stack, c.workspaceId), 20_000_000 - reserved);

  const batch = await waitForBatch(stack, c.key, created.body.id);
  assert.equal(batch.status, 'completed');
  assert.deepEqual(batch.request_counts, { total: 5, completed: 4, failed: 1 });
  const cost = 2 * VIDEO_UNIT_MICRO_EUR + VIDEO_UNIT_MICRO_EUR + chars * SPEECH_CHAR_MICRO_EUR;
  assert.equal(batch.cost_in_euro, cost / 1e6);
  assert.equal(batch.refunded_in_euro, (reserved - cost) / 1e6);
  assert.equal(await balanceMicro(stack, c.workspaceId), 20_000_000 - cost);
  const entries = await stack.db.query('SELECT kind, amount_micro_eur FROM ledger_entries WHERE batch_id = $1 ORDER BY id', [batch.id]);
  assert.deepEqual(entries.rows, [
    { kind: 'charge', amount_micro_eur: -reserved },
    { kind: 'refund', amount_micro_eur: reserved - cost },
  ]);
  const out = await fileLines(stack, c.key, batch.output_file_id);
  assert.deepEqual(
    out.map((l) => l.custom_id),
    ['v-ok', 'v-short', 's-1', 's-2'],
  );
  assert.equal(out[0].response.status_code, 200);
  assert.equal(out[0].response.body.status, 'succeeded');
  assert.equal(out[0].response.body.batch_id, batch.id);
  assert.equal(out[1].response.body.videos.length, 1);
  assert.match(out[2].response.body.audio.url, /^http/);
  const errors = await fileLines(stack, c.key, batch.error_file_id);
  assert.deepEqual(
    errors.map((l) => [l.custom_id, l.response, l.error.code]),
    [['v-fail', null, 'generation_failed']],
  );
  // The batch's jobs are listed with it.
  const jobs = await http(stack.baseUrl, 'GET', '/v2/videos/generations', { token: c.key });
  assert.equal(jobs.body.data.length, 3);
  assert.ok(jobs.body.data.every((j: any) => j.batch_id === batch.id));
  await assertAuditHolds(stack);
});
