// An API process killed (SIGKILL) after it verified a Stripe event's signature and before its transaction
// committed: nothing of the event is left, and Stripe's redelivery (to another API process) credits it
// exactly once. The kill lands in that window for sure: the test holds the workspace's row lock, so the
// real `npm run api` process waits inside its transaction until it is killed.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from '../helpers/infra.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { assertAuditHolds, http, newCustomer, type Stack } from '../helpers/stack.js';
import { deliver, eventPayload, paidSession, STRIPE_MOCK_MISSING, stripeEnv, useStripeStack, type StripeMock } from './setup.js';

let mock: StripeMock;
let stack: Stack;
const children: ChildProcess[] = [];

describe('a crash between the signature check and the commit', { skip: STRIPE_MOCK_MISSING }, () => {
  // The API process killed by the test is gone; any other child goes before the stack stops.
  after(() => killAll(children));
  useStripeStack((s, m) => {
    stack = s;
    mock = m;
  });

  test('the killed process leaves nothing; the redelivery credits once', async () => {
    const c = await newCustomer(stack, 0);
    const port = await freePort();
    const api = await startEntryProcess({ env: { ...stack.env, ...stripeEnv(mock) } }, 'api', {
      env: { PORT: String(port) },
      track: children,
    });
    const apiUrl = `http://127.0.0.1:${port}`;
    const payload = eventPayload('checkout.session.completed', paidSession(c.workspaceId, 30));

    const holder = new pg.Client({ connectionString: stack.env['DATABASE_URL'] });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [c.workspaceId]);
      const inFlight = deliver(apiUrl, payload).then(
        (r) => r,
        (err: unknown) => err,
      );
      // The API's transaction is waiting for the workspace's lock: its signature check passed, nothing committed.
      for (let i = 0; ; i++) {
        // Read outside the holder's transaction, which would see one snapshot of pg_stat_activity.
        const waiting = await stack.db.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%workspaces%'`,
        );
        if (waiting.rows[0].n > 0) break;
        if (i >= 200) {
          const all = await stack.db.query(
            'SELECT pid, state, wait_event_type, query FROM pg_stat_activity WHERE datname = current_database()',
          );
          assert.fail(
            `the API never reached the workspace lock: ${JSON.stringify(await Promise.race([inFlight, sleep(10)]))} ${JSON.stringify(all.rows)}`,
          );
        }
        await sleep(50);
      }
      const exited = new Promise((r) => api.once('exit', r));
      api.kill('SIGKILL');
      await exited;
      assert.ok((await inFlight) instanceof Error, 'the delivery got no answer: its process died');
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
    // The killed process's transaction never commits (its backend finds the connection gone).
    for (let i = 0; ; i++) {
      const left = await stack.db.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
      );
      if (left.rows[0].n === 0) break;
      assert.ok(i < 100, 'a transaction of the killed process stayed open');
      await sleep(50);
    }
    const objects = await stack.db.query('SELECT count(*)::int AS n FROM stripe_objects WHERE workspace_id = $1', [c.workspaceId]);
    assert.equal(objects.rows[0].n, 0);
    const nothing = await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key });
    assert.deepEqual(nothing.body, { object: 'balance', balance_in_euro: 0, owed_in_euro: 0 });

    // Stripe delivers it again (to whichever API process answers), and again.
    assert.equal((await deliver(stack.baseUrl, payload)).body.outcome, 'credited');
    assert.equal((await deliver(stack.baseUrl, payload)).body.outcome, 'duplicate');
    const credited = await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key });
    assert.deepEqual(credited.body, { object: 'balance', balance_in_euro: 30, owed_in_euro: 0 });
    const entries = await http(stack.baseUrl, 'GET', '/v2/ledger', { token: c.key });
    assert.equal(entries.body.data.length, 1);
    await assertAuditHolds(stack);
  });
});
