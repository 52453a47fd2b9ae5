// The ElevenLabs adapter (src/providers/voice/elevenlabs.ts) against the local fake
// (test/fakes/elevenlabs-fake.ts) on every documented failure: 4xx, 429 with and without Retry-After,
// 5xx, timeouts, malformed JSON, oversized bodies, resets, redirects, the streamed speech cut or
// stalled midway; each is `rejected` or `unavailable`, and the key is in no error.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ELEVENLABS_PRESET_VOICES, ElevenLabsVoiceProvider, ELEVENLABS_SPEECH_BYTES_MAX } from '../../src/providers/voice/elevenlabs.js';
import { retryAfterMs } from '../../src/providers/http-body.js';
import { fakeSpeechPcm, startElevenLabsFake, STREAM_CHUNK_BYTES } from '../fakes/elevenlabs-fake.js';
import {
  KEY,
  wavSample,
  providerError,
  drain,
  fake,
  el,
  TIMEOUT_MS,
  lastRequest,
  clone,
  call,
  ROUTES,
  useElevenLabsAdapter,
} from './elevenlabs.setup.js';

useElevenLabsAdapter();

describe('ElevenLabs adapter contract', () => {
  test('clone without samples is refused before any request', async () => {
    const before = fake.requests.length;
    await providerError(el.cloneVoice({ name: 'v', samples: [] }), 'rejected');
    assert.equal(fake.requests.length, before);
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

  test("4xx answers are `rejected` with the provider's message: detail objects, 422 validation lists, text", async () => {
    for (const [op, route] of ROUTES) {
      fake.fail(route, { status: 400, body: { detail: { status: 'max_character_limit_exceeded', message: `too long for ${op}` } } });
      const bad = await providerError(call[op](), 'rejected');
      assert.equal(bad.message, `too long for ${op}`);
      assert.deepEqual(bad.details, { status: 400, code: 'max_character_limit_exceeded' });

      fake.fail(route, {
        status: 422,
        body: {
          detail: [
            { loc: ['body', 'files', 0], msg: 'Field required', type: 'missing' },
            { loc: ['query', 'output_format'], msg: 'Input should be pcm_22050', type: 'enum' },
          ],
        },
      });
      const invalid = await providerError(call[op](), 'rejected');
      assert.equal(invalid.message, 'body.files.0: Field required; query.output_format: Input should be pcm_22050');

      // a 403 is about our account, not the request: unavailable, without the provider's text
      fake.fail(route, { status: 403, body: { detail: { status: 'only_for_creator+', message: 'Upgrade to use this voice' } } });
      const forbidden = await providerError(call[op](), 'unavailable');
      assert.equal(
        forbidden.message,
        "the voice provider refused the service's credentials (HTTP 403); an operator must check ELEVENLABS_API_KEY",
      );
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
        op === 'clone'
          ? wrong.cloneVoice({ name: 'v', samples: [wavSample()] })
          : op === 'delete'
            ? wrong.deleteVoice('x')
            : op === 'speech'
              ? wrong.synthesize({ model: 'm', voice_id: 'JBFqnCBsd6RMkjVDRZzb', text: 'hi', format: 'wav' })
              : drain(wrong.synthesizeStream({ model: 'm', voice_id: 'JBFqnCBsd6RMkjVDRZzb', text: 'hi' }));
      const err = await providerError(p, 'unavailable', wrongKey);
      assert.equal(
        err.message,
        "the voice provider refused the service's credentials (HTTP 401); an operator must check ELEVENLABS_API_KEY",
      );
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
      fake.fail(route, {
        status: 429,
        headers: { 'retry-after': '7' },
        body: { detail: { status: 'too_many_concurrent_requests', message: 'Too many concurrent requests.' } },
      });
      const limited = await providerError(call[op](), 'unavailable');
      assert.match(
        limited.message,
        /^ElevenLabs answered HTTP 429 \(too_many_concurrent_requests\) to the .*: Too many concurrent requests\.; retry after 7 s$/,
      );
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
      assert.match(
        (await providerError(call[op](), 'unavailable')).message,
        /HTTP 500 \(internal_error\).*: An internal error occurred\.$/,
      );
      fake.fail(route, { status: 503, headers: { 'retry-after': '2' } });
      assert.match((await providerError(call[op](), 'unavailable')).message, /HTTP 503 to the .*; retry after 2 s$/);
      fake.fail(route, {
        status: 502,
        body: '<html><body><h1>502 Bad Gateway</h1></body></html>',
        headers: { 'content-type': 'text/html' },
      });
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
    assert.match(
      (await providerError(nowhere.deleteVoice('x'), 'unavailable')).message,
      /could not be reached for voice deletion: ECONNREFUSED/,
    );
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
