// 20 concurrent creates against a balance that covers 5: exactly 5 are accepted, and at every moment
// sampled (one snapshot each) the balance is the credits minus the estimates of the jobs recorded: a
// charge moves the money and records its job atomically, never one without the other.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';

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
  const samples: { balance_micro_eur: number; jobs_micro_eur: number }[] = [];
  const sampler = (async () => {
    while (sampling) {
      // One statement: one snapshot of the balance and of the jobs charged so far.
      const r = await stack.db.query(
        `SELECT w.balance_micro_eur,
                COALESCE((SELECT sum(j.estimated_cost_micro_eur) FROM video_jobs j WHERE j.workspace_id = w.id), 0)::bigint AS jobs_micro_eur
           FROM workspaces w WHERE w.id = $1`,
        [c.workspaceId],
      );
      samples.push(r.rows[0]);
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
  assert.ok(samples.length > 0);
  const torn = samples.filter((s) => s.balance_micro_eur !== 2_000_000 - s.jobs_micro_eur);
  assert.deepEqual(torn, [], 'a sampled balance that is not the credits minus the jobs recorded with it');
  assert.equal(await balanceMicro(stack, c.workspaceId), 0);
  for (const r of accepted) assert.equal((await waitForJob(stack, c.key, r.body.id)).status, 'succeeded');
  assert.equal(await balanceMicro(stack, c.workspaceId), 0);
  await assertAuditHolds(stack);
});
