// The ElevenLabs adapter (src/providers/voice/elevenlabs.ts) against a local fake of the ElevenLabs
// API (test/fakes/elevenlabs-fake.ts), which reproduces its documented wire format:
//   - contract: what the adapter sends for each request (method, path, query, headers, key, body or
//     multipart parts) and how it handles every documented answer: success, 4xx, 429 with and
//     without Retry-After, 5xx, timeouts, malformed JSON, resets, redirects; the streamed speech's
//     chunks, and its body cut or stalled midway;
//   - configuration: the key is required with VOICE_PROVIDER=elevenlabs and never serialised;
//   - end to end: a voice cloned, spoken with and deleted through the HTTP API, the ledger and the
//     durable deletion workflow (which retries a failed DELETE), with the key in no log line; speech
//     streamed from the stream endpoint, refused before its first byte, and cut midway, and the money
//     of each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createVoiceProvider } from '../../src/runtime/providers.js';
import { SIM_PCM_CONTENT_TYPE } from '../../src/providers/voice/simulator.js';
import { encodeWav } from '../../src/media/wav.js';
import {
  ELEVENLABS_PRESET_VOICES,
  ELEVENLABS_SAMPLE_RATE_HZ,
  ElevenLabsError,
  ElevenLabsVoiceProvider,
  ELEVENLABS_SPEECH_BYTES_MAX,
  type ElevenLabsOperation,
} from '../../src/providers/voice/elevenlabs.js';
import { VoiceProviderError, type VoiceSample } from '../../src/providers/voice/types.js';
import { retryAfterMs } from '../../src/providers/http-body.js';
import { fakeSpeechPcm, startElevenLabsFake, STREAM_CHUNK_BYTES, type ElevenLabsFake, type FakeRoute } from '../fakes/elevenlabs-fake.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { voiceDeletionWorkflowId } from '../../workflows/voice-deletion.js';

const KEY = 'xi-contract-test-SECRET-0123456789';

function wavBytes(seconds = 0.25, hz = 330): Buffer {
  const samples = new Int16Array(Math.round(seconds * 22_050));
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / 22_050));
  return encodeWav(samples, 22_050);
}

function mp3Bytes(): Buffer {
  const frame = Buffer.alloc(417);
  Buffer.from([0xff, 0xfb, 0x90, 0x64]).copy(frame);
  return Buffer.concat([frame, frame, frame]);
}

const wavSample = (filename = 'me.wav'): VoiceSample => ({ filename, format: 'wav', content_type: 'audio/wav', data: wavBytes() });

/** The error `p` rejects with: a VoiceProviderError of `kind`, whose message never holds the key. */
async function providerError(p: Promise<unknown>, kind: 'rejected' | 'unavailable', key = KEY): Promise<ElevenLabsError> {
  const err = await p.then(
    () => assert.fail('expected a VoiceProviderError'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof VoiceProviderError, `not a VoiceProviderError: ${String(err)}`);
  assert.ok(err instanceof ElevenLabsError);
  assert.equal(err.kind, kind, err.message);
  assert.ok(!err.message.includes(key), `the message holds the API key: ${err.message}`);
  assert.ok(!err.message.includes('\n'), 'one line');
  return err;
}

/** Every chunk of a streamed synthesis, in order. */
async function drain(chunks: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of chunks) out.push(chunk);
  return out;
}

function parseWav(b: Buffer) {
  assert.equal(b.toString('ascii', 0, 4), 'RIFF');
  assert.equal(b.readUInt32LE(4), b.length - 8);
  assert.equal(b.toString('ascii', 8, 16), 'WAVEfmt ');
  assert.equal(b.toString('ascii', 36, 40), 'data');
  assert.equal(b.readUInt32LE(40), b.length - 44);
  return { format: b.readUInt16LE(20), channels: b.readUInt16LE(22), rate: b.readUInt32LE(24), byteRate: b.readUInt32LE(28), bits: b.readUInt16LE(34) };
}

