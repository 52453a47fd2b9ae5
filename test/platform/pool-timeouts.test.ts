// The pool against a PostgreSQL that goes silent (a black-holed network: connections stay open, nothing
// answers): a statement fails after the client's query_timeout instead of waiting for the kernel, the
// error reads as the database being unreachable (a 503, never a 500), the silent connection is not
// reused, and the pool works again once the network does. Connections use TCP keepalive.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPool, inTransaction, QUERY_TIMEOUT_MS, STATEMENT_TIMEOUT_MS, type Db } from '../../src/db/pool.js';
import { unreachableDependency } from '../../src/dependency-errors.js';
import { createTestDatabase } from '../helpers/stack.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

let proxy: TcpProxy;
let db: Db;
const QUERY_TIMEOUT_TEST_MS = 800;

before(async () => {
  const url = new URL(await createTestDatabase());
  proxy = new TcpProxy({ host: url.hostname, port: Number(url.port) });
  url.port = String(await proxy.start());
  url.hostname = '127.0.0.1';
  db = createPool(url.toString(), 2, {}, { statement_timeout_ms: 400, query_timeout_ms: QUERY_TIMEOUT_TEST_MS });
});

after(async () => {
  // The proxy first: a connection still waiting on the silent server then ends, and so can the pool.
  await proxy?.stop();
  await db?.end();
});

const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms).unref())]);

test('the client gives up on a statement after its query_timeout, above the server-side statement_timeout', () => {
  assert.ok(
    QUERY_TIMEOUT_MS > STATEMENT_TIMEOUT_MS + 5_000,
    'above every statement_timeout a session sets (35 s on the charge refusal path)',
  );
  const options = (db as unknown as { options: Record<string, unknown> }).options;
  assert.equal(options['keepAlive'], true);
  assert.equal(options['query_timeout'], QUERY_TIMEOUT_TEST_MS);
});

test('a silent server fails a statement within the query timeout, as the database unreachable; then the pool recovers', async () => {
  // Both connections of the pool open (a new one could not connect while the server is silent).
  const opened = await Promise.all(
    [1, 2].map(() => inTransaction(db, async (tx) => tx.query('SELECT pg_backend_pid() AS pid, pg_sleep(0.1)'))),
  );
  assert.equal(new Set(opened.map((r) => r.rows[0].pid)).size, 2);
  proxy.silent = true;
  for (const statement of [() => db.query('SELECT 2'), () => inTransaction(db, async (tx) => tx.query('SELECT 2'))]) {
    const started = performance.now();
    const err = await within(statement(), 5_000).then(
      () => assert.fail('answered while the server was silent'),
      (e: unknown) => e,
    );
    assert.doesNotMatch(String(err), /still waiting/);
    assert.equal(unreachableDependency(err), 'postgres', String(err));
    assert.ok(performance.now() - started < QUERY_TIMEOUT_TEST_MS + 1_500);
  }
  proxy.silent = false;
  // The connections that went silent were dropped, not returned to the pool: the next statements answer.
  for (let i = 0; i < 4; i++) assert.equal((await within(db.query('SELECT 3 AS three'), 5_000)).rows[0].three, 3);
  await within(
    inTransaction(db, async (tx) => tx.query('SELECT 4')),
    5_000,
  );
});
