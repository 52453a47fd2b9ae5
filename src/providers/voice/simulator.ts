// The simulated voice provider (what serves voices when no ElevenLabs key is set): clones instantly and speaks with a real, synthetic
// WAV (or raw PCM) file. Like a remote provider, its state is not in our process: voices live in
// Postgres (schema `simulator`, which nothing else reads), so they survive a restart of the service.
//
// Speech is deterministic: 16-bit PCM mono at 22.05 kHz, SAMPLES_PER_CHAR samples per character of
// input, one short tone per character whose pitch derives from the voice and the character
// (whitespace and punctuation are silence). The same request always gives the same bytes.
//
// Faults can be injected for tests and demos (`injectFaults`): the next n calls of an operation fail
// as the provider would, `rejected` (a 400 with the message) or `unavailable` (unreachable).
import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Db, PreparedStatement } from '../../db/pool.js';
import { COUNT_PROVIDER_CALL } from '../simulator-usage.js';
import { encodeWav } from '../../media/wav.js';
import { voiceProvider } from '../descriptor.js';
import { evenlyTimed, wordSpans } from './speech-pieces.js';
import {
  VoiceProviderError,
  type ClonedVoice,
  type SpeechRequest,
  type SynthesizedSpeech,
  type TimedSpeechPiece,
  type VoiceProvider,
  type VoiceSample,
} from './types.js';

export const SIM_SAMPLE_RATE_HZ = 22_050;
/** 50 ms of audio per character. */
export const SIM_SAMPLES_PER_CHAR = 1_102;
export const SIM_PRESET_VOICES = ['sim-narrator', 'sim-bright', 'sim-deep'] as const;
export const SIM_PCM_CONTENT_TYPE = `audio/pcm;rate=${SIM_SAMPLE_RATE_HZ};channels=1;encoding=s16le`;
/**
 * A streamed synthesis hands out this many characters of speech at a time, one chunk per
 * SIM_STREAM_CHUNK_MS (like a remote provider, the whole takes time).
 */
export const SIM_STREAM_CHUNK_CHARS = 20;
export const SIM_STREAM_CHUNK_MS = 20;

export type SimulatedVoiceOperation = 'clone' | 'delete' | 'speech';

/** The synthetic speech of `text` in `voice_id`: SIM_SAMPLES_PER_CHAR samples per code point. */
export function synthesizeTones(voice_id: string, text: string, speed = 1): Int16Array {
  const chars = [...text];
  const perChar = Math.max(1, Math.round(SIM_SAMPLES_PER_CHAR / speed));
  const samples = new Int16Array(chars.length * perChar);
  const h = createHash('sha256').update(voice_id).digest();
  const baseHz = 110 + (h.readUInt16BE(0) % 220); // 110..329 Hz: the voice's "register"
  const ramp = Math.min(Math.floor(SIM_SAMPLE_RATE_HZ * 0.005), Math.floor(perChar / 2)); // 5 ms fade in/out: no clicks
  const amplitude = 0.3 * 32767;
  for (const [i, ch] of chars.entries()) {
    if (/[\s\p{P}]/u.test(ch)) continue; // silence
    const semitones = ch.codePointAt(0)! % 24;
    const hz = baseHz * 2 ** (semitones / 12);
    const offset = i * perChar;
    for (let n = 0; n < perChar; n++) {
      const envelope = Math.min(1, n / ramp, (perChar - 1 - n) / ramp);
      samples[offset + n] = Math.round(amplitude * envelope * Math.sin((2 * Math.PI * hz * n) / SIM_SAMPLE_RATE_HZ));
    }
  }
  return samples;
}

export class SimulatedVoiceProvider implements VoiceProvider {
  readonly name = 'simulator';
  readonly configured = true;
  readonly pcm_rate_hz = SIM_SAMPLE_RATE_HZ;

  constructor(private readonly db: Db) {}

  presetVoices(): readonly string[] {
    return SIM_PRESET_VOICES;
  }

  async cloneVoice(input: { name: string; samples: VoiceSample[] }): Promise<ClonedVoice> {
    await this.maybeFail('clone');
    if (input.samples.length === 0) throw new VoiceProviderError('rejected', 'at least one audio sample is required');
    const voice_id = `simvoice_${randomBytes(10).toString('hex')}`;
    const bytes = input.samples.reduce((sum, s) => sum + s.data.length, 0);
    await this.query('INSERT INTO simulator.voices (voice_id, name, samples, sample_bytes) VALUES ($1, $2, $3, $4)', [
      voice_id,
      input.name,
      input.samples.length,
      bytes,
    ]);
    return { voice_id, requires_verification: false };
  }

  async deleteVoice(voice_id: string): Promise<void> {
    await this.maybeFail('delete');
    await this.query('DELETE FROM simulator.voices WHERE voice_id = $1', [voice_id]);
  }

