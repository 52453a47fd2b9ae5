// Speech over a WebSocket with the simulated provider: several contexts on one socket, texts sent with
// `continue` spoken as one utterance and charged once, cancel and a dropped socket charging what was
// spoken and releasing the rest, and the browsers' tokens. The ledger audit (and the usage rollups'
// agreement with it) after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http_ from 'node:http';
import net from 'node:net';
import { pino } from 'pino';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, ADMIN_TOKEN, type Stack } from '../helpers/stack.js';
import { SIM_SAMPLE_RATE_HZ, synthesizeTones } from '../../src/providers/voice/simulator.js';
import { SpeechTokens } from '../../src/voices/speech-tokens.js';
import { SpeechSocketServer } from '../../src/voices/speech-socket.js';
import type { SpeechService } from '../../src/voices/speech.js';
import { assertNoError, connect, errorOf, heldMicro, refusedUpgrade, speechRows, wsUrl } from './speech-ws-setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

// sim-speech-1: 0.15 EUR per 1000 characters.
const cost = (characters: number) => Math.ceil((characters * 150_000) / 1000);
const tones = (voice: string, text: string) => {
  const s = synthesizeTones(voice, text);
  return Buffer.from(s.buffer, s.byteOffset, s.byteLength);
};

describe('contexts', () => {
  test('several contexts speak at once on one socket, each its own audio, each charged once', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const before = await balanceMicro(stack, workspaceId);
    const c = await connect(wsUrl(stack), key);
    const texts = { a: 'Hello there, first speaker.', b: 'A second voice at the same time.', c: 'And a third.' };
    c.send({ context_id: 'a', voice: 'sim-narrator', text: texts.a });
    c.send({ context_id: 'b', voice: 'sim-deep', text: texts.b });
    c.send({ context_id: 'c', voice: 'sim-bright', model: 'sim-speech-1', text: texts.c });
    const done = await Promise.all(['a', 'b', 'c'].map((id) => c.done(id)));
    assertNoError(c);
    const opened = c.messages.filter((m) => m.type === 'context');
    assert.deepEqual(
      opened.map((m) => m['sample_rate_hz']),
      [SIM_SAMPLE_RATE_HZ, SIM_SAMPLE_RATE_HZ, SIM_SAMPLE_RATE_HZ],
    );
    assert.deepEqual(c.audio('a'), tones('sim-narrator', texts.a));
    assert.deepEqual(c.audio('b'), tones('sim-deep', texts.b));
    assert.deepEqual(c.audio('c'), tones('sim-bright', texts.c));
    for (const [i, id] of (['a', 'b', 'c'] as const).entries()) {
      const n = [...texts[id]].length;
      assert.equal(done[i]!['characters'], n);
      assert.equal(done[i]!['cost_in_euro'], cost(n) / 1e6);
      assert.equal(done[i]!['cancelled'], undefined);
    }
    const rows = await speechRows(stack, workspaceId);
    assert.equal(rows.length, 3);
    for (const r of rows) {
      assert.equal(r.status, 'delivered');
      assert.equal(r.charges, 1);
      assert.equal(r.charged_micro_eur, cost(r.characters));
    }
    const total = cost([...texts.a].length) + cost([...texts.b].length) + cost([...texts.c].length);
    assert.equal(await balanceMicro(stack, workspaceId), before - total);
    assert.equal(await heldMicro(stack, workspaceId), 0);
    c.close();
    await assertAuditHolds(stack);
  });

  test('texts sent with continue are one utterance: one request, one charge for all their characters', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    const parts = ['The quick brown fox ', 'jumps over ', 'the lazy dog.'];
    c.send({ context_id: 'u', voice: 'sim-deep', text: parts[0], continue: true });
    c.send({ context_id: 'u', text: parts[1], continue: true, flush: true });
    c.send({ context_id: 'u', voice: 'sim-deep', text: parts[2] });
    const done = await c.done('u');
    assertNoError(c);
    const n = [...parts.join('')].length;
    assert.equal(done['characters'], n);
    assert.equal(c.messages.filter((m) => m.type === 'context').length, 1);
    assert.deepEqual(c.audio('u'), tones('sim-deep', parts.join('')));
    // The words' timings, counted from the start of the utterance's audio (1,102 samples a character).
    const timed = c.messages.filter((m) => m.type === 'word_timestamps' && m.context_id === 'u');
    assert.deepEqual(
      timed.flatMap((m) => m['words']),
      ['The', 'quick', 'brown', 'fox', 'jumps', 'over', 'the', 'lazy', 'dog.'],
    );
    const starts = timed.flatMap((m) => m['start_s'] as number[]);
    [0, 4, 10, 16, 20, 26, 31, 35, 40].forEach((chars, i) =>
      assert.ok(Math.abs(starts[i]! - (chars * 1102) / 22_050) < 0.002, `word ${i} starts at ${starts[i]}`),
    );
    const rows = await speechRows(stack, workspaceId);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.characters, n);
    assert.equal(rows[0]!.charges, 1);
    assert.equal(rows[0]!.charged_micro_eur, cost(n));
    // The utterance ended: more text in it is refused; the context_id then opens a new one.
    c.send({ context_id: 'u', voice: 'sim-deep', text: 'Again.' });
    const again = await c.next((m) => m.type === 'done' && m.context_id === 'u' && m !== done);
    assert.equal(again['characters'], 6);
    assert.equal((await speechRows(stack, workspaceId)).length, 2);
    c.close();
    await assertAuditHolds(stack);
  });

  test('cancel stops the utterance: what was spoken is charged, the rest released', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const before = await balanceMicro(stack, workspaceId);
    const c = await connect(wsUrl(stack), key);
    // Each text is a synthesis of its own at the simulator: 400 characters take 20 chunks of 20 ms.
    const first = 'a'.repeat(400);
    c.send({ context_id: 'x', voice: 'sim-narrator', text: first, continue: true });
    c.send({ context_id: 'x', text: 'b'.repeat(300), continue: true });
    c.send({ context_id: 'x', text: 'c'.repeat(300), continue: true });
    await c.next((m) => m.type === 'audio' && m.context_id === 'x');
    c.send({ context_id: 'x', cancel: true });
    const done = await c.done('x');
    assert.equal(done['cancelled'], true);
    assert.equal(done['characters'], 400, 'the first text was spoken, the others not');
    assert.ok(c.audio('x').length < tones('sim-narrator', first).length + 1, 'the audio stopped with the cancel');
    const rows = await speechRows(stack, workspaceId);
    assert.equal(rows.length, 1);
    assert.deepEqual(
      [rows[0]!.status, rows[0]!.characters, rows[0]!.charges, rows[0]!.charged_micro_eur],
      ['delivered', 400, 1, cost(400)],
    );
    assert.equal(await balanceMicro(stack, workspaceId), before - cost(400));
    assert.equal(await heldMicro(stack, workspaceId), 0);
    // A cancel of nothing is an error about that context.
    c.send({ context_id: 'nothing', cancel: true });
    await errorOf(c, 'nothing', 'context_not_found');
    c.close();
    await assertAuditHolds(stack);
  });

  test('a socket that drops mid-utterance settles what was spoken and releases the rest', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'd', voice: 'sim-bright', text: 'x'.repeat(200), continue: true });
    c.send({ context_id: 'd', text: 'y'.repeat(500), continue: true });
    await c.next((m) => m.type === 'audio');
    c.ws.terminate();
    const until = Date.now() + 10_000;
    while ((await speechRows(stack, workspaceId))[0]?.status !== 'delivered') {
      assert.ok(Date.now() < until, 'settled after the drop');
      await new Promise((r) => setTimeout(r, 50));
    }
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual([rows[0]!.characters, rows[0]!.charges, rows[0]!.charged_micro_eur], [200, 1, cost(200)]);
    assert.equal(await heldMicro(stack, workspaceId), 0);
    await assertAuditHolds(stack);
  });

  test('a text the balance cannot cover is refused before the provider is asked; what was covered is spoken', async () => {
    // 0.0003 EUR: 300 micro-euros, two characters' worth at 150 each.
    const { key, workspaceId } = await newCustomer(stack, 0.0003);
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'p', voice: 'sim-deep', text: 'abc' });
    await errorOf(c, 'p', 'insufficient_credits');
    assert.equal((await speechRows(stack, workspaceId)).length, 0, 'nothing held');
    c.send({ context_id: 'q', voice: 'sim-deep', text: 'ab', continue: true });
    c.send({ context_id: 'q', text: 'c', continue: true });
    await errorOf(c, 'q', 'insufficient_credits');
    c.send({ context_id: 'q', text: '' });
    const done = await c.done('q');
    assert.equal(done['characters'], 2);
    assert.deepEqual(c.audio('q'), tones('sim-deep', 'ab'));
    assert.equal(await balanceMicro(stack, workspaceId), 0);
    c.close();
    await assertAuditHolds(stack);
  });
});

