// Readiness (GET /readyz) is the process and PostgreSQL: with Temporal unreachable an API stays ready,
// its reads still answer and a create answers its documented 503 (nothing charged), while the
// temporal_reachable gauge says 0 (alert TemporalUnreachable) and 1 again once Temporal is back. Probes
// share one PostgreSQL check per cache period and never call Temporal.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, infra, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { Readiness } from '../../src/service/readiness.js';
import { registry } from '../../src/metrics.js';

const gauge = async () => {
  const line = (await registry.metrics()).split('\n').find((l) => l.startsWith('temporal_reachable '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};
const until = async (what: string, check: () => Promise<boolean>, timeout_ms = 20_000) => {
  const end = Date.now() + timeout_ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

describe('an API whose Temporal goes away', () => {
  let stack: Stack;
  let proxy: TcpProxy;
  before(async () => {
    const [host, port] = infra().temporalAddress.split(':');
    proxy = new TcpProxy({ host: host!, port: Number(port) });
    stack = await startStack({ env: { TEMPORAL_ADDRESS: `127.0.0.1:${await proxy.start()}`, VIDEO_CREATE_TIMEOUT_MS: '4000' } });
  });
  after(async () => {
    proxy.restore();
    await stack.stop();
    await proxy.stop();
  });

  test('stays ready, reads still answer, creates answer 503 with nothing charged; the gauge says 0, then 1 once back', async () => {
    const c = await newCustomer(stack, 10);
    const job = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }, { n: 1 }) });
    assert.equal(job.status, 202, JSON.stringify(job.body));
    await waitForJob(stack, c.key, job.body.id);
    await until('the gauge to say Temporal is reachable', async () => (await gauge()) === 1);
    const balance = await balanceMicro(stack, c.workspaceId);

    proxy.refuse();
    const started = performance.now();
    const ready = await http(stack.baseUrl, 'GET', '/readyz');
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.deepEqual(ready.body, { ok: true });
    assert.ok(performance.now() - started < 1_000, 'no wait for Temporal');
    const read = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${job.body.id}`, { token: c.key });
    assert.equal(read.status, 200);
    const refused = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }, { n: 1 }) });
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.type, 'api_error');
    assert.equal(refused.headers.get('retry-after'), '5');
    assert.equal(await balanceMicro(stack, c.workspaceId), balance, 'nothing charged');
    await until('the gauge to say Temporal is unreachable', async () => (await gauge()) === 0);
    assert.equal((await http(stack.baseUrl, 'GET', '/readyz')).status, 200);

    proxy.restore();
    await until('the gauge to say Temporal is back', async () => (await gauge()) === 1, 30_000);
    // A create retried as the 503 says (same Idempotency-Key) is accepted once the connection is back: on a
    // loaded machine the first one after the gauge turns can still run out of its time to be accepted.
    const create = () =>
      http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: c.key,
        json: simJob({ delay_ms: 0 }, { n: 1 }),
        headers: { 'idempotency-key': 'after-temporal-is-back' },
      });
    let again = await create();
    for (const deadline = Date.now() + 30_000; again.status === 503 && Date.now() < deadline; again = await create()) {
      assert.equal(again.body.error.code, 'temporarily_unavailable', JSON.stringify(again.body));
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.equal(again.status, 202, JSON.stringify(again.body));
    await waitForJob(stack, c.key, again.body.id);
    await assertAuditHolds(stack);
  });
});

describe('Readiness', () => {
  test('probes share one PostgreSQL check per cache period, and never call Temporal', async () => {
    let database = 0;
    let temporal = 0;
    let down = false;
    const readiness = new Readiness({
      database: async () => {
        database++;
        await new Promise((r) => setTimeout(r, 20));
        if (down) throw new Error('connect ECONNREFUSED');
      },
      temporal: async () => {
        temporal++;
      },
      cache_ms: 300,
    });
    assert.deepEqual(await Promise.all(Array.from({ length: 50 }, () => readiness.ready())), Array(50).fill(true));
    for (let i = 0; i < 50; i++) assert.equal(await readiness.ready(), true);
    assert.equal(database, 1);
    down = true;
    await new Promise((r) => setTimeout(r, 350));
    assert.equal(await readiness.ready(), false);
    assert.equal(await readiness.ready(), false);
    assert.equal(database, 2);
    assert.equal(temporal, 0, 'readiness never asks Temporal');
  });

  test('the Temporal checks run in the background, one per interval, and set the gauge', async () => {
    let temporal = 0;
    let reachable = true;
    const readiness = new Readiness({
      database: async () => {},
      temporal: async (timeout_ms) => {
        temporal++;
        assert.ok(timeout_ms > 0);
        if (!reachable) throw new Error('14 UNAVAILABLE: connection refused');
      },
      temporal_interval_ms: 100,
    });
    readiness.start();
    try {
      await until('a first check', async () => readiness.temporalReachable() === true);
      assert.equal(await gauge(), 1);
      reachable = false;
      await until('a failed check', async () => readiness.temporalReachable() === false);
      assert.equal(await gauge(), 0);
      for (let i = 0; i < 20; i++) await readiness.ready();
      const checks = temporal;
      await new Promise((r) => setTimeout(r, 450));
      assert.ok(temporal - checks >= 3 && temporal - checks <= 6, `${temporal - checks} checks in 450 ms`);
    } finally {
      readiness.stop();
    }
  });
});