describe('ElevenLabs adapter contract', () => {
  let fake: ElevenLabsFake;
  let el: ElevenLabsVoiceProvider;
  const TIMEOUT_MS = 1_000;
  before(async () => {
    fake = await startElevenLabsFake({ apiKey: KEY });
    el = new ElevenLabsVoiceProvider({
      apiKey: KEY,
      baseUrl: `${fake.url}/`,
      modelId: 'eleven_multilingual_v2',
      timeoutsMs: { clone: TIMEOUT_MS, delete: TIMEOUT_MS, speech: TIMEOUT_MS },
    });
  });
  after(async () => {
    await fake.close();
  });

  const lastRequest = () => fake.requests.at(-1)!;
  const clone = () => el.cloneVoice({ name: 'contract voice', samples: [wavSample()] });
  // `stream`: the streamed synthesis, which answers every failure before its first chunk as `speech` does.
  const call: Record<ElevenLabsOperation | 'stream', () => Promise<unknown>> = {
    clone,
    delete: () => el.deleteVoice('someVoiceId000000000'),
    speech: () => el.synthesize({ model: 'eleven-multilingual-v2', voice_id: ELEVENLABS_PRESET_VOICES[0], text: 'hello', format: 'wav' }),
    stream: () => drain(el.synthesizeStream({ model: 'eleven-multilingual-v2', voice_id: ELEVENLABS_PRESET_VOICES[0], text: 'hello' })),
  };
  const ROUTES: [ElevenLabsOperation | 'stream', FakeRoute][] = [
    ['clone', 'clone'],
    ['delete', 'delete'],
    ['speech', 'speech'],
    ['stream', 'stream'],
  ];

  test('name and provider identity; preset voices are the default voices', () => {
    assert.equal(el.name, 'elevenlabs');
    assert.equal(el.configured, true);
    assert.equal(el.baseUrl, fake.url, 'a trailing slash is dropped');
    assert.ok(el.presetVoices().includes('JBFqnCBsd6RMkjVDRZzb'));
    assert.ok(!JSON.stringify(el).includes(KEY), 'the key is not serialisable');
  });

  test('clone: POST /v1/voices/add, multipart name + one files part per sample, our file names, xi-api-key', async () => {
    const wav = wavBytes();
    const mp3 = mp3Bytes();
    const cloned = await el.cloneVoice({
      name: 'Zoë 🎙',
      samples: [
        { filename: '../../etc/passwd".wav', format: 'wav', content_type: 'audio/wav', data: wav },
        { filename: 'memo.bin', format: 'mp3', content_type: 'audio/mpeg', data: mp3 },
      ],
    });
    const r = lastRequest();
    assert.equal(r.method, 'POST');
    assert.equal(r.path, '/v1/voices/add');
    assert.deepEqual(r.query, {});
    assert.equal(r.headers['xi-api-key'], KEY);
    assert.equal(r.headers['authorization'], undefined, 'the key goes in xi-api-key only');
    assert.match(r.headers['content-type']!, /^multipart\/form-data; boundary=/);
    assert.equal(r.headers['accept'], 'application/json');
    assert.deepEqual(r.fields, [['name', 'Zoë 🎙']]);
    assert.deepEqual(
      r.files!.map((f) => [f.field, f.filename, f.contentType]),
      [
        ['files', 'sample-1.wav', 'audio/wav'],
        ['files', 'sample-2.mp3', 'audio/mpeg'],
      ],
    );
    assert.ok(r.files![0]!.data.equals(wav) && r.files![1]!.data.equals(mp3), 'the samples byte for byte');
    assert.deepEqual(cloned, { voice_id: cloned.voice_id, requires_verification: false });
    assert.equal(fake.voices.get(cloned.voice_id)?.name, 'Zoë 🎙');
  });

  test("clone: the provider's requires_verification is passed on", async () => {
    fake.requiresVerification = true;
    try {
      assert.equal((await clone()).requires_verification, true);
    } finally {
      fake.requiresVerification = false;
    }
    assert.equal((await clone()).requires_verification, false);
  });

  test('clone without samples is refused before any request', async () => {
    const before = fake.requests.length;
    await providerError(el.cloneVoice({ name: 'v', samples: [] }), 'rejected');
    assert.equal(fake.requests.length, before);
  });

  test('delete: DELETE /v1/voices/{id}; a voice already gone (404, or 400 voice_not_found) is deleted', async () => {
    const { voice_id } = await clone();
    await el.deleteVoice(voice_id);
    const r = lastRequest();
    assert.equal(r.method, 'DELETE');
    assert.equal(r.path, `/v1/voices/${voice_id}`);
    assert.equal(r.headers['xi-api-key'], KEY);
    assert.equal(fake.voices.has(voice_id), false);
    // again: the fake answers 404 voice_not_found, which is success (idempotent)
    await el.deleteVoice(voice_id);
    assert.equal(lastRequest().path, `/v1/voices/${voice_id}`);
    fake.fail('delete', { status: 400, body: { detail: { status: 'voice_does_not_exist', message: `A voice with voice_id ${voice_id} does not exist.` } } });
    await el.deleteVoice(voice_id);
    // but another 400 is a refusal
    fake.fail('delete', { status: 400, body: { detail: { status: 'voice_in_use', message: 'this voice cannot be deleted' } } });
    const err = await providerError(el.deleteVoice(voice_id), 'rejected');
    assert.equal(err.message, 'this voice cannot be deleted');
  });

  test('speech: POST /v1/text-to-speech/{id}?output_format=pcm_22050 with JSON text and model_id; wav wraps the PCM', async () => {
    const { voice_id } = await clone();
    const text = 'Hello, world: ünïcödé 🎙.';
    const wav = await el.synthesize({ model: 'eleven-multilingual-v2', voice_id, text, format: 'wav' });
    const r = lastRequest();
    assert.equal(r.method, 'POST');
    assert.equal(r.path, `/v1/text-to-speech/${voice_id}`);
    assert.deepEqual(r.query, { output_format: 'pcm_22050' });
    assert.equal(r.headers['xi-api-key'], KEY);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.deepEqual(r.json, { text, model_id: 'eleven_multilingual_v2' });
    const pcm = fakeSpeechPcm(voice_id, text, 22_050);
    assert.equal(wav.content_type, 'audio/wav');
    assert.deepEqual(parseWav(wav.audio), { format: 1, channels: 1, rate: 22_050, byteRate: 44_100, bits: 16 });
    assert.ok(wav.audio.subarray(44).equals(pcm), 'the provider PCM, unchanged, in the WAV');

    const raw = await el.synthesize({ model: 'eleven-multilingual-v2', voice_id, text, format: 'pcm' });
    assert.equal(raw.content_type, SIM_PCM_CONTENT_TYPE, "the simulator's PCM content type");
    assert.ok(raw.audio.equals(pcm));
    // a default voice needs no clone
    const preset = await el.synthesize({ model: 'eleven-multilingual-v2', voice_id: 'JBFqnCBsd6RMkjVDRZzb', text: 'hi', format: 'pcm' });
    assert.ok(preset.audio.equals(fakeSpeechPcm('JBFqnCBsd6RMkjVDRZzb', 'hi', 22_050)));
  });

  test('stream: POST /v1/text-to-speech/{id}/stream?output_format=pcm_22050, the same JSON; the PCM in chunks of whole samples as they come', async () => {
    assert.equal(el.pcm_rate_hz, ELEVENLABS_SAMPLE_RATE_HZ);
    const { voice_id } = await clone();
    const text = 'Streamed while it is made: ünïcödé 🎙.'.repeat(3);
    const chunks = await drain(el.synthesizeStream({ model: 'eleven-multilingual-v2', voice_id, text }));
    const r = lastRequest();
    assert.equal(r.route, 'stream');
    assert.equal(r.method, 'POST');
    assert.equal(r.path, `/v1/text-to-speech/${voice_id}/stream`);
    assert.deepEqual(r.query, { output_format: 'pcm_22050' });
    assert.equal(r.headers['xi-api-key'], KEY);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.deepEqual(r.json, { text, model_id: 'eleven_multilingual_v2' });
    const pcm = fakeSpeechPcm(voice_id, text, 22_050);
    assert.ok(pcm.length > 4 * STREAM_CHUNK_BYTES);
    assert.ok(chunks.length > 4, `${chunks.length} chunks`);
    // The fake's chunks split samples (an odd size); the adapter's never do.
    assert.deepEqual(chunks.filter((c) => c.length === 0 || c.length % 2 !== 0), []);
    assert.ok(Buffer.concat(chunks).equals(pcm), 'the provider PCM, unchanged');
  });

  test('stream: a body cut midway or stalled past the time limit is `unavailable`, after the chunks already handed out', async () => {
    const text = 'A long sentence that will not be heard to its end.';
    const pcm = fakeSpeechPcm(ELEVENLABS_PRESET_VOICES[0], text, 22_050);
    for (const fault of [{ cutAfterBytes: 2 * STREAM_CHUNK_BYTES + 1 }, { stallAfterBytes: 2 * STREAM_CHUNK_BYTES + 1 }]) {
      fake.fail('stream', fault);
      const got: Buffer[] = [];
      const started = Date.now();
      const err = await providerError(
        (async () => {
          for await (const chunk of el.synthesizeStream({ model: 'm', voice_id: ELEVENLABS_PRESET_VOICES[0], text })) got.push(chunk);
        })(),
        'unavailable',
      );
      if ('cutAfterBytes' in fault) assert.match(err.message, /^ElevenLabs broke off the text to speech stream after \d+ bytes: /);
      else {
        assert.match(err.message, /did not complete the text to speech within 1 s$/);
        assert.ok(Date.now() - started < TIMEOUT_MS * 2.5, 'abandoned on time');
      }
      const heard = Buffer.concat(got);
      assert.ok(heard.length > 0 && heard.length <= 2 * STREAM_CHUNK_BYTES + 1, `${heard.length} bytes handed out`);
      assert.ok(pcm.subarray(0, heard.length).equals(heard), 'what was handed out is the start of the speech');
    }
  });

  test('speech: the voice id is one path segment, escaped; an unknown voice is the provider 404, rejected with its message', async () => {
    const err = await providerError(el.synthesize({ model: 'm', voice_id: 'a/b c?d', text: 'hi', format: 'wav' }), 'rejected');
    assert.equal(lastRequest().path, '/v1/text-to-speech/a%2Fb%20c%3Fd');
    assert.equal(err.message, 'A voice with the voice_id a/b c?d was not found.');
    assert.deepEqual(err.details, { status: 404, code: 'voice_not_found' });
  });

  test("4xx answers are `rejected` with the provider's message: detail objects, 422 validation lists, text", async () => {
    for (const [op, route] of ROUTES) {
      fake.fail(route, { status: 400, body: { detail: { status: 'max_character_limit_exceeded', message: `too long for ${op}` } } });
      const bad = await providerError(call[op](), 'rejected');
      assert.equal(bad.message, `too long for ${op}`);
      assert.deepEqual(bad.details, { status: 400, code: 'max_character_limit_exceeded' });

      fake.fail(route, {
        status: 422,
        body: { detail: [{ loc: ['body', 'files', 0], msg: 'Field required', type: 'missing' }, { loc: ['query', 'output_format'], msg: 'Input should be pcm_22050', type: 'enum' }] },
      });
      const invalid = await providerError(call[op](), 'rejected');
      assert.equal(invalid.message, 'body.files.0: Field required; query.output_format: Input should be pcm_22050');

      // a 403 is about our account, not the request: unavailable, without the provider's text
      fake.fail(route, { status: 403, body: { detail: { status: 'only_for_creator+', message: 'Upgrade to use this voice' } } });
      const forbidden = await providerError(call[op](), 'unavailable');
      assert.equal(forbidden.message, "the voice provider refused the service's credentials (HTTP 403); an operator must check ELEVENLABS_API_KEY");
      assert.deepEqual(forbidden.details, { status: 403, code: 'only_for_creator+' });

      fake.fail(route, { status: 400, body: 'samples are too noisy', headers: { 'content-type': 'text/plain' } });
      assert.equal((await providerError(call[op](), 'rejected')).message, 'samples are too noisy');

      fake.fail(route, { status: 400, body: '' });
      assert.match((await providerError(call[op](), 'rejected')).message, /^ElevenLabs refused the .* \(HTTP 400\)$/);
    }
  });

  test('401: our key is wrong: `unavailable` with a generic message, no provider text, never the key', async () => {
    let err401Account: string | undefined;
    const wrongKey = 'xi-wrong-key-SECRET-9876543210';
    const wrong = new ElevenLabsVoiceProvider({ apiKey: wrongKey, baseUrl: fake.url });
    for (const op of ['clone', 'delete', 'speech', 'stream'] as const) {
      const p =
        op === 'clone' ? wrong.cloneVoice({ name: 'v', samples: [wavSample()] })
        : op === 'delete' ? wrong.deleteVoice('x')
        : op === 'speech' ? wrong.synthesize({ model: 'm', voice_id: 'JBFqnCBsd6RMkjVDRZzb', text: 'hi', format: 'wav' })
        : drain(wrong.synthesizeStream({ model: 'm', voice_id: 'JBFqnCBsd6RMkjVDRZzb', text: 'hi' }));
      const err = await providerError(p, 'unavailable', wrongKey);
      assert.equal(err.message, "the voice provider refused the service's credentials (HTTP 401); an operator must check ELEVENLABS_API_KEY");
      assert.deepEqual(err.details, { status: 401, code: 'invalid_api_key' });
      assert.equal(lastRequest().headers['xi-api-key'], wrongKey);
      err401Account = err.account;
    }
    // quota_exceeded (documented as a 400/401) is the operator's account, not the customer's request
    fake.fail('speech', { status: 401, body: { detail: { status: 'quota_exceeded', message: 'This request exceeds your quota.' } } });
    const quota = await providerError(call.speech(), 'unavailable');
    assert.equal(quota.account, 'quota_exhausted');
    assert.equal(err401Account, 'credentials');
  });

  test("clone beyond the account's voice slots (400 voice_limit_reached) is `unavailable`, the account's voice slots full", async () => {
    const small = await startElevenLabsFake({ apiKey: KEY, voiceSlots: 1 });
    try {
      const p = new ElevenLabsVoiceProvider({ apiKey: KEY, baseUrl: small.url });
      await p.cloneVoice({ name: 'first', samples: [wavSample()] });
      const err = await providerError(p.cloneVoice({ name: 'second', samples: [wavSample()] }), 'unavailable');
      assert.equal(err.account, 'voice_slots_full');
      assert.deepEqual(err.details, { status: 400, code: 'voice_limit_reached' });
      assert.equal(small.voices.size, 1);
    } finally {
      await small.close();
    }
  });

  test('429 is `unavailable`, with Retry-After in seconds when sent (delta or date), without when not', async () => {
    for (const [op, route] of ROUTES) {
      fake.fail(route, { status: 429, headers: { 'retry-after': '7' }, body: { detail: { status: 'too_many_concurrent_requests', message: 'Too many concurrent requests.' } } });
      const limited = await providerError(call[op](), 'unavailable');
      assert.match(limited.message, /^ElevenLabs answered HTTP 429 \(too_many_concurrent_requests\) to the .*: Too many concurrent requests\.; retry after 7 s$/);
      assert.deepEqual(limited.details, { status: 429, code: 'too_many_concurrent_requests', retryAfterSeconds: 7 });

      fake.fail(route, { status: 429, body: { detail: { status: 'system_busy', message: 'We are experiencing heavy traffic.' } } });
      const busy = await providerError(call[op](), 'unavailable');
      assert.doesNotMatch(busy.message, /retry after/);
      assert.equal(busy.details.retryAfterSeconds, undefined);
      assert.equal(busy.details.code, 'system_busy');

      fake.fail(route, { status: 429, headers: { 'retry-after': new Date(Date.now() + 30_000).toUTCString() }, body: {} });
      const dated = await providerError(call[op](), 'unavailable');
      assert.ok(dated.details.retryAfterSeconds! >= 28 && dated.details.retryAfterSeconds! <= 31, String(dated.details.retryAfterSeconds));
    }
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(new Date(0).toUTCString()), 0);
  });

  test('5xx is `unavailable` (with the message when JSON; a proxy HTML page is not quoted); 408 too', async () => {
    for (const [op, route] of ROUTES) {
      fake.fail(route, { status: 500, body: { detail: { status: 'internal_error', message: 'An internal error occurred.' } } });
      assert.match((await providerError(call[op](), 'unavailable')).message, /HTTP 500 \(internal_error\).*: An internal error occurred\.$/);
      fake.fail(route, { status: 503, headers: { 'retry-after': '2' } });
      assert.match((await providerError(call[op](), 'unavailable')).message, /HTTP 503 to the .*; retry after 2 s$/);
      fake.fail(route, { status: 502, body: '<html><body><h1>502 Bad Gateway</h1></body></html>', headers: { 'content-type': 'text/html' } });
      const gw = await providerError(call[op](), 'unavailable');
      assert.doesNotMatch(gw.message, /html/i);
      assert.match(gw.message, /HTTP 502/);
      fake.fail(route, { status: 408, body: { detail: 'Request timeout' } });
      assert.match((await providerError(call[op](), 'unavailable')).message, /HTTP 408.*: Request timeout$/);
    }
  });

  test('an answer slower than the time limit is `unavailable` (the request is abandoned on time)', async () => {
    for (const [op, route] of ROUTES) {
      fake.fail(route, { delayMs: TIMEOUT_MS * 3 });
      const started = Date.now();
      const err = await providerError(call[op](), 'unavailable');
      const took = Date.now() - started;
      assert.match(err.message, /did not complete the .* within 1 s$/);
      assert.ok(took >= TIMEOUT_MS - 50 && took < TIMEOUT_MS * 2.5, `took ${took} ms`);
    }
  });

  test('malformed or undocumented success bodies are `unavailable`', async () => {
    fake.fail('clone', { status: 200, body: '{"voice_id": "abc", "requires_verif' });
    assert.match((await providerError(clone(), 'unavailable')).message, /unexpected body \(not JSON\)/);
    fake.fail('clone', { status: 200, body: { voice_id: 'x'.repeat(20) } });
    assert.match((await providerError(clone(), 'unavailable')).message, /voice_id or requires_verification missing/);
    // the voice it named is removed, best effort, so nothing is left at the provider
    assert.equal(lastRequest().method, 'DELETE');
    assert.equal(lastRequest().path, `/v1/voices/${'x'.repeat(20)}`);
    fake.fail('clone', { status: 200, body: { voice_id: 'bad id/../x', requires_verification: false } });
    await providerError(clone(), 'unavailable');
    fake.fail('clone', { status: 200, body: [] });
    await providerError(clone(), 'unavailable');

    fake.fail('delete', { status: 200, body: 'ok' });
    assert.match((await providerError(call.delete(), 'unavailable')).message, /voice deletion .*unexpected body/);
    fake.fail('speech', { status: 200, body: { detail: { status: 'ok' } } });
    assert.match((await providerError(call.speech(), 'unavailable')).message, /JSON instead of audio/);
    fake.fail('stream', { status: 200, body: { detail: { status: 'ok' } } });
    assert.match((await providerError(call.stream(), 'unavailable')).message, /JSON instead of audio/);
  });

  test('an answer body longer than the longest speech is refused unread, on every call: `unavailable`', async () => {
    const huge = 'x'.repeat(ELEVENLABS_SPEECH_BYTES_MAX + 1);
    fake.fail('speech', { status: 200, headers: { 'content-type': 'audio/pcm' }, body: huge });
    assert.match((await providerError(call.speech(), 'unavailable')).message, /larger than the \d+ bytes accepted/);
    fake.fail('clone', { status: 200, body: huge });
    assert.match((await providerError(clone(), 'unavailable')).message, /larger than the \d+ bytes accepted/);
  });

  test('a reset connection, a closed port and a redirect are `unavailable`; a redirect is not followed', async () => {
    for (const [op, route] of ROUTES) {
      fake.fail(route, { reset: true });
      assert.match((await providerError(call[op](), 'unavailable')).message, /^ElevenLabs could not be reached for .*: /);
      const before = fake.requests.length;
      fake.fail(route, { status: 307, headers: { location: `${fake.url}/elsewhere` } });
      assert.match((await providerError(call[op](), 'unavailable')).message, /^ElevenLabs redirected the .* \(HTTP 307; not followed\)$/);
      assert.equal(fake.requests.length, before + 1, 'the redirect was not followed with the key');
    }
    const closed = await startElevenLabsFake();
    const url = closed.url;
    await closed.close();
    const nowhere = new ElevenLabsVoiceProvider({ apiKey: KEY, baseUrl: url });
    assert.match((await providerError(nowhere.deleteVoice('x'), 'unavailable')).message, /could not be reached for voice deletion: ECONNREFUSED/);
  });

  test('the key is checked before use and kept out of errors', () => {
    assert.throws(() => new ElevenLabsVoiceProvider({ apiKey: '' }), /ELEVENLABS_API_KEY/);
    assert.throws(() => new ElevenLabsVoiceProvider({ apiKey: 'has space' }), /ELEVENLABS_API_KEY/);
    assert.throws(() => new ElevenLabsVoiceProvider({ apiKey: KEY, baseUrl: 'http://api.example.com' }), /https/);
    // a provider that echoes the key back in its message: scrubbed
    fake.fail('speech', { status: 400, body: { detail: { status: 'bad', message: `key ${KEY} is not allowed here` } } });
    return providerError(call.speech(), 'rejected').then((err) => assert.equal(err.message, 'key [redacted] is not allowed here'));
  });
});

