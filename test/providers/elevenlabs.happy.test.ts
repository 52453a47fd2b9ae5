// The ElevenLabs adapter (src/providers/voice/elevenlabs.ts) against a local fake of the ElevenLabs
// API (test/fakes/elevenlabs-fake.ts), which reproduces its documented wire format: what the adapter
// sends for each request (method, path, query, headers, key, body or multipart parts) and how it reads
// each success, the streamed speech's chunks included; and its configuration: the key is required
// with VOICE_PROVIDER=elevenlabs and never serialised.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createVoiceProviders } from '../../src/runtime/providers.js';
import { SIM_PCM_CONTENT_TYPE } from '../../src/providers/voice/simulator.js';
import { ELEVENLABS_SAMPLE_RATE_HZ, ElevenLabsVoiceProvider, elevenLabsDescriptor } from '../../src/providers/voice/elevenlabs.js';
import { fakeSpeechPcm, STREAM_CHUNK_BYTES } from '../fakes/elevenlabs-fake.js';
import {
  KEY,
  wavBytes,
  mp3Bytes,
  providerError,
  drain,
  parseWav,
  fake,
  el,
  lastRequest,
  clone,
  useElevenLabsAdapter,
} from './elevenlabs.setup.js';
import { settingsOf } from '../../src/providers/registry.js';

useElevenLabsAdapter();

describe('ElevenLabs adapter contract', () => {
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
    fake.fail('delete', {
      status: 400,
      body: { detail: { status: 'voice_does_not_exist', message: `A voice with voice_id ${voice_id} does not exist.` } },
    });
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
    assert.deepEqual(
      chunks.filter((c) => c.length === 0 || c.length % 2 !== 0),
      [],
    );
    assert.ok(Buffer.concat(chunks).equals(pcm), 'the provider PCM, unchanged');
  });

  test('speech: the voice id is one path segment, escaped; an unknown voice is the provider 404, rejected with its message', async () => {
    const err = await providerError(el.synthesize({ model: 'm', voice_id: 'a/b c?d', text: 'hi', format: 'wav' }), 'rejected');
    assert.equal(lastRequest().path, '/v1/text-to-speech/a%2Fb%20c%3Fd');
    assert.equal(err.message, 'A voice with the voice_id a/b c?d was not found.');
    assert.deepEqual(err.details, { status: 404, code: 'voice_not_found' });
  });
});

describe('ElevenLabs configuration', () => {
  const base = { DATA_DIR: '/tmp/unused' };

  test('VOICE_PROVIDER=elevenlabs without ELEVENLABS_API_KEY is a one-line ConfigError at startup', () => {
    assert.throws(
      () => loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs' }),
      (err: unknown) =>
        err instanceof ConfigError &&
        /^ELEVENLABS_API_KEY must be set when VOICE_PROVIDER=elevenlabs/.test(err.message) &&
        !err.message.includes('\n'),
    );
    assert.throws(() => loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: '' }), ConfigError);
    // not needed with another provider
    assert.equal(settingsOf(loadConfig({ ...base, VOICE_PROVIDER: 'simulator' }).providers, elevenLabsDescriptor), null);
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

  test('defaults; the key is in the config but never serialised; createVoiceProviders builds the adapter', () => {
    const config = loadConfig({ ...base, VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: KEY });
    assert.deepEqual(
      config.providers.voices.map((v) => v.descriptor.name),
      ['elevenlabs'],
    );
    const settings = settingsOf(config.providers, elevenLabsDescriptor)!;
    assert.equal(settings.apiKey, KEY);
    assert.equal(settings.baseUrl, 'https://api.elevenlabs.io');
    assert.equal(settings.modelId, 'eleven_multilingual_v2');
    assert.ok(!JSON.stringify(config).includes(KEY), 'not in JSON (and so not in a logged config)');
    const provider = createVoiceProviders(null as never, config).get('elevenlabs');
    assert.ok(provider instanceof ElevenLabsVoiceProvider);
    assert.equal(provider.baseUrl, 'https://api.elevenlabs.io');
    const custom = loadConfig({
      ...base,
      VOICE_PROVIDER: 'elevenlabs',
      ELEVENLABS_API_KEY: KEY,
      ELEVENLABS_BASE_URL: 'https://api.eu.residency.elevenlabs.io/',
      ELEVENLABS_MODEL_ID: 'eleven_flash_v2_5',
    });
    assert.deepEqual(
      { ...settingsOf(custom.providers, elevenLabsDescriptor) },
      { baseUrl: 'https://api.eu.residency.elevenlabs.io', modelId: 'eleven_flash_v2_5' },
    );
  });
});
