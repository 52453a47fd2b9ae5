// Batches on /v2: a mixed batch of videos and speech with failures and shortfalls ends with exact
// money and correct output and error files; a cancel refunds at once what never ran; a bad line is a
// 400 naming it and charges nothing; a batch the balance cannot cover is a 402 that starts nothing.
// The ledger audit holds after each.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { batchWorkflowId } from '../../workflows/messages.js';
import { RUN_ITEMS_MAX } from '../../workflows/batch.js';
import { BatchEvent } from '../../src/batches/schemas.js';
import { fileLines, SPEECH_CHAR_MICRO_EUR, speechLine, VIDEO_UNIT_MICRO_EUR, videoLine, waitForBatch, waitForBatchJobs } from './setup.js';

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
  const listed = await http(stack.baseUrl, 'GET', '/v2/batches?limit=1', { token: c.key });
  assert.deepEqual([listed.body.data.map((b: any) => b.id), listed.body.has_more], [[batch.id], false]);
  assert.deepEqual(listed.body.data[0].metadata, { run: 'one' });
  // The batch's jobs are listed with it.
  const jobs = await http(stack.baseUrl, 'GET', '/v2/videos/generations', { token: c.key });
  assert.equal(jobs.body.data.length, 3);
  assert.ok(jobs.body.data.every((j: any) => j.batch_id === batch.id));
  await assertAuditHolds(stack);
});

test('a cancel starts nothing more; those running finish, then cancelled, and what was not used comes back as one refund', async () => {
  const c = await newCustomer(stack, 20);
  const requests = Array.from({ length: 12 }, (_, i) => videoLine(`v-${i}`, i === 1 ? 'short' : 'ok', 3_000));
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const reserved = 12 * 2 * VIDEO_UNIT_MICRO_EUR;
  // BATCH_CONCURRENCY=4: four jobs run, eight wait.
  await waitForBatchJobs(stack, created.body.id, 4);
  const cancelled = await http(stack.baseUrl, 'POST', `/v2/batches/${created.body.id}/cancel`, { token: c.key });
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  assert.equal(cancelled.body.status, 'cancelling');
  assert.equal(cancelled.body.request_counts.failed, 8);
  // Nothing comes back while those running run: the batch's one refund is at its end.
  assert.equal(cancelled.body.refunded_in_euro, 0);
  assert.equal(await balanceMicro(stack, c.workspaceId), 20_000_000 - reserved);
  const again = await http(stack.baseUrl, 'POST', `/v2/batches/${created.body.id}/cancel`, { token: c.key });
  assert.equal(again.status, 200);
  assert.deepEqual([again.body.status, again.body.request_counts.failed], ['cancelling', 8], 'a second cancel changes nothing');

  const batch = await waitForBatch(stack, c.key, created.body.id);
  assert.equal(batch.status, 'cancelled');
  assert.deepEqual(batch.request_counts, { total: 12, completed: 4, failed: 8 });
  const cost = 3 * 2 * VIDEO_UNIT_MICRO_EUR + VIDEO_UNIT_MICRO_EUR;
  assert.equal(batch.cost_in_euro * 1e6, cost);
  assert.equal(await balanceMicro(stack, c.workspaceId), 20_000_000 - cost);
  const entries = await stack.db.query('SELECT kind, amount_micro_eur FROM ledger_entries WHERE batch_id = $1 ORDER BY id', [batch.id]);
  // One refund: the eight never started and the shortfall of one that ran.
  assert.deepEqual(entries.rows, [
    { kind: 'charge', amount_micro_eur: -reserved },
    { kind: 'refund', amount_micro_eur: reserved - cost },
  ]);
  assert.equal(batch.refunded_in_euro * 1e6, reserved - cost);
  const jobs = await stack.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE batch_id = $1', [batch.id]);
  assert.equal(jobs.rows[0].n, 4, 'nothing started after the cancel');
  const errors = await fileLines(stack, c.key, batch.error_file_id);
  assert.equal(errors.length, 8);
  assert.ok(errors.every((l) => l.error.code === 'batch_cancelled' && l.response === null));
  const late = await http(stack.baseUrl, 'POST', `/v2/batches/${batch.id}/cancel`, { token: c.key });
  assert.equal(late.status, 409);
  assert.equal(late.body.error.code, 'batch_not_cancellable');
  await assertAuditHolds(stack);
});

