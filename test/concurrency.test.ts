// 20 concurrent creates against a balance that covers 5: exactly 5 are accepted, and the balance
// never goes below zero (sampled throughout, and guarded by a CHECK constraint).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from './helpers/stack.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

test('20 concurrent creates, balance for 5: exactly 5 accepted, 15 refused with 402', async () => {
  // One job: sim-video-1, 4 s, 720p, n=2 = 0.4 EUR. Five of them: 2 EUR.
  const c = await newCustomer(stack, 2);
  let sampling = true;
  const samples: number[] = [];
  const sampler = (async () => {
    while (sampling) {
      samples.push(await balanceMicro(stack, c.workspaceId));
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { prompt: `concurrent job ${i}` }) }),
    ),
  );
  sampling = false;
  await sampler;
  const accepted = results.filter((r) => r.status === 202);
  const refused = results.filter((r) => r.status === 402);
  assert.equal(accepted.length, 5, JSON.stringify(results.map((r) => r.status)));
  assert.equal(refused.length, 15);
  for (const r of refused) assert.equal(r.body.error.code, 'insufficient_credits');
  assert.equal(new Set(accepted.map((r) => r.body.id)).size, 5);
  assert.ok(samples.length > 0 && samples.every((b) => b >= 0), `balance went negative: ${Math.min(...samples)}`);
  assert.equal(await balanceMicro(stack, c.workspaceId), 0);
  for (const r of accepted) assert.equal((await waitForJob(stack, c.key, r.body.id)).status, 'succeeded');
  assert.equal(await balanceMicro(stack, c.workspaceId), 0);
  await assertAuditHolds(stack);
});
