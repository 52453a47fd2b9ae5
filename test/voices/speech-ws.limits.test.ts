// The speech WebSocket's limits, each refused as docs/api.md says: contexts per socket, sockets per key,
// characters per text and per context, frame size, binary frames, idle time and malformed messages. Low
// limits set for this file's stack. (A client that reads slowly: ./speech-ws.test.ts.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { connect, errorOf, heldMicro, refusedUpgrade, speechRows, wsUrl } from './speech-ws-setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({
    env: {
      SPEECH_WS_CONTEXTS_MAX: '2',
      SPEECH_WS_SOCKETS_PER_KEY_MAX: '2',
      SPEECH_WS_MESSAGE_CHARS_MAX: '100',
      SPEECH_WS_CONTEXT_CHARS_MAX: '3000',
      SPEECH_WS_IDLE_MS: '600',
      SPEECH_WS_FRAME_BYTES_MAX: '2048',
    },
  });
});
after(async () => {
  await stack.stop();
});

describe('limits', () => {
  test('contexts per socket: a third speaking context is refused, the two others speak', async () => {
    const { key } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'a', voice: 'sim-deep', text: 'x'.repeat(100) });
    c.send({ context_id: 'b', voice: 'sim-deep', text: 'y'.repeat(100) });
    c.send({ context_id: 'c', voice: 'sim-deep', text: 'z' });
    const refused = await errorOf(c, 'c', 'too_many_contexts');
    assert.match(refused['message'], /at most 2 contexts/);
    await Promise.all([c.done('a'), c.done('b')]);
    // Once they are done, a context opens again.
    c.send({ context_id: 'c', voice: 'sim-deep', text: 'z' });
    assert.equal((await c.done('c'))['characters'], 1);
    c.close();
    await assertAuditHolds(stack);
  });

  test('characters: a text above the message limit, and one beyond the context limit, are refused unspoken', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'long', voice: 'sim-deep', text: 'x'.repeat(101) });
    await errorOf(c, 'long', 'message_too_long');
    assert.equal((await speechRows(stack, workspaceId)).length, 0);
    c.send({ context_id: 'k', voice: 'sim-deep', text: 'x'.repeat(100), continue: true });
    for (let i = 1; i < 30; i++) c.send({ context_id: 'k', text: 'y'.repeat(100), continue: true });
    c.send({ context_id: 'k', text: 'z', continue: true });
    const err = await errorOf(c, 'k', 'context_too_long');
    assert.match(err['message'], /at most 3000 characters/);
    c.send({ context_id: 'k', text: '' });
    assert.equal((await c.done('k'))['characters'], 3000);
    assert.equal((await speechRows(stack, workspaceId))[0]!.characters, 3000);
    c.close();
    await assertAuditHolds(stack);
  });

  test('malformed messages are errors; a binary frame and a frame above the size limit close the socket', async () => {
    const { key } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    c.ws.send('not json');
    await errorOf(c, null, 'invalid_message');
    c.send({ context_id: 'bad id!', voice: 'sim-deep', text: 'x' });
    await errorOf(c, null, 'invalid_message');
    c.send({ context_id: 'v', text: 'no voice' });
    const noVoice = await errorOf(c, 'v', 'invalid_message');
    assert.match(noVoice['message'], /voice/);
    c.send({ context_id: 'm', voice: 'sim-deep', text: 'x', model: 'no-such-model' });
    await errorOf(c, 'm', 'model_not_found');
    c.send({ context_id: 'w', voice: 'nobody', text: 'x' });
    await errorOf(c, 'w', 'voice_not_found');
    c.ws.send(Buffer.from([1, 2, 3]));
    assert.equal((await c.closed).code, 1003);
    const big = await connect(wsUrl(stack), key);
    big.send({ context_id: 'f', voice: 'sim-deep', text: 'x'.repeat(3000) });
    assert.equal((await big.closed).code, 1009);
    await assertAuditHolds(stack);
  });

  test('sockets per key: beyond the limit the upgrade is a 429; a closed socket frees its place', async () => {
    const { key } = await newCustomer(stack, 10);
    const one = await connect(wsUrl(stack), key);
    const two = await connect(wsUrl(stack), key);
    const third = await refusedUpgrade(wsUrl(stack), { authorization: `Bearer ${key}` });
    assert.deepEqual([third.status, third.body.error.code], [429, 'too_many_sockets']);
    // Another key is not counted with this one.
    const other = await newCustomer(stack, 1);
    const elsewhere = await connect(wsUrl(stack), other.key);
    one.close();
    await one.closed;
    const again = await connect(wsUrl(stack), key);
    for (const c of [two, elsewhere, again]) c.close();
  });

  test('idle: a socket with nothing from its client and nothing to it is closed with 4000, its context settled', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'i', voice: 'sim-deep', text: 'Waiting for more', continue: true });
    const started = Date.now();
    const closed = await c.closed;
    assert.equal(closed.code, 4000);
    assert.ok(Date.now() - started >= 500, 'not before the idle time');
    const until = Date.now() + 5_000;
    while ((await speechRows(stack, workspaceId))[0]?.status !== 'delivered') {
      assert.ok(Date.now() < until, 'settled');
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal((await speechRows(stack, workspaceId))[0]!.characters, 16);
    assert.equal(await heldMicro(stack, workspaceId), 0);
    await assertAuditHolds(stack);
  });
});
