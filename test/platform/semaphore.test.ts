// The semaphore that bounds a worker's output copies: never more holders than permits, waiters served in
// order, a bounded queue.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Semaphore } from '../../src/semaphore.js';

test('at most `permits` run at once; every waiter runs, in arrival order; a failure frees its permit', async () => {
  const s = new Semaphore(3, 100);
  let running = 0;
  let most = 0;
  const order: number[] = [];
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) =>
      s.with(async () => {
        running++;
        most = Math.max(most, running);
        order.push(i);
        await sleep(5);
        running--;
        if (i === 4) throw new Error('boom');
        return i;
      }),
    ),
  );
  assert.equal(most, 3);
  assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 9);
  assert.equal(await s.with(async () => 'free again'), 'free again');
});

test('a waiter beyond the queue bound is refused at once', async () => {
  const s = new Semaphore(1, 1);
  let release = () => {};
  const holder = s.with(() => new Promise<void>((r) => (release = r)));
  const waiter = s.with(async () => 'waited');
  await assert.rejects(
    s.with(async () => 'refused'),
    /more than 1 waiting/,
  );
  release();
  await holder;
  assert.equal(await waiter, 'waited');
  assert.throws(() => new Semaphore(0, 1), RangeError);
});
