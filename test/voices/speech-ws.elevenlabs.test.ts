// Speech over a WebSocket spoken by ElevenLabs' stream-input WebSocket (its fake, per ElevenLabs' docs):
// the handshake and messages sent, audio and word timestamps relayed as they come, and the money: the
// characters charged are the characters the provider spoke, once per context, whether the utterance
// ends, is cancelled or is broken off by the provider. Cartesia beside it (VOICE_PROVIDERS): a context
// with a Cartesia voice is spoken by Cartesia, over its WebSocket of contexts (speech-ws.cartesia.test.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { fakeSpeechPcm, startElevenLabsFake, type ElevenLabsFake } from '../fakes/elevenlabs-fake.js';
import { AUDIO_CHARS_PER_MESSAGE } from '../fakes/elevenlabs-stream-input-fake.js';
import { startCartesiaFake, type CartesiaFake } from '../fakes/cartesia-fake.js';
import { CARTESIA_PRESET_VOICES } from '../../src/providers/voice/cartesia.js';
import { assertNoError, connect, errorOf, heldMicro, speechRows, wsUrl } from './speech-ws-setup.js';

let stack: Stack;
let fake: ElevenLabsFake;
let cartesia: CartesiaFake;
const VOICE = 'JBFqnCBsd6RMkjVDRZzb';
before(async () => {
  [fake, cartesia] = await Promise.all([startElevenLabsFake(), startCartesiaFake()]);
  stack = await startStack({
    env: {
      VOICE_PROVIDERS: 'elevenlabs,cartesia',
      ELEVENLABS_API_KEY: fake.apiKey,
      ELEVENLABS_BASE_URL: fake.url,
      CARTESIA_API_KEY: cartesia.apiKey,
      CARTESIA_BASE_URL: cartesia.url,
    },
  });
});
after(async () => {
  await stack.stop();
  await Promise.all([fake.close(), cartesia.close()]);
});

// eleven-multilingual-v2: 0.30 EUR per 1000 characters.
const cost = (characters: number) => Math.ceil((characters * 300_000) / 1000);