describe('ElevenLabs configuration', () => {
  const base = { DATA_DIR: '/tmp/unused' };

  test('VOICE_PROVIDER=elevenlabs without ELEVENLABS_API_KEY is a one-line ConfigError at startup', () => {
    assert.throws(
      () => loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs' }),
      (err: unknown) => err instanceof ConfigError && /^ELEVENLABS_API_KEY must be set when VOICE_PROVIDER=elevenlabs/.test(err.message) && !err.message.includes('\n'),
    );
    assert.throws(() => loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: '' }), ConfigError);
    // not needed with another provider
    assert.equal(loadConfig({ ...base, VOICE_PROVIDER: 'simulator' }).elevenlabs.apiKey, undefined);
  });

  test('a bad key or base URL is refused without echoing the key', () => {
    const badKey = 'secret-with-newline-SECRET\n';
    assert.throws(
      () => loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: badKey }),
      (err: unknown) => err instanceof ConfigError && /ELEVENLABS_API_KEY/.test(err.message) && !err.message.includes('SECRET'),
    );
    assert.throws(
      () => loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: KEY, ELEVENLABS_BASE_URL: 'http://api.elevenlabs.io' }),
      (err: unknown) => err instanceof ConfigError && /ELEVENLABS_BASE_URL: must use https/.test(err.message),
    );
    assert.throws(() => loadConfig({ ...base, ELEVENLABS_MODEL_ID: 'no spaces allowed' }), /ELEVENLABS_MODEL_ID/);
  });

  test('defaults; the key is in the config but never serialised; createVoiceProvider builds the adapter', () => {
    const config = loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: KEY });
    assert.equal(config.voiceProvider, 'elevenlabs');
    assert.equal(config.elevenlabs.apiKey, KEY);
    assert.equal(config.elevenlabs.baseUrl, 'https://api.elevenlabs.io');
    assert.equal(config.elevenlabs.modelId, 'eleven_multilingual_v2');
    assert.ok(!JSON.stringify(config).includes(KEY), 'not in JSON (and so not in a logged config)');
    const provider = createVoiceProvider(null as never, config);
    assert.ok(provider instanceof ElevenLabsVoiceProvider);
    assert.equal(provider.baseUrl, 'https://api.elevenlabs.io');
    const custom = loadConfig({
      ...base,
      VOICE_PROVIDER: 'elevenlabs',
      ELEVENLABS_API_KEY: KEY,
      ELEVENLABS_BASE_URL: 'https://api.eu.residency.elevenlabs.io/',
      ELEVENLABS_MODEL_ID: 'eleven_flash_v2_5',
    });
    assert.deepEqual({ ...custom.elevenlabs }, { baseUrl: 'https://api.eu.residency.elevenlabs.io', modelId: 'eleven_flash_v2_5' });
  });
});