  async synthesize(req: SpeechRequest): Promise<SynthesizedSpeech> {
    await this.query(COUNT_PROVIDER_CALL, ['speech']);
    await this.maybeFail('speech');
    if (!SIM_PRESET_VOICES.includes(req.voice_id as (typeof SIM_PRESET_VOICES)[number]) && !(await this.hasVoice(req.voice_id))) {
      throw new VoiceProviderError('rejected', `voice "${req.voice_id}" does not exist`);
    }
    if (req.text.length === 0) throw new VoiceProviderError('rejected', 'text must not be empty');
    const samples = synthesizeTones(req.voice_id, req.text, req.speed);
    if (req.format === 'pcm') {
      return { audio: Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength), content_type: SIM_PCM_CONTENT_TYPE };
    }
    return { audio: encodeWav(samples, SIM_SAMPLE_RATE_HZ), content_type: 'audio/wav' };
  }

  /** The same speech as `synthesize` in PCM, SIM_STREAM_CHUNK_CHARS characters per chunk, paced. */
  async *synthesizeStream(req: Omit<SpeechRequest, 'format'>): AsyncIterable<Buffer> {
    const chars = [...req.text];
    // Checks and faults as a whole synthesis has them, before the first byte.
    const first = await this.synthesize({ ...req, text: chars.slice(0, SIM_STREAM_CHUNK_CHARS).join(''), format: 'pcm' });
    yield first.audio;
    for (let i = SIM_STREAM_CHUNK_CHARS; i < chars.length; i += SIM_STREAM_CHUNK_CHARS) {
      await new Promise((resolve) => setTimeout(resolve, SIM_STREAM_CHUNK_MS));
      const samples = synthesizeTones(req.voice_id, chars.slice(i, i + SIM_STREAM_CHUNK_CHARS).join(''), req.speed);
      yield Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
    }
  }

  /** The same stream with its words' timings: 50 ms per character (at speed 1), as the tones are made. */
  async *synthesizeStreamWithTimestamps(req: Omit<SpeechRequest, 'format'>): AsyncIterable<TimedSpeechPiece> {
    const spans = wordSpans(req.text);
    const perChar = Math.max(1, Math.round(SIM_SAMPLES_PER_CHAR / (req.speed ?? 1)));
    let chars_sent = 0;
    let next = 0;
    for await (const pcm of this.synthesizeStream(req)) {
      yield { pcm };
      chars_sent += pcm.length / 2 / perChar;
      const from = next;
      while (next < spans.length && spans[next]!.to <= chars_sent) next++;
      if (next > from) yield { words: evenlyTimed(spans.slice(from, next), perChar / SIM_SAMPLE_RATE_HZ) };
    }
  }

  async hasVoice(voice_id: string): Promise<boolean> {
    const r = await this.query('SELECT 1 FROM simulator.voices WHERE voice_id = $1', [voice_id]);
    return r.rowCount === 1;
  }

  /** The next `count` calls of `operation` fail with `kind` (shared by every process on this database). */
  async injectFaults(
    operation: SimulatedVoiceOperation,
    fault: { kind: 'rejected' | 'unavailable'; count: number; message?: string },
  ): Promise<void> {
    const message =
      fault.message ??
      (fault.kind === 'rejected' ? `the simulated provider rejected the ${operation}` : 'the simulated provider is unavailable');
    await this.db.query(
      `INSERT INTO simulator.voice_faults (operation, kind, message, remaining) VALUES ($1, $2, $3, $4)
       ON CONFLICT (operation) DO UPDATE SET kind = EXCLUDED.kind, message = EXCLUDED.message, remaining = EXCLUDED.remaining`,
      [operation, fault.kind, message, fault.count],
    );
  }

  /** Faults of `operation` not yet consumed. */
  async pendingFaults(operation: SimulatedVoiceOperation): Promise<number> {
    const r = await this.db.query<{ remaining: number }>('SELECT remaining FROM simulator.voice_faults WHERE operation = $1', [operation]);
    return r.rows[0]?.remaining ?? 0;
  }

  private async maybeFail(operation: SimulatedVoiceOperation): Promise<void> {
    const r = await this.query<{ kind: 'rejected' | 'unavailable'; message: string }>(
      `UPDATE simulator.voice_faults SET remaining = remaining - 1 WHERE operation = $1 AND remaining > 0 RETURNING kind, message`,
      [operation],
    );
    const fault = r.rows[0];
    if (fault) throw new VoiceProviderError(fault.kind, fault.message);
  }

  /** The simulator's storage failing is, to its callers, a provider that cannot be reached. */
  private async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    sql: string | PreparedStatement,
    params: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.db.query<R>(typeof sql === 'string' ? { text: sql, values: params } : { ...sql, values: params });
    } catch {
      throw new VoiceProviderError('unavailable', 'the simulated voice provider could not be reached');
    }
  }
}

/** The simulated voice provider (VOICE_PROVIDER=simulator, the default while the simulator is on). */
export const simulatorVoiceDescriptor = voiceProvider({
  kind: 'voice',
  name: 'simulator',
  env: {},
  settings: () => ({}),
  build: (_settings, { db }) => new SimulatedVoiceProvider(db),
  capabilities: {
    preset_voices: SIM_PRESET_VOICES,
    pcm_rate_hz: SIM_SAMPLE_RATE_HZ,
    formats: ['wav', 'pcm'],
    example_voice: SIM_PRESET_VOICES[0],
  },
});
