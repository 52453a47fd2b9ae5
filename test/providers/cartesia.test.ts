// Cartesia: the fake checked against Cartesia's official SDK (@cartesia/cartesia-js, a devDependency, pointed at
// the fake by its baseURL): clone, TTS bytes and SSE with word timestamps, deletion and the refusals the SDK
// types as errors, which proves the fake speaks the SDK's wire format. Then the adapter against the same fake:
// what each refusal becomes (our 400, or a 503 that names CARTESIA_API_KEY to the operator and never the key).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Cartesia, { toFile, AuthenticationError, NotFoundError, RateLimitError, UnprocessableEntityError } from '@cartesia/cartesia-js';
import { fakeSpeechPcm } from '../fakes/elevenlabs-fake.js';
import { startCartesiaFake, type CartesiaFake } from '../fakes/cartesia-fake.js';
import { CartesiaError, CartesiaVoiceProvider, CARTESIA_SAMPLE_RATE_HZ } from '../../src/providers/voice/cartesia.js';
import { VoiceProviderError } from '../../src/providers/voice/types.js';
import { wavBytes } from './elevenlabs.setup.js';
import type { VoiceSample } from '../../src/providers/voice/types.js';

const wavSample = (seconds = 0.25): VoiceSample => ({
  filename: 'me.wav',
  format: 'wav',
  content_type: 'audio/wav',
  data: wavBytes(seconds),
});

const RAW = { container: 'raw', encoding: 'pcm_s16le', sample_rate: 24000 } as const;

let fake: CartesiaFake;
before(async () => {
  fake = await startCartesiaFake({ apiKey: 'sk_car_sdk_test', concurrency: 1 });
});
after(async () => {
  await fake.close();
});

describe('the fake, driven by the official SDK', () => {
  const sdk = () => new Cartesia({ apiKey: fake.apiKey, baseURL: fake.url, maxRetries: 0 });

  test('clone: the SDK sends the documented multipart form and reads the voice metadata', async () => {
    const voice = await sdk().voices.clone({ clip: await toFile(wavBytes(0.5), 'me.wav'), name: 'SDK voice', language: 'en' });
    assert.equal(voice.name, 'SDK voice');
    assert.equal(voice.language, 'en');
    assert.ok(fake.voices.has(voice.id));
    const req = fake.requestsTo('clone').at(-1)!;
    assert.equal(req.headers['authorization'], `Bearer ${fake.apiKey}`);
    assert.match(req.headers['cartesia-version']!, /^\d{4}-\d{2}-\d{2}$/);
    assert.deepEqual(
      req.files!.map((f) => f.field),
      ['clip'],
    );
    assert.deepEqual(Object.fromEntries(req.fields!), { name: 'SDK voice', language: 'en' });
  });

  test('TTS bytes: the raw PCM the fake makes, for a voice id as a string or as an object', async () => {
    const c = sdk();
    const voice = await c.voices.clone({ clip: await toFile(wavBytes(0.5), 'me.wav'), name: 'bytes', language: 'en' });
    for (const v of [voice.id, { id: voice.id }]) {
      const res = await c.tts.generate({ model_id: 'sonic-3', transcript: 'Hello world', voice: v, output_format: RAW });
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), fakeSpeechPcm(voice.id, 'Hello world', 24000));
    }
  });

  test('TTS SSE: chunk events whose audio is the PCM, timestamps events with each word once, then done', async () => {
    const c = sdk();
    const voice = await c.voices.clone({ clip: await toFile(wavBytes(0.5), 'me.wav'), name: 'sse', language: 'en' });
    const stream = await c.tts.generateSSE({
      model_id: 'sonic-3.5',
      transcript: 'one two three four five six',
      voice: { id: voice.id },
      output_format: RAW,
      add_timestamps: true,
    });
    const audio: Buffer[] = [];
    const words: string[] = [];
    const types: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'chunk') audio.push(Buffer.from(event.data, 'base64'));
      if (event.type === 'timestamps') {
        words.push(...event.word_timestamps.words);
        assert.equal(event.word_timestamps.start.length, event.word_timestamps.words.length);
      }
    }
    assert.equal(types[0], 'chunk');
    assert.equal(types.at(-1), 'done');
    assert.deepEqual(words, ['one', 'two', 'three', 'four', 'five', 'six']);
    assert.deepEqual(Buffer.concat(audio), fakeSpeechPcm(voice.id, 'one two three four five six', 24000));
  });

  test('refusals as the SDK types them: 401, 404 (unknown voice), 422 (a field missing), 429 over the concurrency', async () => {
    const wrong = new Cartesia({ apiKey: 'sk_car_wrong', baseURL: fake.url, maxRetries: 0 });
    await assert.rejects(wrong.voices.delete('x'), (e: unknown) => {
      assert.ok(e instanceof AuthenticationError);
      const body = e.error as Record<string, unknown>;
      assert.deepEqual(Object.keys(body).sort(), ['doc_url', 'error_code', 'message', 'request_id', 'title']);
      return true;
    });
    await assert.rejects(sdk().voices.delete('00000000-0000-4000-8000-000000000000'), NotFoundError);
    await assert.rejects(
      sdk().tts.generate({ model_id: 'sonic-3', transcript: 'Hi', voice: '00000000-0000-4000-8000-000000000000', output_format: RAW }),
      NotFoundError,
    );
    await assert.rejects(
      sdk().tts.generate({ model_id: 'sonic-3', transcript: 'Hi', output_format: RAW } as never),
      UnprocessableEntityError,
    );
    const voice = await sdk().voices.clone({ clip: await toFile(wavBytes(0.5), 'me.wav'), name: 'busy', language: 'en' });
    const long = sdk().tts.generateSSE({ model_id: 'sonic-3', transcript: 'a '.repeat(400), voice: voice.id, output_format: RAW });
    const first = await long; // the first request holds the only slot while it streams
    await assert.rejects(
      sdk().tts.generate({ model_id: 'sonic-3', transcript: 'Hi', voice: voice.id, output_format: RAW }),
      RateLimitError,
    );
    for await (const _ of first) void _;
  });
});

