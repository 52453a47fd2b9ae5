// Scale-out: two API processes and two worker processes (`src/api-main.ts`, `src/worker-main.ts`, as
// `npm run api` / `npm run worker` run them) against one Temporal and one PostgreSQL. Jobs go in
// through both APIs, one worker is killed with SIGKILL midway, and every job completes, billed exactly.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { msToTs } from '@temporalio/common/lib/time.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { freePort } from '../helpers/infra.js';
import { ADMIN_TOKEN, assertAuditHolds, balanceMicro, http, simJob, startStack, type Stack } from '../helpers/stack.js';

let stack: Stack;
const children: ChildProcess[] = [];

before(async () => {
  stack = await startStack({ worker: false, env: { VIDEO_JOB_TIMEOUT_MS: '300000' } });
});
after(async () => {
  killAll(children);
  await stack.stop();
});

test('two APIs, two workers, one worker killed midway: every job completes and billing is exact', async () => {
  const ports = [await freePort(), await freePort()];
  await Promise.all(ports.map((p) => startEntryProcess(stack, 'api', { env: { PORT: String(p) }, track: children })));
  const workers = await Promise.all([
    startEntryProcess(stack, 'worker', { track: children }),
    startEntryProcess(stack, 'worker', { track: children }),
  ]);
  const apis = ports.map((p) => `http://127.0.0.1:${p}`);

  const ws = await http(apis[0]!, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: { name: 'scale', credits_in_euro: 20 } });
  assert.equal(ws.status, 201);
  const key = await http(apis[1]!, 'POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, { token: ADMIN_TOKEN, json: {} });
  assert.equal(key.status, 201);

  // 12 jobs through alternating APIs; each n=2 at 0.2 EUR, one of two videos delivered for every third.
  const jobs = await Promise.all(
    Array.from({ length: 12 }, async (_, i) => {
      const r = await http(apis[i % 2]!, 'POST', '/v2/videos/generations', {
        token: key.body.key,
        json: simJob({ delay_ms: 3_000, ...(i % 3 === 0 ? { videos: 1 } : {}) }, { prompt: `scale ${i}` }),
      });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      return { id: r.body.id as string, shortfall: i % 3 === 0 };
    }),
  );
  assert.equal(await balanceMicro(stack, ws.body.id), 20_000_000 - 12 * 400_000);

  workers[0]!.kill('SIGKILL');

  for (const [i, job] of jobs.entries()) {
    let body: any;
    for (let t = 0; ; t++) {
      // Status through the API that did not create the job: any API answers for any job.
      const r = await http(apis[(i + 1) % 2]!, 'GET', `/v2/videos/generations/${job.id}`, { token: key.body.key });
      assert.equal(r.status, 200);
      body = r.body;
      if (body.status !== 'pending') break;
      assert.ok(t < 900, `job ${job.id} still pending`);
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.equal(body.status, 'succeeded', JSON.stringify(body));
    assert.equal(body.videos.length, job.shortfall ? 1 : 2);
    assert.equal(body.refunded_in_euro, job.shortfall ? 0.2 : 0);
  }
  const shortfalls = jobs.filter((j) => j.shortfall).length;
  assert.equal(await balanceMicro(stack, ws.body.id), 20_000_000 - 12 * 400_000 + shortfalls * 200_000);
  await assertAuditHolds(stack);
});

test('a process on a namespace without the search attributes stops at startup with one line saying how to add them', async () => {
  const namespace = `bare-${Date.now()}`;
  await stack.api.temporal.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  for (const entry of ['api', 'worker'] as const) {
    const failed = await startEntryProcess(stack, entry, { env: { TEMPORAL_NAMESPACE: namespace, PORT: '0' }, track: children }).then(
      () => null,
      (err: Error) => err.message,
    );
    assert.ok(failed, `${entry} must not start`);
    const lines = failed.split('\n').filter((l) => l.trim() !== '' && !l.includes(' WARN '));
    assert.equal(lines.length, 1, failed); // "<entry> exited (1): <entry>: <the one line>"
    assert.match(
      lines[0]!,
      new RegExp(
        `lacks the Keyword search attribute\\(s\\) WorkspaceId, VideoModel, VideoJobStatus; add them: temporal operator search-attribute create --namespace ${namespace} --name WorkspaceId --type Keyword`,
      ),
    );
  }
});
