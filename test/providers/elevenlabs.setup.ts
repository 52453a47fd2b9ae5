// What the ElevenLabs tests share: the fake's API key, real audio samples, and readers for the
// adapter's errors, streamed chunks and WAV answers.
import assert from 'node:assert/strict';
import { encodeWav } from '../../src/media/wav.js';
import { after, before } from 'node:test';
import {
  ELEVENLABS_PRESET_VOICES,
  ElevenLabsError,
  ElevenLabsVoiceProvider,
  type ElevenLabsOperation,
} from '../../src/providers/voice/elevenlabs.js';
import { startElevenLabsFake, type ElevenLabsFake, type FakeRoute } from '../fakes/elevenlabs-fake.js';
import { VoiceProviderError, type VoiceSample } from '../../src/providers/voice/types.js';

export const KEY = 'xi-contract-test-SECRET-0123456789';

export function wavBytes(seconds = 0.25, hz = 330): Buffer {
  const samples = new Int16Array(Math.round(seconds * 22_050));
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / 22_050));
  return encodeWav(samples, 22_050);
}

export function mp3Bytes(): Buffer {
  const frame = Buffer.alloc(417);
  Buffer.from([0xff, 0xfb, 0x90, 0x64]).copy(frame);
  return Buffer.concat([frame, frame, frame]);
}

export const wavSample = (filename = 'me.wav'): VoiceSample => ({ filename, format: 'wav', content_type: 'audio/wav', data: wavBytes() });

/** The error `p` rejects with: a VoiceProviderError of `kind`, whose message never holds the key. */
export async function providerError(p: Promise<unknown>, kind: 'rejected' | 'unavailable', key = KEY): Promise<ElevenLabsError> {
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
export async function drain(chunks: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of chunks) out.push(chunk);
  return out;
}

export function parseWav(b: Buffer) {
  assert.equal(b.toString('ascii', 0, 4), 'RIFF');
  assert.equal(b.readUInt32LE(4), b.length - 8);
  assert.equal(b.toString('ascii', 8, 16), 'WAVEfmt ');
  assert.equal(b.toString('ascii', 36, 40), 'data');
  assert.equal(b.readUInt32LE(40), b.length - 44);
  return {
    format: b.readUInt16LE(20),
    channels: b.readUInt16LE(22),
    rate: b.readUInt32LE(24),
    byteRate: b.readUInt32LE(28),
    bits: b.readUInt16LE(34),
  };
}

export let fake: ElevenLabsFake;
export let el: ElevenLabsVoiceProvider;
export const TIMEOUT_MS = 1_000;

/** Registers the hooks of an adapter test: the fake started for the file, and an adapter pointed at it. */
export function useElevenLabsAdapter(): void {
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
}

export const lastRequest = () => fake.requests.at(-1)!;
export const clone = () => el.cloneVoice({ name: 'contract voice', samples: [wavSample()] });
// `stream`: the streamed synthesis, which answers every failure before its first chunk as `speech` does.
export const call: Record<ElevenLabsOperation | 'stream', () => Promise<unknown>> = {
  clone,
  delete: () => el.deleteVoice('someVoiceId000000000'),
  speech: () => el.synthesize({ model: 'eleven-multilingual-v2', voice_id: ELEVENLABS_PRESET_VOICES[0], text: 'hello', format: 'wav' }),
  stream: () => drain(el.synthesizeStream({ model: 'eleven-multilingual-v2', voice_id: ELEVENLABS_PRESET_VOICES[0], text: 'hello' })),
};
export const ROUTES: [ElevenLabsOperation | 'stream', FakeRoute][] = [
  ['clone', 'clone'],
  ['delete', 'delete'],
  ['speech', 'speech'],
  ['stream', 'stream'],
];
