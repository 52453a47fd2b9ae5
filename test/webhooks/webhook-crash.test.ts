// Webhook delivery survives the worker being killed mid-retry: the worker (a real `npm run worker`
// process) settles a job, the receiver refuses the first attempt, the worker is killed with SIGKILL
// while the delivery waits for its next attempt, and a new worker process delivers it: the same
// webhook-id, valid signatures, every attempt recorded once.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { Webhook } from 'standardwebhooks';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { assertAuditHolds, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

let stack: Stack;
let receiver: Receiver;
const children: ChildProcess[] = [];

before(async () => {
  stack = await startStack({ worker: false, env: { WEBHOOK_RETRY_INITIAL_MS: '2000' } });
  receiver = await startReceiver({ script: [{ status: 500 }, { status: 503 }], fallback: { status: 204 } });
});
after(async () => {
  killAll(children);
  await receiver.close();
  await stack.stop();
});

test('SIGKILL of the worker between two attempts: a new worker delivers the event, with the same webhook-id', async () => {
  const first = await startEntryProcess(stack, 'worker', { track: children });
  const c = await newCustomer(stack, 10);
  const endpoint = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: receiver.url } });
  assert.equal(endpoint.status, 201);
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) });
  assert.equal(created.status, 202);
  const job = await waitForJob(stack, c.key, created.body.id);
  assert.equal(job.status, 'succeeded');

  // The first attempt was refused and recorded: kill the worker while the delivery waits to retry.
  await receiver.waitFor(1);
  for (let i = 0; (await stack.db.query('SELECT 1 FROM webhook_delivery_attempts')).rowCount === 0; i++) {
    assert.ok(i < 200, 'attempt 1 recorded');
    await new Promise((r) => setTimeout(r, 25));
  }
  await new Promise((r) => setTimeout(r, 200)); // its failure reported to Temporal
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  assert.equal(first.signalCode, 'SIGKILL');

  await new Promise((r) => setTimeout(r, 3_000));
  assert.equal(receiver.received.length, 1, 'no worker, no attempt');

  await startEntryProcess(stack, 'worker', { track: children });
  const got = await receiver.waitFor(3, 60_000);
  assert.equal(new Set(got.map((w) => w.headers['webhook-id'])).size, 1);
  for (const w of got) {
    const event = new Webhook(endpoint.body.secret).verify(w.body, {
      'webhook-id': w.headers['webhook-id']!,
      'webhook-timestamp': w.headers['webhook-timestamp']!,
      'webhook-signature': w.headers['webhook-signature']!,
    }) as { type: string; data: { id: string } };
    assert.equal(event.type, 'video.generation.succeeded');
    assert.equal(event.data.id, job.id);
  }
  let attempts: any[] = [];
  for (let i = 0; ; i++) {
    const r = await http(stack.baseUrl, 'GET', `/v2/webhooks/${endpoint.body.id}/deliveries`, { token: c.key });
    attempts = r.body.data;
    if (attempts[0]?.delivery_status === 'succeeded') break;
    assert.ok(i < 200, 'the delivery succeeded');
    await new Promise((res) => setTimeout(res, 50));
  }
  assert.deepEqual(
    attempts.map((a) => [a.attempt, a.status, a.http_status]),
    [
      [3, 'succeeded', 204],
      [2, 'failed', 503],
      [1, 'failed', 500],
    ],
  );
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(receiver.received.length, 3, 'nothing after the success');
  await assertAuditHolds(stack);
});