describe('the adapter against the fake', () => {
  const adapter = (apiKey = fake.apiKey, timeoutsMs = {}) => new CartesiaVoiceProvider({ apiKey, baseUrl: fake.url, timeoutsMs });

  test('clone sends the largest sample as the clip; speech at its PCM rate; delete is idempotent', async () => {
    const p = adapter();
    const { voice_id, requires_verification } = await p.cloneVoice({ name: 'adapter', samples: [wavSample(0.2), wavSample(0.6)] });
    assert.equal(requires_verification, false);
    assert.equal(fake.voices.get(voice_id)!.clip.data.length, wavSample(0.6).data.length);
    const req = fake.requestsTo('clone').at(-1)!;
    assert.equal(req.headers['cartesia-version'], '2026-03-01');
    const pcm = await p.synthesize({ model: 'sonic-3', voice_id, text: 'Hi there', format: 'pcm', speed: 3 });
    assert.deepEqual(pcm.audio, fakeSpeechPcm(voice_id, 'Hi there', CARTESIA_SAMPLE_RATE_HZ));
    assert.deepEqual((fake.requestsTo('bytes').at(-1)!.json as any).generation_config, { speed: 1.5 }, 'brought within Sonic 3’s speeds');
    await p.deleteVoice(voice_id);
    await p.deleteVoice(voice_id);
  });

  test('a refused key is the operator’s (credentials, naming CARTESIA_API_KEY, never the key); 402 the account’s credits', async () => {
    const key = 'sk_car_refused_0123';
    await assert.rejects(adapter(key).synthesize({ model: 'sonic-3', voice_id: 'v', text: 'Hi', format: 'pcm' }), (e: unknown) => {
      assert.ok(e instanceof VoiceProviderError && e.kind === 'unavailable' && e.account === 'credentials');
      assert.match(e.message, /CARTESIA_API_KEY/);
      assert.ok(!e.message.includes(key));
      return true;
    });
    fake.fail('clone', {
      status: 402,
      body: { error_code: 'insufficient_credits', title: 'Payment required', message: 'Out of credits.', request_id: 'r' },
    });
    await assert.rejects(
      adapter().cloneVoice({ name: 'x', samples: [wavSample()] }),
      (e: unknown) => e instanceof VoiceProviderError && e.account === 'quota_exhausted',
    );
  });

  test('the request’s refusals are `rejected` with Cartesia’s message; 429 and 5xx `unavailable` with Retry-After; plain text read', async () => {
    const p = adapter();
    await assert.rejects(p.synthesize({ model: 'sonic-3', voice_id: 'nobody', text: 'Hi', format: 'pcm' }), (e: unknown) => {
      assert.ok(e instanceof CartesiaError && e.kind === 'rejected');
      assert.match(e.message, /Voice nobody not found/);
      return true;
    });
    await assert.rejects(
      p.synthesize({ model: 'sonic-0', voice_id: 'nobody', text: 'Hi', format: 'pcm' }),
      (e: unknown) => e instanceof CartesiaError && e.kind === 'rejected',
    );
    fake.fail('bytes', {
      status: 429,
      headers: { 'retry-after': '7' },
      body: { error_code: 'concurrency_limited', title: 'Too many concurrent requests', message: 'Slow down.', request_id: 'r' },
    });
    await assert.rejects(p.synthesize({ model: 'sonic-3', voice_id: 'v', text: 'Hi', format: 'pcm' }), (e: unknown) => {
      assert.ok(e instanceof CartesiaError && e.kind === 'unavailable');
      assert.equal(e.details.retryAfterSeconds, 7);
      assert.equal(e.details.code, 'concurrency_limited');
      return true;
    });
    fake.fail('delete', { status: 400, body: 'Bad request: voice is locked', headers: { 'content-type': 'text/plain' } });
    await assert.rejects(
      p.deleteVoice('v'),
      (e: unknown) => e instanceof CartesiaError && e.kind === 'rejected' && /voice is locked/.test(e.message),
    );
    fake.fail('bytes', { status: 503 });
    await assert.rejects(
      p.synthesize({ model: 'sonic-3', voice_id: 'v', text: 'Hi', format: 'pcm' }),
      (e: unknown) => e instanceof CartesiaError && e.kind === 'unavailable',
    );
  });

  test('a request past its time limit, and a stream refused before its audio, are errors as synthesize’s', async () => {
    fake.fail('bytes', { delayMs: 500 });
    await assert.rejects(
      adapter(fake.apiKey, { speech: 100 }).synthesize({ model: 'sonic-3', voice_id: 'v', text: 'Hi', format: 'pcm' }),
      (e: unknown) => e instanceof CartesiaError && e.kind === 'unavailable' && /within 0.1 s/.test(e.message),
    );
    await new Promise((r) => setTimeout(r, 600)); // the abandoned request leaves the fake's one concurrency slot
    const stream = adapter().synthesizeStreamWithTimestamps({ model: 'sonic-3', voice_id: 'nobody', text: 'Hi' });
    await assert.rejects(
      (async () => {
        for await (const _ of stream) void _;
      })(),
      (e: unknown) => e instanceof CartesiaError && e.kind === 'rejected',
    );
  });
});
