// The official openai SDK's batch calls against /v1 by base URL: files.create({purpose: "batch"}) of
// /v1/videos lines, batches.create with endpoint "/v1/videos", batches.retrieve until it ends,
// files.content of its output and error files, and batches.cancel; exact money and the ledger audit after each.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';
import { assertAuditHolds, balanceMicro, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { VIDEO_UNIT_MICRO_EUR, waitForBatchJobs } from './setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ env: { BATCH_CONCURRENCY: '2' } });
});
after(async () => {
  await stack?.stop();
});

const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${stack.baseUrl}/v1`, maxRetries: 0 });

/** A /v1/videos line: sim-video-1 at 1280x720, 4 s (one video: 0.2 EUR). */
const v1Video = (custom_id: string, prompt = 'a lighthouse at dusk') => ({
  custom_id,
  method: 'POST',
  url: '/v1/videos',
  body: { model: 'sim-video-1', prompt, seconds: '4', size: '1280x720' },
});

async function upload(openai: OpenAI, lines: unknown[]) {
  const jsonl = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
  return openai.files.create({ file: await toFile(Buffer.from(jsonl), 'batch.jsonl', { type: 'application/jsonl' }), purpose: 'batch' });
}

async function retrieveUntilEnded(openai: OpenAI, id: string) {
  for (let i = 0; ; i++) {
    const b = await openai.batches.retrieve(id);
    if (['completed', 'cancelled', 'expired', 'failed'].includes(b.status)) return b;
    assert.ok(i < 600, `batch ${id} still ${b.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('files.create, batches.create on /v1/videos, batches.retrieve and files.content with the openai SDK', async () => {
  const c = await newCustomer(stack, 10);
  const openai = client(c.key);
  const file = await upload(openai, [v1Video('a'), v1Video('b'), v1Video('c')]);
  assert.equal(file.object, 'file');
  assert.equal(file.purpose, 'batch');
  const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/videos', completion_window: '24h' });
  assert.equal(created.object, 'batch');
  assert.equal(created.endpoint, '/v1/videos');
  assert.equal(created.status, 'in_progress');
  assert.equal(created.request_counts?.total, 3);
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 3 * VIDEO_UNIT_MICRO_EUR);

  const batch = await retrieveUntilEnded(openai, created.id);
  assert.equal(batch.status, 'completed');
  assert.deepEqual(batch.request_counts, { total: 3, completed: 3, failed: 0 });
  assert.ok(batch.completed_at);
  const content = await (await openai.files.content(batch.output_file_id!)).text();
  const lines = content
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => l.custom_id),
    ['a', 'b', 'c'],
  );
  for (const l of lines) {
    assert.equal(l.response.status_code, 200);
    assert.equal(l.response.body.object, 'video');
    assert.equal(l.response.body.status, 'completed');
    assert.equal(l.response.body.size, '1280x720');
  }
  // Each video was delivered: the whole reservation kept, nothing released.
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 3 * VIDEO_UNIT_MICRO_EUR);
  const input = await (await openai.files.content(file.id)).text();
  assert.equal(input.trim().split('\n').length, 3);
  await assertAuditHolds(stack);
});

test('batches.cancel with the openai SDK: what never started is refunded when the batch ends; a bad line is a 400 naming it', async () => {
  const c = await newCustomer(stack, 10);
  const openai = client(c.key);
  const file = await upload(
    openai,
    Array.from({ length: 6 }, (_, i) => v1Video(`v-${i}`)),
  );
  // The simulator takes its default 2 s per video: two run (BATCH_CONCURRENCY=2) while the cancel arrives.
  const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/videos', completion_window: '24h' });
  await waitForBatchJobs(stack, created.id, 2);
  const cancelling = await openai.batches.cancel(created.id);
  assert.equal(cancelling.status, 'cancelling');
  // The reservation is kept until the batch ends; then what was not used comes back at once.
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 6 * VIDEO_UNIT_MICRO_EUR);
  const batch = await retrieveUntilEnded(openai, created.id);
  assert.equal(batch.status, 'cancelled');
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 2 * VIDEO_UNIT_MICRO_EUR);
  assert.ok(batch.cancelled_at);
  assert.deepEqual(batch.request_counts, { total: 6, completed: 2, failed: 4 });
  const errors = (await (await openai.files.content(batch.error_file_id!)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.ok(errors.every((l) => l.error.code === 'batch_cancelled'));

  const bad = await upload(openai, [v1Video('ok'), { ...v1Video('bad'), body: { prompt: 'x', seconds: '4', size: '999x1' } }]);
  await assert.rejects(
    openai.batches.create({ input_file_id: bad.id, endpoint: '/v1/videos', completion_window: '24h' }),
    (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal((err.error as any)?.code, 'invalid_batch_request');
      assert.equal((err.error as any)?.param, 'requests[1]');
      assert.match(err.message, /line 2/);
      return true;
    },
  );
  assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 2 * VIDEO_UNIT_MICRO_EUR);
  await assertAuditHolds(stack);
});