test('a bad line is a 400 naming its line and index, and nothing is charged or started', async () => {
  const c = await newCustomer(stack, 20);
  const cases: [unknown, RegExp][] = [
    [{ ...videoLine('bad', 'ok'), body: { ...videoLine('bad', 'ok').body, resolution: '4k' } }, /resolution/],
    [speechLine('bad', 'hi'), /./],
    [{ custom_id: 'bad', method: 'GET', url: '/v2/audio/speech', body: {} }, /method/],
    [{ custom_id: 'bad', method: 'POST', url: '/v2/ledger', body: {} }, /url/],
    ['not an object', /./],
  ];
  (cases[1]![0] as any).body.voice = 'no-such-voice';
  for (const [bad, mention] of cases) {
    const requests: unknown[] = Array.from({ length: 8 }, (_, i) => speechLine(`s-${i}`, 'fine'));
    requests[6] = bad;
    const r = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'invalid_batch_request');
    assert.equal(r.body.error.param, 'requests[6]');
    assert.match(r.body.error.message, /^line 7: /);
    assert.match(r.body.error.message, mention);
  }
  const dup = await http(stack.baseUrl, 'POST', '/v2/batches', {
    token: c.key,
    json: { requests: [speechLine('same', 'a'), speechLine('same', 'b')] },
  });
  assert.equal(dup.status, 400);
  assert.equal(dup.body.error.param, 'requests[1]');
  // A key limited to the video model: a speech line is refused as its own request would be.
  const key = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, {
    token: ADMIN_TOKEN,
    json: { models: ['sim-video-1'] },
  });
  const limited = await http(stack.baseUrl, 'POST', '/v2/batches', {
    token: key.body.key,
    json: { requests: [videoLine('v', 'ok'), speechLine('s', 'hello')] },
  });
  assert.equal(limited.status, 400, JSON.stringify(limited.body));
  assert.equal(limited.body.error.param, 'requests[1]');
  assert.equal(await balanceMicro(stack, c.workspaceId), 20_000_000);
  const rows = await stack.db.query('SELECT count(*)::int AS n FROM batches WHERE workspace_id = $1', [c.workspaceId]);
  assert.equal(rows.rows[0].n, 0);
  await assertAuditHolds(stack);
});