describe('ElevenLabs stream-input', () => {
  test('an utterance in three texts: one stream-input connection, audio and word timestamps as they come, one charge', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    const parts = ['Hello from a streamed ', 'utterance whose text ', 'arrives in pieces.'];
    c.send({ context_id: 'e', voice: VOICE, text: parts[0], continue: true });
    c.send({ context_id: 'e', text: parts[1], continue: true, flush: true });
    c.send({ context_id: 'e', text: parts[2] });
    const done = await c.done('e');
    assertNoError(c);
    const text = parts.join('');
    const n = [...text].length;
    assert.equal(done['characters'], n);
    assert.equal(c.messages.find((m) => m.type === 'context')!['sample_rate_hz'], 22_050);
    // The handshake and messages as ElevenLabs documents them.
    const conn = fake.streamInput.connections.at(-1)!;
    assert.equal(conn.voice_id, VOICE);
    assert.equal(conn.query['output_format'], 'pcm_22050');
    assert.equal(conn.query['model_id'], 'eleven_multilingual_v2');
    assert.equal(conn.headers['xi-api-key'], fake.apiKey);
    assert.deepEqual(
      conn.messages.map((m) => m['text']),
      [' ', ...parts, ''],
    );
    assert.equal(conn.messages[2]!['flush'], true);
    // The audio is the provider's, in order: the flush spoke the first two texts, the end the third.
    const expected = Buffer.concat(
      [parts[0]! + parts[1]!, parts[2]!].flatMap((g) => {
        const chars = [...g];
        const out: Buffer[] = [];
        for (let i = 0; i < chars.length; i += AUDIO_CHARS_PER_MESSAGE) {
          out.push(fakeSpeechPcm(VOICE, chars.slice(i, i + AUDIO_CHARS_PER_MESSAGE).join(''), 22_050));
        }
        return out;
      }),
    );
    assert.deepEqual(c.audio('e'), expected);
    // Every word once, in order, timed within the audio.
    const timed = c.messages.filter((m) => m.type === 'word_timestamps' && m.context_id === 'e');
    assert.ok(timed.length > 1, 'word timestamps came in several messages');
    const words = timed.flatMap((m) => m['words'] as string[]);
    assert.deepEqual(words, text.split(/\s+/).filter(Boolean));
    const starts = timed.flatMap((m) => m['start_s'] as number[]);
    const ends = timed.flatMap((m) => m['end_s'] as number[]);
    const duration_s = c.audio('e').length / 2 / 22_050;
    starts.forEach((s, i) => {
      assert.ok(s < ends[i]! && ends[i]! <= duration_s + 1e-6, `word ${i} within the audio`);
      if (i > 0) assert.ok(s >= ends[i - 1]! - 1e-6, 'in order');
    });
    // Charged once, for what the provider spoke; the audio settled with the bytes that went out.
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.characters, r.charges, r.charged_micro_eur, Number(r.audio_bytes)]),
      [[conn.characters_spoken, 1, cost(n), expected.length]],
    );
    c.close();
    await assertAuditHolds(stack);
  });

  test('audio split inside a sample by the provider: the client gets its bytes exactly, settled with their count', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    const text = 'Samples split across messages still arrive whole, byte for byte.';
    fake.streamInput.splitSamples = true;
    try {
      c.send({ context_id: 's', voice: VOICE, text });
      const done = await c.done('s');
      assertNoError(c);
      assert.equal(done['characters'], [...text].length);
    } finally {
      fake.streamInput.splitSamples = false;
    }
    // Each of the provider's messages was cut inside a sample: relayed whole samples only, nothing lost or doubled.
    const chars = [...text];
    const parts: Buffer[] = [];
    for (let i = 0; i < chars.length; i += AUDIO_CHARS_PER_MESSAGE) {
      parts.push(fakeSpeechPcm(VOICE, chars.slice(i, i + AUDIO_CHARS_PER_MESSAGE).join(''), 22_050));
    }
    const expected = Buffer.concat(parts);
    const audio = c.messages.filter((m) => m.type === 'audio' && m.context_id === 's');
    assert.ok(audio.length > parts.length, 'the split messages were relayed as they came');
    assert.ok(
      audio.every((m) => Buffer.from(m['audio'] as string, 'base64').length % 2 === 0),
      'every audio message holds whole samples',
    );
    assert.deepEqual(c.audio('s'), expected);
    const [row] = await speechRows(stack, workspaceId);
    assert.deepEqual([row!.charges, row!.charged_micro_eur, Number(row!.audio_bytes)], [1, cost(chars.length), expected.length]);
    c.close();
    await assertAuditHolds(stack);
  });

  test('characters charged equal the characters the provider spoke, context by context, each charged once', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const before = await balanceMicro(stack, workspaceId);
    const from = fake.streamInput.connections.length;
    const c = await connect(wsUrl(stack), key);
    const texts = ['One.', 'Two words.', 'And a somewhat longer third sentence to speak.', 'Four.'];
    texts.forEach((t, i) => c.send({ context_id: `k${i}`, voice: VOICE, text: t }));
    const done = await Promise.all(texts.map((_, i) => c.done(`k${i}`)));
    assertNoError(c);
    const conns = fake.streamInput.connections.slice(from);
    assert.equal(conns.length, texts.length, 'one provider connection per context');
    const spoken = conns.reduce((n, x) => n + x.characters_spoken, 0);
    const charged = done.reduce((n, d) => n + (d['characters'] as number), 0);
    assert.equal(charged, spoken);
    const rows = await speechRows(stack, workspaceId);
    assert.equal(rows.length, texts.length);
    assert.ok(rows.every((r) => r.charges === 1 && r.charged_micro_eur === cost(r.characters)));
    assert.equal(await balanceMicro(stack, workspaceId), before - rows.reduce((n, r) => n + cost(r.characters), 0));
    c.close();
    await assertAuditHolds(stack);
  });

  test('broken off by the provider: an error, then what it had spoken is charged and the rest released', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    fake.streamInput.cutAfterMessages = 2;
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'cut', voice: VOICE, text: 'x'.repeat(100), flush: true, continue: true });
    c.send({ context_id: 'cut', text: 'y'.repeat(100) });
    await errorOf(c, 'cut', 'provider_unavailable');
    const done = await c.done('cut');
    assert.equal(done['characters'], 2 * AUDIO_CHARS_PER_MESSAGE);
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual(
      rows.map((r) => [r.status, r.characters, r.charges, r.charged_micro_eur]),
      [['delivered', 40, 1, cost(40)]],
    );
    assert.equal(await heldMicro(stack, workspaceId), 0);
    c.close();
    await assertAuditHolds(stack);
  });

  test('cancel: the provider connection is closed, the characters it had spoken are charged', async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    c.send({ context_id: 'z', voice: VOICE, text: 'w'.repeat(400), flush: true, continue: true });
    await c.next((m) => m.type === 'audio' && m.context_id === 'z');
    c.send({ context_id: 'z', cancel: true });
    const done = await c.done('z');
    assert.equal(done['cancelled'], true);
    const conn = fake.streamInput.connections.at(-1)!;
    assert.ok(done['characters'] > 0 && done['characters'] < 400, `charged ${done['characters']}`);
    assert.ok(done['characters'] <= conn.characters_spoken, 'never more than the provider spoke');
    const rows = await speechRows(stack, workspaceId);
    assert.deepEqual([rows[0]!.characters, rows[0]!.charges], [done['characters'], 1]);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(conn.closed, true);
    c.close();
    await assertAuditHolds(stack);
  });

  test("a Cartesia voice and an ElevenLabs voice on one socket: each context spoken by its voice's provider", async () => {
    const { key, workspaceId } = await newCustomer(stack, 10);
    const c = await connect(wsUrl(stack), key);
    const from = cartesia.ws.connections.length;
    c.send({ context_id: 'car', voice: CARTESIA_PRESET_VOICES[0], text: 'Spoken by Cartesia, ', continue: true });
    c.send({ context_id: 'eleven', voice: VOICE, text: 'Spoken by ElevenLabs.' });
    c.send({ context_id: 'car', text: 'in two texts.' });
    const [car, eleven] = await Promise.all([c.done('car'), c.done('eleven')]);
    assertNoError(c);
    assert.equal(c.messages.find((m) => m.type === 'context' && m.context_id === 'car')!['model'], 'sonic-3');
    const conns = cartesia.ws.connections.slice(from);
    assert.equal(conns.length, 1, "one connection to Cartesia's WebSocket");
    const sent = conns[0]!.messages.map((m) => m['transcript'] as string);
    assert.deepEqual(sent, ['Spoken by Cartesia, ', 'in two texts.'], 'each text an input of one Cartesia context, in order');
    assert.deepEqual(
      conns[0]!.messages.map((m) => m['continue']),
      [true, false],
    );
    assert.equal(cartesia.requestsTo('sse').length, 0, 'no HTTP synthesis');
    assert.equal(car['characters'], [...sent.join('')].length);
    assert.equal(eleven['characters'], 21);
    const words = c.messages.filter((m) => m.type === 'word_timestamps' && m.context_id === 'car').flatMap((m) => m['words']);
    assert.deepEqual(words, ['Spoken', 'by', 'Cartesia,', 'in', 'two', 'texts.']);
    const rows = await speechRows(stack, workspaceId);
    assert.equal(rows.length, 2);
    assert.ok(rows.every((r) => r.charges === 1 && r.status === 'delivered'));
    c.close();
    await assertAuditHolds(stack);
  });
});
