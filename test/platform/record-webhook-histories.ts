// Records the event histories of the webhook delivery workflow's paths into test/histories/<version>/,
// for the replay test: delivered after two refused attempts, and given up once its retry window passed.
// Run with `npm run record-histories` (with the video job recorder).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { inTransaction } from '../../src/db/pool.js';
import { UrlSigner } from '../../src/storage/signed-urls.js';
import { recordJobEvent } from '../../src/webhooks/events.js';
import { webhookDeliveryWorkflowId, type webhookDeliveryWorkflow } from '../../workflows/webhook-delivery.js';
import { http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { saveHistory } from '../helpers/histories.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

let stack: Stack;
const receivers: Receiver[] = [];
before(async () => {
  stack = await startStack({ env: { WEBHOOK_RETRY_INITIAL_MS: '200' } });
});
after(async () => {
  for (const r of receivers) await r.close();
  await stack.stop();
});

async function register(key: string, receiver: Receiver) {
  receivers.push(receiver);
  const endpoint = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: key, json: { url: receiver.url } });
  assert.equal(endpoint.status, 201);
}

async function finishedJob(key: string): Promise<string> {
  const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: key, json: simJob({ delay_ms: 0 }) });
  assert.equal(created.status, 202);
  return (await waitForJob(stack, key, created.body.id)).id;
}

test('delivered after two refused attempts', async () => {
  const c = await newCustomer(stack, 10);
  await register(c.key, await startReceiver({ script: [{ status: 500 }, { status: 302, headers: { location: '/x' } }] }));
  const jobId = await finishedJob(c.key);
  const r = await stack.db.query(
    'SELECT d.id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.video_job_id = $1',
    [jobId],
  );
  const id: string = r.rows[0].id;
  const result = await stack.api.temporal.workflow.getHandle(webhookDeliveryWorkflowId(id)).result();
  assert.deepEqual(result, { delivery_id: id, status: 'succeeded' });
  await saveHistory(stack, 'webhook-delivery-after-retries', webhookDeliveryWorkflowId(id));
});

test('given up after its retry window', async () => {
  const c = await newCustomer(stack, 10);
  const jobId = await finishedJob(c.key);
  // Registered after the job finished: its delivery is recorded here and started with a 1 s window.
  await register(c.key, await startReceiver({ fallback: { status: 500 } }));
  const context = { downloadUrls: new UrlSigner(stack.config.urlSigningSecret!, 3600), baseUrl: 'http://127.0.0.1' };
  const [id] = await inTransaction(stack.db, (tx) => recordJobEvent(tx, jobId, context));
  const handle = await stack.api.temporal.workflow.start<typeof webhookDeliveryWorkflow>('webhookDeliveryWorkflow', {
    workflowId: webhookDeliveryWorkflowId(id!),
    taskQueue: stack.config.temporal.taskQueue,
    args: [{ delivery_id: id!, retry_initial_ms: 200, give_up_after_ms: 1_000 }],
  });
  assert.deepEqual(await handle.result(), { delivery_id: id, status: 'failed' });
  await saveHistory(stack, 'webhook-delivery-given-up', handle.workflowId);
});