test('a batch the balance or the key limit cannot cover is a 402: nothing reserved, nothing started', async () => {
  const c = await newCustomer(stack, 0.5);
  const requests = [videoLine('a', 'ok'), videoLine('b', 'ok')];
  const r = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(r.status, 402, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'insufficient_credits');
  assert.equal(await balanceMicro(stack, c.workspaceId), 500_000);
  const rich = await newCustomer(stack, 20);
  const key = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${rich.workspaceId}/api-keys`, {
    token: ADMIN_TOKEN,
    json: { spend_limit_in_euro: 0.5 },
  });
  const limited = await http(stack.baseUrl, 'POST', '/v2/batches', { token: key.body.key, json: { requests } });
  assert.equal(limited.status, 402, JSON.stringify(limited.body));
  assert.equal(limited.body.error.code, 'key_spend_limit_exceeded');
  assert.equal(await balanceMicro(stack, rich.workspaceId), 20_000_000);
  const rows = await stack.db.query('SELECT count(*)::int AS n FROM batches WHERE workspace_id = ANY($1::uuid[])', [
    [c.workspaceId, rich.workspaceId],
  ]);
  assert.equal(rows.rows[0].n, 0);
  const jobs = await stack.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE workspace_id = ANY($1::uuid[])', [
    [c.workspaceId, rich.workspaceId],
  ]);
  assert.equal(jobs.rows[0].n, 0);
  await assertAuditHolds(stack);
});

test('an uploaded JSONL file runs as a batch; batch.completed is sent to subscribed webhooks', async () => {
  const c = await newCustomer(stack, 20);
  const receiver = await startReceiver();
  try {
    const hook = await http(stack.baseUrl, 'POST', '/v2/webhooks', {
      token: c.key,
      json: { url: receiver.url, events: ['batch.completed'] },
    });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));
    const lines = [speechLine('one', 'first line'), speechLine('two', 'second line')].map((l) => JSON.stringify(l)).join('\n') + '\n';
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([lines], { type: 'application/jsonl' }), 'requests.jsonl');
    const up = await fetch(`${stack.baseUrl}/v2/files`, { method: 'POST', headers: { authorization: `Bearer ${c.key}` }, body: form });
    const file = (await up.json()) as any;
    assert.equal(up.status, 200, JSON.stringify(file));
    assert.equal(file.object, 'file');
    assert.equal(file.purpose, 'batch');
    assert.equal(file.bytes, Buffer.byteLength(lines));
    assert.deepEqual(
      (await fileLines(stack, c.key, file.id)).map((l) => l.custom_id),
      ['one', 'two'],
    );
    const created = await http(stack.baseUrl, 'POST', '/v2/batches', {
      token: c.key,
      json: { input_file_id: file.id, endpoint: '/v2/audio/speech', completion_window: '24h' },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.equal(created.body.input_file_id, file.id);
    const batch = await waitForBatch(stack, c.key, created.body.id);
    assert.equal(batch.status, 'completed');
    assert.equal(batch.error_file_id, null);
    const [delivery] = await receiver.waitFor(1, 30_000);
    const event = BatchEvent.parse(JSON.parse(delivery!.body));
    assert.equal(event.type, 'batch.completed');
    assert.equal(event.data.id, batch.id);
    assert.equal(event.data.status, 'completed');
    const out = await http(stack.baseUrl, 'GET', `/v2/files/${batch.output_file_id}`, { token: c.key });
    assert.equal(out.body.purpose, 'batch_output');
    const notJsonl = new FormData();
    notJsonl.append('purpose', 'batch');
    notJsonl.append('file', new Blob(['not json\n']), 'x.jsonl');
    const refused = await fetch(`${stack.baseUrl}/v2/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}` },
      body: notJsonl,
    });
    assert.equal(refused.status, 415);
    await assertAuditHolds(stack);
  } finally {
    await receiver.close();
  }
});

test('a batch longer than one run continues as new, its history bounded, and runs every request once', async () => {
  const c = await newCustomer(stack, 20);
  const requests = Array.from({ length: RUN_ITEMS_MAX + 15 }, (_, i) => speechLine(`s-${i}`, `line ${i}`));
  const created = await http(stack.baseUrl, 'POST', '/v2/batches', { token: c.key, json: { requests } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const batch = await waitForBatch(stack, c.key, created.body.id, 180_000);
  assert.equal(batch.status, 'completed');
  assert.deepEqual(batch.request_counts, { total: requests.length, completed: requests.length, failed: 0 });
  const chars = requests.reduce((s, r) => s + r.body.input.length, 0);
  assert.equal(await balanceMicro(stack, c.workspaceId), 20_000_000 - chars * SPEECH_CHAR_MICRO_EUR);
  const rows = await stack.db.query('SELECT count(*)::int AS n FROM speech_requests WHERE batch_id = $1', [batch.id]);
  assert.equal(rows.rows[0].n, requests.length);
  // The last run was continued from an earlier one, and each run's history stays small.
  const history = await stack.api.temporal.workflow.getHandle(batchWorkflowId(batch.id)).fetchHistory();
  const started = history.events![0]!.workflowExecutionStartedEventAttributes!;
  assert.ok(started.continuedExecutionRunId, 'the batch continued as new');
  assert.ok(history.events!.length < 1_000, `${history.events!.length} events in the last run`);
  await assertAuditHolds(stack);
});