describe("a context's first hold", () => {
  const spent = async (workspaceId: string) =>
    Number((await stack.db.query('SELECT spent_micro_eur FROM api_keys WHERE workspace_id = $1', [workspaceId])).rows[0]!.spent_micro_eur);

  test("the key's spend limit and what the workspace owes refuse it whole: nothing held, nothing spent, nothing spoken", async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    await stack.db.query('UPDATE api_keys SET spend_limit_micro_eur = $2 WHERE workspace_id = $1', [workspaceId, cost(4)]);
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'over', voice: 'sim-deep', text: 'abcde' });
    await errorOf(c, 'over', 'key_spend_limit_exceeded');
    assert.deepEqual(
      [(await speechRows(stack, workspaceId)).length, await heldMicro(stack, workspaceId), await spent(workspaceId)],
      [0, 0, 0],
    );
    // Owing (a refund or dispute took more than the balance): refused before the balance or the key is looked at.
    await stack.db.query('UPDATE workspaces SET owed_micro_eur = 1 WHERE id = $1', [workspaceId]);
    c.send({ context_id: 'owes', voice: 'sim-deep', text: 'abcd' });
    await errorOf(c, 'owes', 'payment_required');
    await stack.db.query('UPDATE workspaces SET owed_micro_eur = 0 WHERE id = $1', [workspaceId]);
    assert.deepEqual(
      [(await speechRows(stack, workspaceId)).length, await heldMicro(stack, workspaceId), await spent(workspaceId)],
      [0, 0, 0],
    );
    // Within the limit: held, spoken, charged once, the key's spend moved by the charge.
    c.send({ context_id: 'within', voice: 'sim-deep', text: 'abcd' });
    assert.equal((await c.done('within'))['characters'], 4);
    assert.deepEqual(c.audio('within'), tones('sim-deep', 'abcd'));
    assert.equal(c.messages.filter((m) => m.type === 'audio' && m.context_id !== 'within').length, 0, 'the refused contexts spoke nothing');
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.characters, r.charges, r.charged_micro_eur]),
      [[4, 1, cost(4)]],
    );
    assert.equal(await spent(workspaceId), cost(4));
    c.close();
    await assertAuditHolds(stack);
  });

  test('contexts opened at once on a balance covering some: exactly those are held, the others refused, never more held than the balance', async () => {
    // Three contexts' worth of ten characters each, six asked at once: the holds queue on the workspace's lock.
    const { key, workspaceId } = await newCustomer(stack, (3 * cost(10)) / 1_000_000);
    const c = await connect(wsUrl(stack), key);
    const ids = ['h0', 'h1', 'h2', 'h3', 'h4', 'h5'];
    for (const id of ids) c.send({ context_id: id, voice: 'sim-narrator', text: 'abcdefghij' });
    const outcomes = await Promise.all(
      ids.map((id) =>
        c.next((m) => m.context_id === id && (m.type === 'done' || (m.type === 'error' && m['code'] === 'insufficient_credits'))),
      ),
    );
    assert.deepEqual(outcomes.map((m) => m.type).sort(), ['done', 'done', 'done', 'error', 'error', 'error']);
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.characters, r.charges, r.charged_micro_eur]),
      [0, 1, 2].map(() => [10, 1, cost(10)]),
    );
    assert.deepEqual([await balanceMicro(stack, workspaceId), await heldMicro(stack, workspaceId)], [0, 0]);
    c.close();
    await assertAuditHolds(stack);
  });
});