describe('ElevenLabs end to end: the HTTP API, the ledger and the deletion workflow', () => {
  const E2E_KEY = 'test-key';
  let fake: ElevenLabsFake;
  let stack: Stack;
  const logLines: string[] = [];
  before(async () => {
    // The fake first: the stack reads its URL from the environment.
    fake = await startElevenLabsFake({ apiKey: E2E_KEY });
    stack = await startStack({
      env: { VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: E2E_KEY, ELEVENLABS_BASE_URL: fake.url, LOG_LEVEL: 'debug' },
      logStream: { write: (line: string) => void logLines.push(line) },
    });
  });
  after(async () => {
    await stack?.stop();
    await fake?.close();
  });

  async function cloneThroughApi(key: string, name: string, wav: Buffer) {
    const fd = new FormData();
    fd.append('name', name);
    fd.append('file', new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), 'my recording.wav');
    const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: fd });
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  }

  async function speak(key: string, json: unknown) {
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
    return { status: res.status, headers: res.headers, bytes, body: isJson ? JSON.parse(bytes.toString()) : null };
  }

  test('the ElevenLabs speech model is the one available', async () => {
    const c = await newCustomer(stack, 1);
    const models = await http(stack.baseUrl, 'GET', '/v2/models', { token: c.key });
    const speech = models.body.data.filter((m: any) => m.kind === 'speech');
    assert.deepEqual(
      speech.map((m: any) => [m.id, m.backend, m.available, m.region, m.pricing.per_1000_characters_in_euro]),
      [['eleven-multilingual-v2', 'elevenlabs', true, 'us', 0.3]],
    );
  });

  test('a voice cloned, spoken with, charged, and deleted (the first DELETE fails with 503 and is retried)', async () => {
    const c = await newCustomer(stack, 5);
    const wav = wavBytes(0.5, 220);

    // clone: our multipart in, the provider's multipart out
    const created = await cloneThroughApi(c.key, 'My voice', wav);
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const voice = created.body;
    assert.equal(voice.requires_verification, true, 'cloned without a consent');
    const held = fake.voices.get(voice.voice_id);
    assert.ok(held, 'the fake holds the cloned voice');
    assert.equal(held.name, 'My voice');
    assert.deepEqual(
      held.files.map((f) => [f.filename, f.contentType]),
      [['sample-1.wav', 'audio/wav']],
    );
    assert.ok(held.files[0]!.data.equals(wav), 'the upload reached the provider byte for byte');
    assert.equal(fake.requestsTo('clone').at(-1)!.headers['xi-api-key'], E2E_KEY);
    const row = await stack.db.query('SELECT provider, voice_id FROM voices WHERE id = $1', [voice.id]);
    assert.deepEqual(row.rows[0], { provider: 'elevenlabs', voice_id: voice.voice_id });

    // speak (default model and format): a WAV around the provider's PCM, charged per character
    const input = 'Hello from ElevenLabs, through the fake.';
    const res = await speak(c.key, { input, voice: voice.voice_id });
    assert.equal(res.status, 200, res.body && JSON.stringify(res.body));
    assert.equal(res.headers.get('content-type'), 'audio/wav');
    assert.equal(res.headers.get('x-model'), 'eleven-multilingual-v2');
    assert.deepEqual(parseWav(res.bytes), { format: 1, channels: 1, rate: 22_050, byteRate: 44_100, bits: 16 });
    assert.ok(res.bytes.subarray(44).equals(fakeSpeechPcm(voice.voice_id, input, 22_050)));
    const speechRequest = fake.requestsTo('speech').at(-1)!;
    assert.deepEqual(speechRequest.query, { output_format: 'pcm_22050' });
    assert.deepEqual(speechRequest.json, { text: input, model_id: 'eleven_multilingual_v2' });
    const cost = input.length * 300; // 0.30 EUR per 1,000 characters
    assert.equal(res.headers.get('x-cost-in-euro'), String(cost / 1e6));
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost);

    // raw PCM with a default voice
    const pcm = await speak(c.key, { input: 'abc', voice: 'JBFqnCBsd6RMkjVDRZzb', response_format: 'pcm', model: 'eleven-multilingual-v2' });
    assert.equal(pcm.status, 200);
    assert.equal(pcm.headers.get('content-type'), SIM_PCM_CONTENT_TYPE);
    assert.ok(pcm.bytes.equals(fakeSpeechPcm('JBFqnCBsd6RMkjVDRZzb', 'abc', 22_050)));
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost - 3 * 300);
    await assertAuditHolds(stack);

    // delete: answered at once; the provider's first DELETE fails (503) and the workflow retries it
    fake.fail('delete', { status: 503, body: { detail: { status: 'system_busy', message: 'try again' } } });
    const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: c.key });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    const handle = stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(voice.id));
    assert.deepEqual(await handle.result(), { registry_id: voice.id, voice_id: voice.voice_id, provider_deleted: true });
    assert.equal(fake.voices.has(voice.voice_id), false, 'the fake no longer has the voice');
    assert.equal(fake.pendingFaults('delete'), 0);
    const deletes = fake.requestsTo('delete').filter((r) => r.path === `/v1/voices/${voice.voice_id}`);
    assert.equal(deletes.length, 2, 'one failed DELETE, one that succeeded');
    for (const d of deletes) assert.equal(d.headers['xi-api-key'], E2E_KEY);
    const history = await handle.fetchHistory();
    const attempts = (history.events ?? []).map((e) => e.activityTaskStartedEventAttributes?.attempt).filter((a) => a != null);
    assert.deepEqual(attempts, [2]);
    const after = await stack.db.query('SELECT provider_deleted_at IS NOT NULL AS provider_deleted FROM voices WHERE id = $1', [voice.id]);
    assert.equal(after.rows[0].provider_deleted, true);
    // and speech with it is now a 404, charging nothing
    const gone = await speak(c.key, { input: 'still there?', voice: voice.voice_id });
    assert.equal(gone.status, 404);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost - 3 * 300);
    await assertAuditHolds(stack);
  });

  test("the provider's requires_verification is the voice record's", async () => {
    const c = await newCustomer(stack, 1);
    fake.requiresVerification = true;
    try {
      const created = await cloneThroughApi(c.key, 'needs verification', wavBytes());
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.equal(created.body.requires_verification, true);
      const got = await http(stack.baseUrl, 'GET', `/v2/audio/voices/${created.body.id}`, { token: c.key });
      assert.equal(got.body.requires_verification, true);
    } finally {
      fake.requiresVerification = false;
    }
  });

  test("a provider 400 on clone is our 400 with the provider's message; a 401 (our key) is our 503; nothing registered", async () => {
    const c = await newCustomer(stack, 1);
    fake.fail('clone', { status: 400, body: { detail: { status: 'voice_too_short', message: 'The samples must total at least 1 second of speech.' } } });
    const rejected = await cloneThroughApi(c.key, 'too short', wavBytes(0.1));
    assert.equal(rejected.status, 400, JSON.stringify(rejected.body));
    assert.deepEqual(rejected.body.error, {
      type: 'invalid_request_error',
      code: 'provider_rejected',
      message: 'The samples must total at least 1 second of speech.',
      param: null,
    });
    fake.fail('clone', { status: 401, body: { detail: { status: 'invalid_api_key', message: 'Invalid API key' } } });
    const unauthorized = await cloneThroughApi(c.key, 'v', wavBytes());
    assert.equal(unauthorized.status, 503, JSON.stringify(unauthorized.body));
    assert.equal(unauthorized.body.error.code, 'provider_unavailable');
    assert.doesNotMatch(unauthorized.body.error.message, /Invalid API key/);
    assert.ok(!JSON.stringify(unauthorized.body).includes(E2E_KEY));
    const count = await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE workspace_id = $1', [c.workspaceId]);
    assert.equal(count.rows[0].n, 0);
  });

  test('a provider 429 on speech is our 503; nothing charged', async () => {
    const c = await newCustomer(stack, 1);
    fake.fail('speech', { status: 429, headers: { 'retry-after': '3' }, body: { detail: { status: 'system_busy', message: 'busy' } } });
    const r = await speak(c.key, { input: 'hello', voice: 'JBFqnCBsd6RMkjVDRZzb' });
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'provider_unavailable');
    assert.ok(r.headers.get('retry-after'));
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000);
    await assertAuditHolds(stack);
  });

  /** A streamed speech request: its bytes as they arrived, and the error that cut the body, if any. */
  async function speakStreamed(key: string, path: '/v2/audio/speech' | '/v1/audio/speech', json: unknown) {
    const res = await fetch(`${stack.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });
    const parts: Buffer[] = [];
    let cut: unknown = null;
    const reader = res.body!.getReader();
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(Buffer.from(r.value));
    } catch (err) {
      cut = err;
    }
    const bytes = Buffer.concat(parts);
    const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
    return { status: res.status, headers: res.headers, parts, bytes, cut, body: isJson ? JSON.parse(bytes.toString()) : null };
  }

  const sseEvents = (bytes: Buffer) =>
    bytes
      .toString()
      .split('\n\n')
      .filter(Boolean)
      .map((e) => JSON.parse(e.replace(/^data: /, '')));

  const speechStatuses = async (workspaceId: string) =>
    (await stack.db.query<{ status: string }>('SELECT status FROM speech_requests WHERE workspace_id = $1 ORDER BY created_at', [workspaceId])).rows.map((r) => r.status);

  async function waitFor(check: () => Promise<boolean>, timeout_ms = 10_000) {
    const until = Date.now() + timeout_ms;
    while (!(await check())) {
      if (Date.now() > until) throw new Error('timed out waiting');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  test("streamed speech comes from ElevenLabs' stream endpoint chunk by chunk: the provider's audio, charged once when it finished", async () => {
    const c = await newCustomer(stack, 5);
    const voice = 'JBFqnCBsd6RMkjVDRZzb';
    const input = 'Streamed from ElevenLabs while it speaks. '.repeat(8); // 336 characters, ~185 chunks of the fake
    const pcm = fakeSpeechPcm(voice, input, 22_050);
    const speechCalls = fake.requestsTo('speech').length;

    // /v2, the audio bytes themselves: the first arrive while ElevenLabs still speaks, the money still held.
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input, voice, response_format: 'pcm', stream_format: 'audio' }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), SIM_PCM_CONTENT_TYPE);
    const cost = input.length * 300; // 0.30 EUR per 1,000 characters
    assert.equal(res.headers.get('x-cost-in-euro'), String(cost / 1e6));
    const reader = res.body!.getReader();
    const first = await reader.read();
    assert.ok(!first.done && first.value.length > 0);
    assert.deepEqual(await speechStatuses(c.workspaceId), ['held']);
    const parts = [Buffer.from(first.value)];
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(Buffer.from(r.value));
    assert.ok(parts.length > 1, `arrived in ${parts.length} parts`);
    assert.ok(Buffer.concat(parts).equals(pcm), "the fake's audio, byte for byte");
    const request = fake.requestsTo('stream').at(-1)!;
    assert.equal(request.path, `/v1/text-to-speech/${voice}/stream`);
    assert.deepEqual(request.query, { output_format: 'pcm_22050' });
    assert.deepEqual(request.json, { text: input, model_id: 'eleven_multilingual_v2' });
    assert.equal(request.headers['xi-api-key'], E2E_KEY);
    assert.equal(fake.requestsTo('speech').length, speechCalls, 'not the whole-file endpoint');
    await waitFor(async () => (await speechStatuses(c.workspaceId)).join() === 'delivered');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost);

    // /v1, server-sent events: the deltas are the fake's audio; charged once more, for this request.
    const sse = await speakStreamed(c.key, '/v1/audio/speech', { model: 'eleven-multilingual-v2', input, voice, response_format: 'pcm', stream_format: 'sse' });
    assert.equal(sse.status, 200);
    assert.equal(sse.cut, null);
    const events = sseEvents(sse.bytes);
    const deltas = events.filter((e) => e.type === 'speech.audio.delta');
    assert.ok(deltas.length > 1, `${deltas.length} deltas`);
    assert.ok(Buffer.concat(deltas.map((d) => Buffer.from(d.audio, 'base64'))).equals(pcm));
    assert.deepEqual(events.at(-1), { type: 'speech.audio.done', usage: { input_tokens: input.length, output_tokens: 0, total_tokens: input.length } });
    await waitFor(async () => (await speechStatuses(c.workspaceId)).join() === 'delivered,delivered');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * cost);
    await assertAuditHolds(stack);
  });

  test('ElevenLabs refusing a stream before its first byte: the error in our shape, nothing charged', async () => {
    const c = await newCustomer(stack, 1);
    const body = { input: 'never spoken', voice: 'JBFqnCBsd6RMkjVDRZzb', response_format: 'pcm', stream_format: 'audio' };

    fake.fail('stream', { status: 429, headers: { 'retry-after': '3' }, body: { detail: { status: 'too_many_concurrent_requests', message: 'Too many concurrent requests.' } } });
    const limited = await speakStreamed(c.key, '/v2/audio/speech', body);
    assert.equal(limited.status, 503, limited.bytes.toString());
    assert.deepEqual(limited.body, {
      error: { type: 'provider_error', code: 'provider_unavailable', message: 'the voice provider could not be reached; try again later', param: null },
    });
    assert.ok(limited.headers.get('retry-after'));

    fake.fail('stream', { status: 422, body: { detail: [{ loc: ['body', 'text'], msg: 'String should have at most 5000 characters', type: 'string_too_long' }] } });
    const invalid = await speakStreamed(c.key, '/v1/audio/speech', { ...body, stream_format: 'sse' });
    assert.equal(invalid.status, 400, invalid.bytes.toString());
    assert.deepEqual(invalid.body, {
      error: { type: 'invalid_request_error', code: 'provider_rejected', message: 'body.text: String should have at most 5000 characters', param: null },
    });

    fake.fail('stream', { status: 401, body: { detail: { status: 'invalid_api_key', message: 'Invalid API key' } } });
    const unauthorized = await speakStreamed(c.key, '/v2/audio/speech', body);
    assert.equal(unauthorized.status, 503);
    assert.equal(unauthorized.body.error.code, 'provider_unavailable');
    assert.doesNotMatch(unauthorized.body.error.message, /Invalid API key/);

    assert.equal(fake.pendingFaults('stream'), 0, 'each reached ElevenLabs');
    assert.deepEqual(await speechStatuses(c.workspaceId), ['released', 'released', 'released']);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000, 'nothing charged');
    await assertAuditHolds(stack);
  });

  test('a stream ElevenLabs cuts midway: the audio body breaks off, SSE ends with an error event; nothing charged', async () => {
    const c = await newCustomer(stack, 1);
    const voice = 'JBFqnCBsd6RMkjVDRZzb';
    const input = 'This sentence is cut off before its end. '.repeat(3);
    const pcm = fakeSpeechPcm(voice, input, 22_050);
    const cutAfterBytes = 3 * STREAM_CHUNK_BYTES + 1;

    fake.fail('stream', { cutAfterBytes });
    const audio = await speakStreamed(c.key, '/v2/audio/speech', { input, voice, response_format: 'pcm', stream_format: 'audio' });
    assert.equal(audio.status, 200);
    assert.ok(audio.cut, 'the body broke off');
    assert.ok(audio.bytes.length > 0 && audio.bytes.length <= cutAfterBytes, `${audio.bytes.length} bytes arrived`);
    assert.ok(pcm.subarray(0, audio.bytes.length).equals(audio.bytes), 'what arrived is the start of the speech');

    fake.fail('stream', { cutAfterBytes });
    const sse = await speakStreamed(c.key, '/v1/audio/speech', { model: 'eleven-multilingual-v2', input, voice, response_format: 'pcm', stream_format: 'sse' });
    assert.equal(sse.status, 200);
    const events = sseEvents(sse.bytes);
    assert.ok(events.some((e) => e.type === 'speech.audio.delta'));
    assert.equal(events.some((e) => e.type === 'speech.audio.done'), false);
    assert.deepEqual(events.at(-1), {
      type: 'error',
      error: { type: 'server_error', code: 'provider_failed', message: 'the voice provider failed mid-stream; nothing was charged', param: null },
    });

    await waitFor(async () => (await speechStatuses(c.workspaceId)).join() === 'released,released');
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000, 'nothing charged');
    await assertAuditHolds(stack);
  });

  /** Log lines of level error (pino: 50) since `from`. */
  const errorsLogged = (from: number) => logLines.slice(from).filter((l) => JSON.parse(l).level === 50).map((l) => JSON.parse(l));

  test("a wrong ELEVENLABS_API_KEY is the operator's problem: 503 without provider text, and an error logged that names the key to check", async () => {
    const c = await newCustomer(stack, 1);
    const from = logLines.length;
    fake.fail('speech', { status: 401, body: { detail: { status: 'invalid_api_key', message: 'Invalid API key' } } });
    const r = await speak(c.key, { input: 'hello', voice: 'JBFqnCBsd6RMkjVDRZzb' });
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'provider_unavailable');
    assert.doesNotMatch(r.body.error.message, /could not be reached|Invalid API key/);
    const logged = errorsLogged(from);
    assert.equal(logged.length, 1, JSON.stringify(logged));
    assert.equal(logged[0].provider_problem, 'credentials');
    assert.match(logged[0].provider_message, /ELEVENLABS_API_KEY/);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000);
  });

  test("an exhausted ElevenLabs account (quota_exceeded) or its full voice slots (voice_limit_reached) answer 503 saying so, never the operator's plan details; logged for the operator", async () => {
    const c = await newCustomer(stack, 1);
    const from = logLines.length;
    const plan = 'This request exceeds your quota of 10000. You have 0 credits remaining, while 91 credits are required for this request.';
    fake.fail('speech', { status: 401, body: { detail: { status: 'quota_exceeded', message: plan } } });
    const quota = await speak(c.key, { input: 'hello', voice: 'JBFqnCBsd6RMkjVDRZzb' });
    assert.equal(quota.status, 503, JSON.stringify(quota.body));
    assert.equal(quota.body.error.code, 'provider_quota_exhausted');
    assert.doesNotMatch(JSON.stringify(quota.body), /10000|credits remaining/);
    assert.ok(Number(quota.headers.get('retry-after')) > 0);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000, 'nothing charged');

    const slots = 'You have reached your maximum amount of custom voices (30 / 30). You can upgrade your subscription to increase your custom voice limit.';
    fake.fail('clone', { status: 400, body: { detail: { status: 'voice_limit_reached', message: slots } } });
    const full = await cloneThroughApi(c.key, 'v', wavBytes());
    assert.equal(full.status, 503, JSON.stringify(full.body));
    assert.equal(full.body.error.code, 'provider_voice_slots_full');
    assert.doesNotMatch(JSON.stringify(full.body), /30 \/ 30|upgrade your subscription/);
    assert.equal((await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE workspace_id = $1', [c.workspaceId])).rows[0].n, 0);
    const logged = errorsLogged(from);
    assert.deepEqual(logged.map((l) => l.provider_problem), ['quota_exhausted', 'voice_slots_full']);
    assert.ok(logged[0].provider_message.includes('10000'), 'the operator sees the plan figures');
    await assertAuditHolds(stack);
  });

  test('the API key appears in no log line', () => {
    assert.ok(logLines.length > 0, 'the stack logged');
    const leaked = logLines.filter((l) => l.includes(E2E_KEY));
    assert.deepEqual(leaked, []);
  });
});
