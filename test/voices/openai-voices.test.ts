// Voice consents and custom voices through the official `openai` npm package: a consent uploaded,
// retrieved, listed with the auto-paging iterator, renamed, deleted; a voice cloned with it and spoken
// with on /v1 and /v2; deleting the voice keeps the consent; another workspace's consent is a 404; the
// /v2 clone's `consent` part and VOICE_CONSENT_REQUIRED.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';
import { assertAuditHolds, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { encodeWav } from '../../src/media/wav.js';

let stack: Stack;
let strict: Stack;
before(async () => {
  stack = await startStack();
  strict = await startStack({ env: { VOICE_CONSENT_REQUIRED: 'true' }, worker: false });
});
after(async () => {
  await strict.stop();
  await stack.stop();
});

const client = (s: Stack, apiKey: string) => new OpenAI({ apiKey, baseURL: `${s.baseUrl}/v1`, maxRetries: 0 });

function wav(): Buffer {
  const samples = new Int16Array(11_025);
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 22_050));
  return encodeWav(samples, 22_050);
}
const recording = () => toFile(wav(), 'consent.wav', { type: 'audio/wav' });

describe('voice consents and voices through the openai SDK', () => {
  test('consent, clone with it, speak with the voice on v1 and v2, delete the voice and keep the consent', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(stack, c.key);
    const consent = await openai.audio.voiceConsents.create({ recording: await recording(), name: 'Ada', language: 'en-GB' });
    assert.equal(consent.object, 'audio.voice_consent');
    assert.equal(consent.language, 'en-GB');
    assert.deepEqual(await openai.audio.voiceConsents.retrieve(consent.id), consent);
    const renamed = await openai.audio.voiceConsents.update(consent.id, { name: 'Ada Lovelace' });
    assert.equal(renamed.name, 'Ada Lovelace');

    const voice = await openai.audio.voices.create({
      name: 'ada',
      audio_sample: await toFile(wav(), 'sample.wav', { type: 'audio/wav' }),
      consent: consent.id,
    });
    assert.equal(voice.object, 'audio.voice');
    assert.equal(voice.type, 'audio_sample');

    const spoken = await openai.audio.speech.create({
      model: 'sim-speech-1',
      voice: voice.id,
      input: 'my own voice',
      response_format: 'wav',
    });
    assert.equal(
      Buffer.from(await spoken.arrayBuffer())
        .subarray(0, 4)
        .toString('latin1'),
      'RIFF',
    );
    const v2 = await http(stack.baseUrl, 'POST', '/v2/audio/speech', { token: c.key, json: { voice: voice.id, input: 'and on v2' } });
    assert.equal(v2.status, 200);
    const listed = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: c.key });
    assert.equal(listed.body.data[0].requires_verification, false, 'cloned with a consent');

    const deleted = await openai.audio.voices.delete(voice.id);
    assert.deepEqual(deleted, { id: voice.id, object: 'audio.voice.deleted', deleted: true });
    await assert.rejects(openai.audio.speech.create({ model: 'sim-speech-1', voice: voice.id, input: 'gone' }), OpenAI.NotFoundError);
    assert.equal((await openai.audio.voiceConsents.retrieve(consent.id)).id, consent.id, 'the consent stays');

    const gone = await openai.audio.voiceConsents.delete(consent.id);
    assert.deepEqual(gone, { id: consent.id, object: 'audio.voice_consent', deleted: true });
    await assert.rejects(openai.audio.voiceConsents.retrieve(consent.id), OpenAI.NotFoundError);
    await assertAuditHolds(stack);
  });

  test('list pages with the auto-paging iterator; another workspace cannot see or use a consent', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(stack, c.key);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await openai.audio.voiceConsents.create({ recording: await recording(), name: `c${i}`, language: 'fr' })).id);
    const seen: string[] = [];
    for await (const k of openai.audio.voiceConsents.list({ limit: 2 })) seen.push(k.id);
    assert.deepEqual(seen, [...ids].reverse());

    const other = client(stack, (await newCustomer(stack, 10)).key);
    await assert.rejects(other.audio.voiceConsents.retrieve(ids[0]!), OpenAI.NotFoundError);
    await assert.rejects(
      other.audio.voices.create({ name: 'stolen', audio_sample: await toFile(wav(), 's.wav'), consent: ids[0]! }),
      (e: any) => e instanceof OpenAI.NotFoundError && e.param === 'consent',
    );
    await assert.rejects(
      openai.audio.voiceConsents.create({ recording: await recording(), name: 'x', language: 'not a tag' }),
      OpenAI.BadRequestError,
    );
    await assert.rejects(
      openai.audio.voiceConsents.create({ recording: await toFile(Buffer.from('not audio at all'), 'x.txt'), name: 'x', language: 'en' }),
      OpenAI.APIError,
    );
    await assert.rejects(openai.audio.voices.delete('simvoice_nothing'), OpenAI.NotFoundError);
  });

  test('/v2 clones take a consent part; with VOICE_CONSENT_REQUIRED a clone without one is 400 consent_required', async () => {
    const clone = async (s: Stack, key: string, consent?: string) => {
      const fd = new FormData();
      fd.append('name', 'v');
      fd.append('file', new Blob([new Uint8Array(wav())], { type: 'audio/wav' }), 'sample.wav');
      if (consent) fd.append('consent', consent);
      const res = await fetch(`${s.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: fd });
      return { status: res.status, body: (await res.json()) as any };
    };
    const lax = await newCustomer(stack, 1);
    const without = await clone(stack, lax.key);
    assert.equal(without.status, 200);
    assert.equal(without.body.requires_verification, true, 'no consent: requires verification');

    const c = await newCustomer(strict, 1);
    const refused = await clone(strict, c.key);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, 'consent_required');
    assert.equal(refused.body.error.param, 'consent');
    const consent = await client(strict, c.key).audio.voiceConsents.create({ recording: await recording(), name: 'me', language: 'de' });
    const ok = await clone(strict, c.key, consent.id);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.requires_verification, false);
  });
});