describe('backpressure', () => {
  test('a client that does not read is not buffered for: the provider is read as it catches up', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    // Stop reading: the kernel's buffers fill, then the server's (bufferedAmount) passes its 1 MiB.
    const socket = (c.ws as unknown as { _socket: net.Socket })._socket;
    socket.pause();
    // Three texts of 2,000 characters, 4.4 MB of PCM each, each its own synthesis at the simulator,
    // which, read, makes one in 2 s (and counts it spoken as it starts).
    for (const [i, ch] of ['x', 'y', 'z'].entries()) {
      c.send({ context_id: 'slow', ...(i === 0 ? { voice: 'sim-deep' } : {}), text: ch.repeat(2000), continue: i < 2 });
    }
    await new Promise((r) => setTimeout(r, 6_000));
    // The provider was not read past what the client could take: the second synthesis never started.
    const row = (await speechRows(stack, workspaceId))[0]!;
    assert.equal(row.status, 'held');
    assert.equal(Number(row.spoken_characters), 2000);
    socket.resume();
    const done = await c.done('slow', 60_000);
    assert.equal(done['characters'], 6000);
    assert.equal(c.audio('slow').length, 6000 * 1102 * 2);
    c.close();
    await assertAuditHolds(stack);
  });
});

describe('authentication', () => {
  test('a token from POST /v2/audio/speech/tokens opens the socket as its key, until its key is revoked', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const t = await http(stack.baseUrl, 'POST', '/v2/audio/speech/tokens', { token: key });
    assert.equal(t.status, 201, JSON.stringify(t.body));
    assert.equal(t.body.object, 'speech.token');
    assert.equal(t.body.url_path, '/v2/audio/speech/stream');
    const now_s = Date.now() / 1000;
    assert.ok(t.body.expires_at > now_s + 30 && t.body.expires_at <= now_s + 61, 'about a minute by default');
    const c = await connect(wsUrl(stack, `?token=${encodeURIComponent(t.body.token)}`));
    c.send({ context_id: 't', voice: 'sim-deep', text: 'By token.' });
    await c.done('t');
    assert.equal((await speechRows(stack, workspaceId)).length, 1, "charged to the token's workspace");
    c.close();
    // Revoked: its tokens open nothing more.
    const keys = await stack.db.query<{ id: string }>('SELECT id FROM api_keys WHERE workspace_id = $1', [workspaceId]);
    const revoked = await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${keys.rows[0]!.id}`, { token: ADMIN_TOKEN });
    assert.ok(revoked.status < 300, JSON.stringify(revoked.body));
    const refused = await refusedUpgrade(wsUrl(stack, `?token=${encodeURIComponent(t.body.token)}`));
    assert.equal(refused.status, 401);
    assert.equal(refused.body.error.code, 'invalid_token');
    await assertAuditHolds(stack);
  });

  test('refused at the upgrade: no key, a wrong key, a forged, tampered or expired token, another path', async () => {
    const { key } = await newCustomer(stack, 1);
    const none = await refusedUpgrade(wsUrl(stack));
    assert.deepEqual([none.status, none.body.error.code], [401, 'invalid_api_key']);
    const wrong = await refusedUpgrade(wsUrl(stack), { authorization: 'Bearer vva_sk_nope' });
    assert.deepEqual([wrong.status, wrong.body.error.code], [401, 'invalid_api_key']);
    const t = await http(stack.baseUrl, 'POST', '/v2/audio/speech/tokens', { token: key });
    const token: string = t.body.token;
    const tampered = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
    for (const bad of [tampered, 'vva_st_x.y', 'x'.repeat(500)]) {
      const r = await refusedUpgrade(wsUrl(stack, `?token=${encodeURIComponent(bad)}`));
      assert.deepEqual([r.status, r.body.error.code], [401, 'invalid_token'], bad);
    }
    // Signed with another secret: not ours.
    const other = new SpeechTokens('another-secret-0123456789abcdef0123', 60).issue({
      key_id: crypto.randomUUID(),
      workspace_id: crypto.randomUUID(),
      models: null,
    });
    assert.equal((await refusedUpgrade(wsUrl(stack, `?token=${encodeURIComponent(other.token)}`))).status, 401);
    // Expired: made two minutes ago with a minute to live.
    const tokens = new SpeechTokens(stack.config.urlSigningSecret!, 60);
    const principal = (await stack.db.query('SELECT id AS key_id, workspace_id, models FROM api_keys LIMIT 1')).rows[0];
    const old = tokens.issue(principal, Date.now() - 120_000);
    const expired = await refusedUpgrade(wsUrl(stack, `?token=${encodeURIComponent(old.token)}`));
    assert.deepEqual([expired.status, expired.body.error.message], [401, 'the token has expired']);
    assert.deepEqual(tokens.verify(tokens.issue(principal).token), { key_id: principal.key_id, workspace_id: principal.workspace_id });
    const path = await refusedUpgrade(`${stack.baseUrl.replace(/^http/, 'ws')}/v2/audio/elsewhere`, { authorization: `Bearer ${key}` });
    assert.equal(path.status, 404);
    // The token route itself needs a key.
    assert.equal((await http(stack.baseUrl, 'POST', '/v2/audio/speech/tokens', {})).status, 401);
    // A plain GET of the socket's path is told to upgrade.
    const plain = await http(stack.baseUrl, 'GET', '/v2/audio/speech/stream', { token: key });
    assert.deepEqual([plain.status, plain.body.error.code], [426, 'upgrade_required']);
  });

  test('failed authentications are limited per address: past the limit an upgrade is a 429 before any lookup, even with a good key', async () => {
    const { key } = await newCustomer(stack, 1);
    // A server of its own, with a limit of 3 a minute (the API's is AUTH_FAILURES_PER_ADDRESS_PER_MINUTE).
    // Its speech service is never reached: every upgrade here is refused before it.
    const sockets = new SpeechSocketServer({
      db: stack.db,
      speech: {} as SpeechService,
      tokens: new SpeechTokens(stack.config.urlSigningSecret!, 60),
      limits: stack.config.speechSocket,
      logger: pino({ level: 'silent' }),
      authFailuresPerMinute: 3,
    });
    const server = http_.createServer((_req, res) => res.writeHead(404).end());
    sockets.attach(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `ws://127.0.0.1:${(server.address() as net.AddressInfo).port}/v2/audio/speech/stream`;
      for (let i = 0; i < 3; i++) {
        const r = await refusedUpgrade(url, { authorization: `Bearer vva_sk_wrong${i}` });
        assert.deepEqual([r.status, r.body.error.code], [401, 'invalid_api_key']);
      }
      const limited = await refusedUpgrade(url, { authorization: `Bearer ${key}` });
      assert.deepEqual([limited.status, limited.body.error.code], [429, 'rate_limited']);
      assert.match(limited.body.error.message, /too many failed authentications from this address/);
    } finally {
      await sockets.close();
      await new Promise((r) => server.close(r));
    }
  });
});
