// Speech over a WebSocket spoken by Cartesia's WebSocket of contexts (its fake, per Cartesia's docs): one
// provider connection per speech socket, opened ahead with the socket (its failure or idle close said to no
// one, met afresh by the next context), each context one Cartesia context, texts sent with `continue` its
// inputs; audio and word timestamps relayed as they come. The money: what is charged is what the provider
// spoke, once per context, whether the utterance ends, is cancelled, is dropped with its socket, or is broken
// off; a refusal or an unreachable provider charges nothing and leaves nothing held. The ledger audit after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type net from 'node:net';
import { assertAuditHolds, balanceMicro, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { fakeSpeechPcm } from '../fakes/elevenlabs-fake.js';
import { startCartesiaFake, type CartesiaFake } from '../fakes/cartesia-fake.js';
import { AUDIO_CHARS_PER_CHUNK, type CartesiaWsConnection } from '../fakes/cartesia-websocket-fake.js';
import { CARTESIA_PRESET_VOICES, CARTESIA_SAMPLE_RATE_HZ } from '../../src/providers/voice/cartesia.js';
import { assertNoError, connect, errorOf, heldMicro, speechRows, wsUrl, type SpeechClient } from './speech-ws-setup.js';

let stack: Stack;
let fake: CartesiaFake;
/** The stack's log lines, warnings and errors. */
const logs: { level: number; msg: string; [k: string]: unknown }[] = [];
const VOICE = CARTESIA_PRESET_VOICES[0];
const OTHER = CARTESIA_PRESET_VOICES[1];
before(async () => {
  fake = await startCartesiaFake();
  stack = await startStack({
    env: { VOICE_PROVIDERS: 'cartesia', CARTESIA_API_KEY: fake.apiKey, CARTESIA_BASE_URL: fake.url, LOG_LEVEL: 'warn' },
    logStream: { write: (line: string) => void logs.push(JSON.parse(line)) },
  });
});
after(async () => {
  await stack.stop();
  await fake.close();
});

// sonic-3: 0.12 EUR per 1000 characters.
const cost = (characters: number) => Math.ceil((characters * 120_000) / 1000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The fake's PCM of a text, chunk by chunk as the fake sends it. */
const spokenPcm = (voice: string, generations: string[]) =>
  Buffer.concat(
    generations.flatMap((g) => {
      const chars = [...g];
      const out: Buffer[] = [];
      for (let i = 0; i < chars.length; i += AUDIO_CHARS_PER_CHUNK) {
        out.push(fakeSpeechPcm(voice, chars.slice(i, i + AUDIO_CHARS_PER_CHUNK).join(''), CARTESIA_SAMPLE_RATE_HZ));
      }
      return out;
    }),
  );

/** Resolves once `ok` holds; fails naming `what` after `ms`. */
async function until(ok: () => boolean, what: string, ms = 10_000): Promise<void> {
  for (const t0 = performance.now(); !ok(); await sleep(10)) {
    if (performance.now() - t0 > ms) assert.fail(`timed out waiting for ${what}`);
  }
}

/** The operator's alerts logged since log line `from`: Cartesia refused the service's account. */
const operatorAlerts = (from: number) => logs.slice(from).filter((l) => l.level >= 50 && /an operator must act/.test(l.msg));

/** A context of one text: spoken whole, without an error, all its characters charged. */
async function speakWhole(c: SpeechClient, context_id: string, text: string): Promise<void> {
  c.send({ context_id, voice: VOICE, text });
  const done = await c.done(context_id);
  assertNoError(c);
  assert.deepEqual(c.audio(context_id), spokenPcm(VOICE, [text]));
  assert.equal(done['characters'], [...text].length);
}

/** Provider connections opened from `from` on. */
const connectionsSince = (from: number): CartesiaWsConnection[] => fake.ws.connections.slice(from);

/** Every word timed for a context, in order, and each within the audio relayed and after the one before. */
function assertWordsTimed(c: SpeechClient, context_id: string, text: string): void {
  const timed = c.messages.filter((m) => m.type === 'word_timestamps' && m.context_id === context_id);
  assert.deepEqual(
    timed.flatMap((m) => m['words'] as string[]),
    text.split(/\s+/).filter(Boolean),
  );
  const starts = timed.flatMap((m) => m['start_s'] as number[]);
  const ends = timed.flatMap((m) => m['end_s'] as number[]);
  const duration_s = c.audio(context_id).length / 2 / CARTESIA_SAMPLE_RATE_HZ;
  starts.forEach((s, i) => {
    assert.ok(s < ends[i]! && ends[i]! <= duration_s + 1e-6, `word ${i} within the audio`);
    if (i > 0) assert.ok(s >= ends[i - 1]! - 1e-6, 'in order');
  });
}

describe("Cartesia's WebSocket of contexts", () => {
  test("the provider connection is opened ahead, as the socket opens: the first context is spoken over it, without a handshake of its own, its first audio after Cartesia's time alone", async (t) => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const from = fake.ws.connections.length;
    const handshakes = fake.ws.handshakes;
    const firstAudioDelayMs = fake.ws.firstAudioDelayMs;
    // A handshake as slow as one over the internet can be, far slower than Cartesia's first audio.
    fake.ws.handshakeDelayMs = 1_500;
    fake.ws.firstAudioDelayMs = 50;
    try {
      const c = await connect(wsUrl(stack), key);
      // Before the client sent anything: the connection is open, with our key and version.
      await until(() => connectionsSince(from).length === 1, 'the provider connection opened ahead');
      const conn = connectionsSince(from)[0]!;
      assert.equal(conn.headers.authorization, `Bearer ${fake.apiKey}`);
      assert.equal(conn.headers['cartesia-version'], '2026-03-01');
      assert.deepEqual(conn.messages, []);
      assert.equal(fake.ws.handshakes, handshakes + 1);
      assert.deepEqual(c.messages, []);
      const text = 'Spoken at once, the connection waiting.';
      const sent_ms = performance.now();
      const spoken = speakWhole(c, 'first', text);
      await c.next((m) => m.type === 'audio' && m.context_id === 'first');
      const first_audio_ms = performance.now() - sent_ms;
      await spoken;
      t.diagnostic(`first audio ${Math.round(first_audio_ms)} ms after the text (Cartesia's own 50 ms; a handshake 1500 ms)`);
      assert.ok(
        first_audio_ms >= 50 && first_audio_ms < 1_500,
        `first audio after ${Math.round(first_audio_ms)} ms: no handshake waited for`,
      );
      assert.equal(fake.ws.handshakes, handshakes + 1, 'no handshake for the first context');
      assert.equal(connectionsSince(from).length, 1);
      assert.equal(conn.contexts.size, 1);
      assert.deepEqual(
        (await speechRows(stack, workspaceId)).map((r) => [r.status, r.charges, r.charged_micro_eur]),
        [['delivered', 1, cost([...text].length)]],
      );
      c.close();
      await until(() => conn.closed, 'the provider connection closed with the socket');
    } finally {
      fake.ws.handshakeDelayMs = 0;
      fake.ws.firstAudioDelayMs = firstAudioDelayMs;
    }
    await assertAuditHolds(stack);
  });

  test('a socket that never speaks: its provider connection, opened ahead and never used, closes with it', async () => {
    const { key } = await newCustomer(stack, 10);
    const from = fake.ws.connections.length;
    const c = await connect(wsUrl(stack), key);
    await until(() => connectionsSince(from).length === 1, 'the provider connection opened ahead');
    const conn = connectionsSince(from)[0]!;
    c.close();
    await c.closed;
    await until(() => conn.closed, 'the unused provider connection closed with the socket');
    assert.equal(conn.contexts.size, 0);
  });

  test('the connection opened ahead, closed by Cartesia while idle: replaced at the next context, nothing said or logged of it', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const from = fake.ws.connections.length;
    const logsFrom = logs.length;
    const idleTimeoutMs = fake.ws.idleTimeoutMs;
    fake.ws.idleTimeoutMs = 300;
    try {
      const c = await connect(wsUrl(stack), key);
      await until(() => connectionsSince(from)[0]?.closed === true, 'Cartesia closing the idle connection');
      fake.ws.idleTimeoutMs = idleTimeoutMs;
      assert.deepEqual(c.messages, []);
      await speakWhole(c, 'later', 'After a quiet while.');
      const conns = connectionsSince(from);
      assert.equal(conns.length, 2, 'a new connection for the context');
      assert.deepEqual(
        conns.map((x) => x.contexts.size),
        [0, 1],
      );
      assert.deepEqual(
        (await speechRows(stack, workspaceId)).map((r) => [r.status, r.charges]),
        [['delivered', 1]],
      );
      assert.deepEqual(logs.slice(logsFrom), [], 'no warning or error logged');
      c.close();
    } finally {
      fake.ws.idleTimeoutMs = idleTimeoutMs;
    }
    await assertAuditHolds(stack);
  });

  test("a context that comes while Cartesia's close of the idle connection is under way: spoken over a new connection, not failed with the closing one", async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const from = fake.ws.connections.length;
    const saved = { idleTimeoutMs: fake.ws.idleTimeoutMs, idleCloseLingerMs: fake.ws.idleCloseLingerMs };
    fake.ws.idleTimeoutMs = 300;
    fake.ws.idleCloseLingerMs = 4_000;
    try {
      const c = await connect(wsUrl(stack), key);
      await until(() => connectionsSince(from)[0]?.idle_closed === true, 'Cartesia closing the idle connection');
      fake.ws.idleTimeoutMs = saved.idleTimeoutMs;
      const closing = connectionsSince(from)[0]!;
      const started_ms = performance.now();
      await speakWhole(c, 'meanwhile', 'Spoken while the old one closes.');
      assert.ok(performance.now() - started_ms < 4_000, 'not held back until the old connection closed');
      assert.equal(closing.closed, false, 'the old connection still closing');
      assert.deepEqual(
        connectionsSince(from).map((x) => x.contexts.size),
        [0, 1],
      );
      assert.deepEqual(
        (await speechRows(stack, workspaceId)).map((r) => [r.status, r.charges]),
        [['delivered', 1]],
      );
      c.close();
      await until(() => closing.closed, 'the old connection closed', 15_000);
    } finally {
      Object.assign(fake.ws, saved);
    }
    await assertAuditHolds(stack);
  });

  test('several contexts on one socket: one provider connection, one Cartesia context each, audio and words relayed, each charged once for what was spoken', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const before = await balanceMicro(stack, workspaceId);
    const from = fake.ws.connections.length;
    const c = await connect(wsUrl(stack), key);
    const texts = {
      a: 'Hello there, first speaker.',
      b: 'A second voice at the same time.',
      c: 'And a third, a little longer than the others.',
    };
    c.send({ context_id: 'a', voice: VOICE, text: texts.a });
    c.send({ context_id: 'b', voice: OTHER, text: texts.b });
    c.send({ context_id: 'c', voice: VOICE, model: 'sonic-3.5', text: texts.c });
    const done = await Promise.all(['a', 'b', 'c'].map((id) => c.done(id)));
    assertNoError(c);
    const conns = connectionsSince(from);
    assert.equal(conns.length, 1, 'one provider connection for the socket');
    const conn = conns[0]!;
    // The handshake as Cartesia documents it for servers.
    assert.equal(conn.headers.authorization, `Bearer ${fake.apiKey}`);
    assert.equal(conn.headers['cartesia-version'], '2026-03-01');
    assert.equal(conn.contexts.size, 3);
    // Each text one input, the fields as documented, our context ids not passed on.
    assert.equal(conn.messages.length, 3);
    for (const m of conn.messages) {
      assert.deepEqual(m['output_format'], { container: 'raw', encoding: 'pcm_s16le', sample_rate: CARTESIA_SAMPLE_RATE_HZ });
      assert.equal(m['add_timestamps'], true);
      assert.equal(m['language'], 'en');
      assert.equal(m['continue'], false);
      assert.ok(!['a', 'b', 'c'].includes(m['context_id'] as string));
    }
    assert.deepEqual(conn.messages.map((m) => [m['model_id'], (m['voice'] as { id: string }).id, m['transcript']]).sort(), [
      ['sonic-3', VOICE, texts.a],
      ['sonic-3', OTHER, texts.b],
      ['sonic-3.5', VOICE, texts.c],
    ]);
    // The provider's audio, the words' timings.
    assert.deepEqual(c.audio('a'), spokenPcm(VOICE, [texts.a]));
    assert.deepEqual(c.audio('b'), spokenPcm(OTHER, [texts.b]));
    for (const [id, t] of Object.entries(texts)) assertWordsTimed(c, id, t);
    // The characters charged are the characters the provider spoke; one charge per context.
    const charged = done.reduce((n, d) => n + (d['characters'] as number), 0);
    assert.equal(
      charged,
      [...conn.contexts.values()].reduce((n, x) => n + x.characters_spoken, 0),
    );
    const rows = await speechRows(stack, workspaceId);
    assert.equal(rows.length, 3);
    assert.ok(rows.every((r) => r.status === 'delivered' && r.charges === 1));
    // Each settled with the bytes of audio relayed (the provider's base64 passed on, its length counted).
    const relayed = ['a', 'b', 'c'].map((id) => c.audio(id).length).sort((x, y) => x - y);
    assert.deepEqual(
      rows.map((r) => Number(r.audio_bytes)).sort((x, y) => x - y),
      relayed,
    );
    const price = { a: 120_000, b: 120_000, c: 150_000 };
    const expected = Object.entries(texts).reduce(
      (n, [id, t]) => n + Math.ceil(([...t].length * price[id as keyof typeof price]) / 1000),
      0,
    );
    assert.equal(await balanceMicro(stack, workspaceId), before - expected);
    // The provider connection closes with the socket.
    c.close();
    await c.closed;
    for (let i = 0; i < 100 && !conn.closed; i++) await sleep(20);
    assert.equal(conn.closed, true);
    await assertAuditHolds(stack);
  });

  test('texts sent with continue are one Cartesia context, its inputs with continue and flush, spoken as one and charged once', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const from = fake.ws.connections.length;
    const c = await connect(wsUrl(stack), key);
    const parts = ['Hello from a streamed ', 'utterance whose text ', 'arrives in pieces.'];
    c.send({ context_id: 'u', voice: VOICE, text: parts[0], continue: true });
    c.send({ context_id: 'u', text: parts[1], continue: true, flush: true });
    c.send({ context_id: 'u', text: parts[2] });
    const done = await c.done('u');
    assertNoError(c);
    const text = parts.join('');
    const n = [...text].length;
    assert.equal(done['characters'], n);
    const [conn] = connectionsSince(from);
    assert.equal(conn!.contexts.size, 1, 'one Cartesia context');
    const ctx = [...conn!.contexts.values()][0]!;
    assert.equal(ctx.transcript, text);
    assert.deepEqual(
      conn!.messages.map((m) => [m['transcript'], m['continue'], m['flush'] ?? false]),
      [
        [parts[0], true, false],
        [parts[1], true, true],
        [parts[2], false, false],
      ],
    );
    // Cartesia spoke the first two texts at the flush, the third at the end: the audio in that order.
    assert.deepEqual(c.audio('u'), spokenPcm(VOICE, [parts[0]! + parts[1]!, parts[2]!]));
    assertWordsTimed(c, 'u', text);
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.status, r.characters, r.charges, r.charged_micro_eur]),
      [['delivered', ctx.characters_spoken, 1, cost(n)]],
    );
    c.close();
    await assertAuditHolds(stack);
  });

  test('a pause past the context expiry: the rest goes to a fresh Cartesia context, relayed after, still one utterance and one charge', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const from = fake.ws.connections.length;
    const c = await connect(wsUrl(stack), key);
    const parts = ['A first sentence, spoken at once. ', 'And a second after a long pause.'];
    c.send({ context_id: 'p', voice: VOICE, text: parts[0], continue: true });
    await c.next((m) => m.type === 'word_timestamps' && m.context_id === 'p' && (m['words'] as string[]).includes('once.'));
    await sleep(1_300);
    c.send({ context_id: 'p', text: parts[1] });
    const done = await c.done('p');
    assertNoError(c);
    const [conn] = connectionsSince(from);
    assert.equal(conn!.contexts.size, 2, 'a fresh context after the expiry');
    const [first, second] = [...conn!.contexts.values()];
    assert.equal(first!.transcript, parts[0]);
    assert.equal(second!.transcript, parts[1]);
    assert.equal(done['characters'], [...parts.join('')].length);
    assert.deepEqual(c.audio('p'), spokenPcm(VOICE, parts));
    assertWordsTimed(c, 'p', parts.join(''));
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.characters, r.charges]),
      [[first!.characters_spoken + second!.characters_spoken, 1]],
    );
    c.close();
    await assertAuditHolds(stack);
  });

  test('cancel: Cartesia is told to cancel the context; what it had spoken (through its last timed word) is charged, the rest released', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    fake.ws.chunkIntervalMs = 20;
    const from = fake.ws.connections.length;
    try {
      const c = await connect(wsUrl(stack), key);
      c.send({ context_id: 'z', voice: VOICE, text: 'word '.repeat(300), flush: true, continue: true });
      await c.next((m) => m.type === 'word_timestamps' && m.context_id === 'z');
      c.send({ context_id: 'z', cancel: true });
      const done = await c.done('z');
      assert.equal(done['cancelled'], true);
      const [conn] = connectionsSince(from);
      const ctx = [...conn!.contexts.values()][0]!;
      assert.ok(
        conn!.messages.some((m) => m['cancel'] === true && m['context_id'] === ctx.id),
        'cancel sent for the context',
      );
      assert.ok(done['characters'] > 0 && done['characters'] < 1500, `charged ${done['characters']}`);
      assert.ok(done['characters'] <= ctx.characters_spoken, 'never more than the provider spoke');
      const rows = await speechRows(stack, workspaceId);
      assert.deepEqual(
        rows.map((r) => [r.characters, r.charges, r.charged_micro_eur]),
        [[done['characters'], 1, cost(done['characters'])]],
      );
      assert.equal(await heldMicro(stack, workspaceId), 0);
      // The socket goes on: another context on the same provider connection.
      c.send({ context_id: 'y', voice: VOICE, text: 'Still here.' });
      assert.equal((await c.done('y'))['characters'], 11);
      assert.equal(connectionsSince(from).length, 1);
      c.close();
    } finally {
      fake.ws.chunkIntervalMs = 2;
    }
    await assertAuditHolds(stack);
  });

  test('the socket dropped mid-utterance: the Cartesia connection is closed, what was spoken is charged, the rest released', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    fake.ws.chunkIntervalMs = 20;
    const from = fake.ws.connections.length;
    try {
      const c = await connect(wsUrl(stack), key);
      c.send({ context_id: 'd', voice: VOICE, text: 'word '.repeat(300), continue: true, flush: true });
      await c.next((m) => m.type === 'word_timestamps' && m.context_id === 'd');
      c.ws.terminate();
      const [conn] = connectionsSince(from);
      let rows = await speechRows(stack, workspaceId);
      for (let i = 0; i < 100 && (rows[0]?.status === 'held' || !conn!.closed); i++) {
        await sleep(50);
        rows = await speechRows(stack, workspaceId);
      }
      const ctx = [...conn!.contexts.values()][0]!;
      assert.equal(conn!.closed, true, 'the provider connection closed');
      assert.equal(rows.length, 1);
      const r = rows[0]!;
      assert.equal(r.status, 'delivered');
      assert.ok(r.characters > 0 && r.characters < 1500, `charged ${r.characters}`);
      assert.ok(r.characters <= ctx.characters_spoken);
      assert.deepEqual([r.charges, r.charged_micro_eur], [1, cost(r.characters)]);
      assert.equal(await heldMicro(stack, workspaceId), 0);
    } finally {
      fake.ws.chunkIntervalMs = 2;
    }
    await assertAuditHolds(stack);
  });

  test('broken off by Cartesia: an error on the socket, what it had spoken charged, the next context on a new provider connection', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    fake.ws.cutAfterChunks = 3;
    const from = fake.ws.connections.length;
    const c = await connect(wsUrl(stack), key);
    const text = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen.';
    c.send({ context_id: 'cut', voice: VOICE, text });
    await errorOf(c, 'cut', 'provider_unavailable');
    const done = await c.done('cut');
    const [conn] = connectionsSince(from);
    const ctx = [...conn!.contexts.values()][0]!;
    assert.equal(ctx.characters_spoken, 3 * AUDIO_CHARS_PER_CHUNK);
    assert.ok(done['characters'] > 0 && done['characters'] <= ctx.characters_spoken, `charged ${done['characters']}`);
    c.send({ context_id: 'again', voice: VOICE, text: 'Once more.' });
    assert.equal((await c.done('again'))['characters'], 10);
    assert.equal(connectionsSince(from).length, 2, 'a new provider connection after the broken one');
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.status, r.characters, r.charges]),
      [
        ['delivered', done['characters'], 1],
        ['delivered', 10, 1],
      ],
    );
    assert.equal(await heldMicro(stack, workspaceId), 0);
    c.close();
    await assertAuditHolds(stack);
  });

  test("refusals: Cartesia's 4xx for a context is a clear error on our socket (nothing charged); its refusal of our key is an operator's problem", async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const before = await balanceMicro(stack, workspaceId);
    const c = await connect(wsUrl(stack), key);
    // A voice Cartesia no longer has: its 404 error message for the context.
    fake.ws.errorNext = { status_code: 404, error_code: 'voice_not_found', message: `Voice ${VOICE} not found.` };
    c.send({ context_id: 'gone', voice: VOICE, text: 'Nobody speaks this.' });
    const refused = await errorOf(c, 'gone', 'provider_rejected');
    assert.equal(refused['message'], `Voice ${VOICE} not found.`);
    assert.equal((await c.done('gone'))['characters'], 0);
    // The same socket's next context is spoken (the connection is still good).
    c.send({ context_id: 'fine', voice: VOICE, text: 'This one is.' });
    assert.equal((await c.done('fine'))['characters'], 12);
    c.close();
    // Our key refused at every handshake (a new socket): its connection opened ahead is refused unsaid, and
    // its first context meets the refusal: 503, the operator alerted (once, for the context).
    const logsFrom = logs.length;
    const handshakes = fake.ws.handshakes;
    fake.ws.refusing = { status: 401, error_code: 'unauthorized', message: 'Invalid API key.' };
    try {
      const c2 = await connect(wsUrl(stack), key);
      await until(() => fake.ws.handshakes > handshakes, 'the handshake of the connection opened ahead');
      await sleep(200);
      assert.deepEqual(c2.messages, [], 'nothing said to the client of the refused connection opened ahead');
      assert.deepEqual(operatorAlerts(logsFrom), [], 'no alert before a context met the refusal');
      c2.send({ context_id: 'k', voice: VOICE, text: 'Refused.' });
      const e = await errorOf(c2, 'k', 'provider_unavailable');
      assert.doesNotMatch(e['message'], new RegExp(fake.apiKey));
      assert.equal((await c2.done('k'))['characters'], 0);
      const alerts = operatorAlerts(logsFrom);
      assert.equal(alerts.length, 1, 'the operator alerted once');
      assert.equal(alerts[0]!['provider_problem'], 'credentials');
      assert.doesNotMatch(JSON.stringify(alerts[0]), new RegExp(fake.apiKey));
      // A bad request at the handshake (the version, say): a 400 with Cartesia's message.
      fake.ws.refusing = { status: 400, error_code: 'invalid_request', message: 'The Cartesia-Version header is not a version.' };
      c2.send({ context_id: 'v', voice: VOICE, text: 'Refused too.' });
      assert.equal((await errorOf(c2, 'v', 'provider_rejected'))['message'], 'The Cartesia-Version header is not a version.');
      await c2.done('v');
      c2.close();
    } finally {
      fake.ws.refusing = null;
    }
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.status, r.charges, r.charged_micro_eur]).sort(),
      [
        ['delivered', 1, cost(12)],
        ['released', 0, 0],
        ['released', 0, 0],
        ['released', 0, 0],
      ].sort(),
    );
    assert.equal(await heldMicro(stack, workspaceId), 0);
    assert.equal(await balanceMicro(stack, workspaceId), before - cost(12));
    await assertAuditHolds(stack);
  });

  test('Cartesia unreachable: nothing said as the socket opens, a 503 error for the first context, nothing charged, nothing held; reachable again, the next context is spoken', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const handshakes = fake.ws.handshakes;
    fake.ws.unreachable = true;
    try {
      const c = await connect(wsUrl(stack), key);
      await until(() => fake.ws.handshakes > handshakes, 'the handshake of the connection opened ahead');
      await sleep(200);
      assert.deepEqual(c.messages, [], 'nothing said to the client of the connection that failed ahead');
      c.send({ context_id: 'r', voice: VOICE, text: 'Into the void.' });
      const e = await errorOf(c, 'r', 'provider_unavailable');
      assert.match(e['message'], /could not be reached/);
      assert.equal((await c.done('r'))['characters'], 0);
      let rows = await speechRows(stack, workspaceId);
      assert.deepEqual(
        rows.map((r) => [r.status, r.charges, r.charged_micro_eur]),
        [['released', 0, 0]],
      );
      assert.equal(await heldMicro(stack, workspaceId), 0);
      // Back: the socket's next context opens a new connection and is spoken.
      fake.ws.unreachable = false;
      const from = fake.ws.connections.length;
      c.send({ context_id: 's', voice: VOICE, text: 'Back again.' });
      assert.equal((await c.done('s'))['characters'], 11);
      assert.equal(connectionsSince(from).length, 1);
      rows = await speechRows(stack, workspaceId);
      assert.deepEqual(
        rows.map((r) => [r.status, r.charges, r.charged_micro_eur]),
        [
          ['released', 0, 0],
          ['delivered', 1, cost(11)],
        ],
      );
      c.close();
    } finally {
      fake.ws.unreachable = false;
    }
    await assertAuditHolds(stack);
  });

  test('a client that does not read: the Cartesia connection is no longer read, then read again; every chunk relayed once, charged once', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const from = fake.ws.connections.length;
    const c = await connect(wsUrl(stack), key);
    const socket = (c.ws as unknown as { _socket: net.Socket })._socket;
    socket.pause();
    // 10,000 characters: 500 chunks of about 64 KB of JSON each, far more than the sockets' buffers hold.
    const text = 'word '.repeat(1000);
    c.send({ context_id: 'slow', voice: VOICE, text, continue: true });
    c.send({ context_id: 'slow', text });
    let conn: CartesiaWsConnection | undefined;
    for (let i = 0; i < 300 && [...(conn?.contexts.values() ?? [])][0]?.characters_spoken !== 10_000; i++) {
      await sleep(20);
      conn = connectionsSince(from)[0];
    }
    await sleep(300);
    // Cartesia has spoken it all, but the service stopped reading it: it waits at Cartesia's end.
    assert.ok(conn!.buffered_bytes() > 1_000_000, `${conn!.buffered_bytes()} bytes not taken`);
    assert.equal((await speechRows(stack, workspaceId))[0]!.status, 'held');
    socket.resume();
    const done = await c.done('slow', 60_000);
    assert.equal(done['characters'], 10_000);
    assert.deepEqual(c.audio('slow'), spokenPcm(VOICE, [text + text]));
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.status, r.characters, r.charges, r.charged_micro_eur]),
      [['delivered', 10_000, 1, cost(10_000)]],
    );
    c.close();
    await assertAuditHolds(stack);
  });

  test('across every test: never charged more than Cartesia spoke, never a speech charged twice', async () => {
    const r = await stack.db.query<{ characters: string; requests: number; charges: number; twice: number }>(
      `SELECT COALESCE(SUM(s.characters) FILTER (WHERE s.status = 'delivered'), 0) AS characters,
              count(*) FILTER (WHERE s.status = 'delivered')::int AS requests,
              (SELECT count(*) FROM ledger_entries l JOIN speech_requests x ON x.id = l.speech_request_id WHERE x.backend = 'cartesia')::int AS charges,
              (SELECT count(*) FROM (SELECT l.speech_request_id FROM ledger_entries l WHERE l.speech_request_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1) t)::int AS twice
         FROM speech_requests s WHERE s.backend = 'cartesia'`,
    );
    const row = r.rows[0]!;
    const spoken = fake.ws.charactersSpoken();
    assert.ok(Number(row.characters) > 0 && Number(row.characters) <= spoken, `charged ${row.characters}, spoken ${spoken}`);
    assert.equal(row.charges, row.requests, 'one charge per delivered speech');
    assert.equal(row.twice, 0);
  });
});
