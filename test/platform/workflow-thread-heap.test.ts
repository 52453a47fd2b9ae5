// A worker's workflow threads are started with a small young generation (src/temporal/worker.ts): a
// thread that allocates fast, as a workflow thread does while jobs are created, keeps its new space
// within the limit, where one started afterwards, with V8's own sizing, grows past it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { WORKFLOW_THREAD_SEMI_SPACE_MB, withWorkflowThreadHeap } from '../../src/temporal/worker.js';

const MIB = 1024 * 1024;

// Rounds of objects of which the last few rounds survive (as a burst of activations' state does), then
// the size of the thread's new space (both semi-spaces).
const BURST = `
  const v8 = require('node:v8');
  const { parentPort } = require('node:worker_threads');
  let kept = [];
  for (let round = 0; round < 60; round++) {
    const objects = [];
    for (let i = 0; i < 300000; i++) objects.push({ i, s: 'x' + i });
    kept.push(objects);
    if (kept.length > 3) kept.shift();
  }
  kept = null;
  parentPort.postMessage(v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size);
`;

async function newSpaceAfterBurst(): Promise<{ worker: Worker; bytes: Promise<number> }> {
  const worker = new Worker(BURST, { eval: true });
  const bytes = once(worker, 'message').then(([b]) => b as number);
  await once(worker, 'online'); // its heap is set up by then
  return { worker, bytes };
}

test('a thread started for the workflows keeps a small young generation; one started after gets V8 sizing', async () => {
  const limited = await withWorkflowThreadHeap(newSpaceAfterBurst);
  const unlimited = await newSpaceAfterBurst();
  const [limitedBytes, unlimitedBytes] = await Promise.all([limited.bytes, unlimited.bytes]);
  await Promise.all([limited.worker.terminate(), unlimited.worker.terminate()]);
  assert.ok(
    limitedBytes <= 2 * WORKFLOW_THREAD_SEMI_SPACE_MB * MIB,
    `new space ${(limitedBytes / MIB).toFixed(1)} MiB, over two semi-spaces of ${WORKFLOW_THREAD_SEMI_SPACE_MB} MiB`,
  );
  assert.ok(
    unlimitedBytes > 2 * WORKFLOW_THREAD_SEMI_SPACE_MB * MIB,
    `a thread started afterwards grew only to ${(unlimitedBytes / MIB).toFixed(1)} MiB: the limit was not lifted`,
  );
});
