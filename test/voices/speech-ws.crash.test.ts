// An API process SIGKILLed mid-utterance on the speech WebSocket: its hold stays, with the progress it
// recorded (characters spoken, audio bytes), and the reconciler, once the hold is past its lifetime,
// charges what was spoken and releases the rest. The ledger audit and the usage rollups hold after.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { assertAuditHolds, balanceMicro, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { freePort } from '../helpers/infra.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { connect, heldMicro, speechRows } from './speech-ws-setup.js';
import { reconcileMoney } from './setup.js';

let stack: Stack;
const children: ChildProcess[] = [];
before(async () => {
  // No worker: the reconciler runs when the test runs it.
  stack = await startStack({ worker: false });
});
after(async () => {
  killAll(children);
  await stack.stop();
});

const cost = (characters: number) => Math.ceil((characters * 150_000) / 1000);

test('SIGKILL mid-utterance: the reconciler charges what was spoken, releases the rest, and the audit holds', async () => {
  const port = await freePort();
  const api = await startEntryProcess({ env: { ...stack.env, PORT: String(port), LOG_LEVEL: 'warn' } }, 'api', { track: children });
  const { key, workspaceId } = await newCustomer(stack, 10);
  const before = await balanceMicro(stack, workspaceId);
  const c = await connect(`ws://127.0.0.1:${port}/v2/audio/speech/stream`, key);
  // Three syntheses of 1,500 characters at the simulator (1.5 s each): the first is spoken when the process dies.
  c.send({ context_id: 'k', voice: 'sim-narrator', text: 'a'.repeat(1500), continue: true });
  c.send({ context_id: 'k', text: 'b'.repeat(1500), continue: true });
  c.send({ context_id: 'k', text: 'c'.repeat(1500) });
  await c.next((m) => m.type === 'audio');
  // Its progress is recorded within a second.
  const until = Date.now() + 10_000;
  while (!(await speechRows(stack, workspaceId))[0]?.spoken_characters) {
    assert.ok(Date.now() < until, 'progress recorded');
    await new Promise((r) => setTimeout(r, 50));
  }
  api.kill('SIGKILL');
  await c.closed;
  const [held] = await speechRows(stack, workspaceId);
  assert.equal(held!.status, 'held');
  assert.equal(held!.characters, 4500, 'every text was held before it was spoken');
  assert.equal(Number(held!.spoken_characters), 1500);
  assert.equal(held!.charges, 0);
  assert.equal(await heldMicro(stack, workspaceId), cost(4500));

  // Not yet past its lifetime: the reconciler leaves it alone.
  const early = await reconcile();
  assert.equal(early.speech_holds_released, 0);
  assert.equal((await speechRows(stack, workspaceId))[0]!.status, 'held');
  // Past it (as if ten minutes went by): settled for what was spoken.
  await stack.db.query("UPDATE speech_requests SET held_at = now() - interval '11 minutes' WHERE workspace_id = $1", [workspaceId]);
  const report = await reconcile();
  assert.equal(report.speech_holds_released, 1);
  const [settled] = await speechRows(stack, workspaceId);
  assert.deepEqual(
    [settled!.status, settled!.characters, settled!.charges, settled!.charged_micro_eur],
    ['delivered', 1500, 1, cost(1500)],
  );
  assert.equal(await heldMicro(stack, workspaceId), 0);
  assert.equal(await balanceMicro(stack, workspaceId), before - cost(1500));
  // Once settled, a second run finds nothing.
  assert.equal((await reconcile()).speech_holds_released, 0);
  await assertAuditHolds(stack);
});

const reconcile = () => reconcileMoney(stack);
