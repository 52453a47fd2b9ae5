// The Cartesia voice provider: instant voice cloning, deletion and text to speech over Cartesia's REST API
// (Node's fetch and FormData; no SDK at run time). Written from Cartesia's API reference:
//   https://docs.cartesia.ai/use-the-api/api-conventions        (base URL, Bearer key, Cartesia-Version header)
//   https://docs.cartesia.ai/use-the-api/api-errors             (the JSON error object)
//   https://docs.cartesia.ai/api-reference/voices/clone         (POST /voices/clone)
//   https://docs.cartesia.ai/api-reference/voices/delete        (DELETE /voices/{id})
//   https://docs.cartesia.ai/api-reference/tts/bytes            (POST /tts/bytes)
//   https://docs.cartesia.ai/api-reference/tts/sse              (POST /tts/sse, word timestamps)
//   https://docs.cartesia.ai/api-reference/tts/websocket        (GET /tts/websocket: ./cartesia-websocket.ts)
//
//   clone   POST   /voices/clone     multipart/form-data: `clip` (one audio file), `name`, `language`
//                                    -> 200 voice metadata {"id", "name", "language", ...}
//   delete  DELETE /voices/{id}      -> 204
//   speech  POST   /tts/bytes        JSON {"model_id", "transcript", "voice": {"mode": "id", "id"},
//                                    "output_format": {"container": "raw", "encoding": "pcm_s16le",
//                                    "sample_rate"}, "language", "generation_config"?: {"speed"}}
//                                    -> 200 the raw PCM, streamed in a chunked body as it is made
//   timed   POST   /tts/sse          the same JSON with "add_timestamps": true -> server-sent events, each
//                                    `data: {...}`: {"type": "chunk", "data": base64 PCM}, {"type":
//                                    "timestamps", "word_timestamps": {"words", "start", "end"}} (seconds
//                                    from the start of the audio), then {"type": "done"}, or
//                                    {"type": "error", "status_code", "error_code", "title", "message"}
//
// Every request carries `Authorization: Bearer <CARTESIA_API_KEY>` and `Cartesia-Version` (CARTESIA_VERSION).
// Errors are `{"error_code", "title", "message", "request_id", "doc_url"?}` (from version 2026-03-01; an older
// version may answer plain text "Title: Message", read as the message).
//
// How answers map onto VoiceProviderError (types.ts), as ElevenLabs' do:
//   2xx                      success; a 2xx whose body is not what the reference documents is `unavailable`
//   400, 404, 422, other 4xx `rejected` with Cartesia's message (our 400)
//   401, 403                 our key, not the customer's request: `unavailable`, account `credentials` (our 503);
//                            the message names CARTESIA_API_KEY for the operator, never the key
//   402                      the account's credits are used up: `unavailable`, account `quota_exhausted`
//   408, 429, 5xx, 3xx       `unavailable` (our 503; deletions retry), with Retry-After when sent
//   timeout, network failure `unavailable`
//   DELETE answered 404: the voice is already gone, which is success (the durable deletion is idempotent).
//
// Cartesia takes one clip per clone: of several samples, the largest is sent. Speech is requested as 16-bit
// mono PCM at CARTESIA_SAMPLE_RATE_HZ. The API key is a private field, sent in the header only, scrubbed
// from every message.
import { ERROR_BODY_BYTES_MAX, isJsonObject, parseJsonBody, readCapped, readPrefix } from '../http-body.js';
import { pcmToWav } from '../../media/wav.js';
import {
  VoiceProviderError,
  type ClonedVoice,
  type ProviderContextConnection,
  type SpeechRequest,
  type SynthesizedSpeech,
  type TimedSpeechPiece,
  type VoiceProvider,
  type VoiceSample,
} from './types.js';
import { credential, hideSecret, secureEndpoint, voiceProvider } from '../descriptor.js';
import { ConfigError } from '../../config-error.js';
import { wholeSamples } from './speech-pieces.js';
import { CartesiaConnection } from './cartesia-websocket.js';
import {
  CARTESIA_SAMPLE_RATE_HZ,
  CartesiaError,
  LABELS,
  cartesiaRefusal,
  cartesiaSpeed,
  readWordTimestamps,
  providerSaid,
  saidOf,
  type CartesiaOperation,
} from './cartesia-wire.js';

export { CARTESIA_SAMPLE_RATE_HZ, CartesiaError, providerSaid, type CartesiaOperation };
import { z } from 'zod';

export const CARTESIA_DEFAULT_BASE_URL = 'https://api.cartesia.ai';
export const CARTESIA_DEFAULT_VERSION = '2026-03-01';
export const CARTESIA_PCM_CONTENT_TYPE = `audio/pcm;rate=${CARTESIA_SAMPLE_RATE_HZ};channels=1;encoding=s16le`;
/** The most audio a synthesis takes (and the most of any body read): 30 minutes of PCM. */
export const CARTESIA_SPEECH_BYTES_MAX = 30 * 60 * CARTESIA_SAMPLE_RATE_HZ * 2;

/** Cartesia's stock voices, usable by every account without cloning. */
export const CARTESIA_PRESET_VOICES = [
  '6ccbfb76-1fc6-48f7-b71d-91ac6298247b',
  'a0e99841-438c-4a64-b679-ae501e7d6091',
  '694f9389-aac1-45b6-b726-9d9369183238',
] as const;

export const CARTESIA_DEFAULT_TIMEOUTS_MS: Readonly<Record<CartesiaOperation, number>> = { clone: 60_000, delete: 20_000, speech: 120_000 };

export interface CartesiaOptions {
  apiKey: string;
  baseUrl?: string;
  version?: string;
  language?: string;
  timeoutsMs?: Partial<Record<CartesiaOperation, number>>;
}

type Init = { body?: FormData | string; headers?: Record<string, string> };

export class CartesiaVoiceProvider implements VoiceProvider {
  readonly name = 'cartesia';
  readonly configured = true;
  readonly pcm_rate_hz = CARTESIA_SAMPLE_RATE_HZ;
  readonly baseUrl: string;
  readonly version: string;
  readonly language: string;
  readonly timeoutsMs: Readonly<Record<CartesiaOperation, number>>;
  readonly #apiKey: string;

  constructor(opts: CartesiaOptions) {
    if (!opts.apiKey || !/^[\x21-\x7e]+$/.test(opts.apiKey)) throw new Error('CARTESIA_API_KEY must be set to a Cartesia API key');
    this.#apiKey = opts.apiKey;
    this.baseUrl = secureEndpoint('CARTESIA_BASE_URL', opts.baseUrl ?? CARTESIA_DEFAULT_BASE_URL);
    this.version = opts.version ?? CARTESIA_DEFAULT_VERSION;
    this.language = opts.language ?? 'en';
    this.timeoutsMs = { ...CARTESIA_DEFAULT_TIMEOUTS_MS, ...opts.timeoutsMs };
  }

  presetVoices(): readonly string[] {
    return CARTESIA_PRESET_VOICES;
  }

  async cloneVoice(input: { name: string; samples: VoiceSample[] }): Promise<ClonedVoice> {
    const clip = [...input.samples].sort((a, b) => b.data.length - a.data.length)[0];
    if (!clip) throw new CartesiaError('rejected', 'at least one audio sample is required');
    const form = new FormData();
    form.append('clip', new Blob([new Uint8Array(clip.data)], { type: clip.content_type }), `sample.${clip.format}`);
    form.append('name', input.name);
    form.append('language', this.language);
    const { res, body } = await this.exchange('clone', 'POST', '/voices/clone', { body: form, headers: { accept: 'application/json' } });
    if (!res.ok) throw this.failure('clone', res, body);
    const json = parseJsonBody(body);
    const id = isJsonObject(json) && typeof json['id'] === 'string' && /^[A-Za-z0-9_-]{1,128}$/.test(json['id']) ? json['id'] : null;
    if (id === null) throw new CartesiaError('unavailable', malformed('clone', res.status, 'no voice id'), { status: res.status });
    return { voice_id: id, requires_verification: false };
  }

  async deleteVoice(voice_id: string): Promise<void> {
    const { res, body } = await this.exchange('delete', 'DELETE', `/voices/${encodeURIComponent(voice_id)}`, {
      headers: { accept: '*/*' },
    });
    if (res.status === 404) return; // already gone
    if (!res.ok) throw this.failure('delete', res, body);
  }

  async synthesize(req: SpeechRequest): Promise<SynthesizedSpeech> {
    const { res, body } = await this.exchange('speech', 'POST', '/tts/bytes', this.ttsInit(req, false));
    if (!res.ok) throw this.failure('speech', res, body);
    if ((res.headers.get('content-type') ?? '').includes('json')) {
      throw new CartesiaError('unavailable', malformed('speech', res.status, 'JSON instead of audio'), { status: res.status });
    }
    const pcm = body.subarray(0, body.length - (body.length % 2));
    if (req.format === 'pcm') return { audio: pcm, content_type: CARTESIA_PCM_CONTENT_TYPE };
    return { audio: pcmToWav(pcm, CARTESIA_SAMPLE_RATE_HZ), content_type: 'audio/wav' };
  }

  /** The PCM while Cartesia makes it (/tts/bytes' chunked body), in whole samples. */
  async *synthesizeStream(req: Omit<SpeechRequest, 'format'>): AsyncIterable<Buffer> {
    for await (const piece of this.streamed('/tts/bytes', this.ttsInit(req, false), async function* (bytes) {
      for await (const b of wholeSamples(bytes)) yield { pcm: b };
    })) {
      if ('pcm' in piece) yield piece.pcm;
    }
  }

  /** The PCM and its words' timings while Cartesia makes them (/tts/sse with add_timestamps). */
  synthesizeStreamWithTimestamps(req: Omit<SpeechRequest, 'format'>): AsyncIterable<TimedSpeechPiece> {
    return this.streamed('/tts/sse', this.ttsInit(req, true), (bytes) => this.sseEvents(bytes));
  }

  /** A connection to Cartesia's WebSocket, carrying a speech socket's contexts (./cartesia-websocket.ts). */
  openContextConnection(): ProviderContextConnection {
    return new CartesiaConnection({ baseUrl: this.baseUrl, apiKey: this.#apiKey, version: this.version, language: this.language });
  }

  private ttsInit(req: Omit<SpeechRequest, 'format'>, timed: boolean): Init {
    const speed = cartesiaSpeed(req.speed);
    const body = {
      model_id: req.model,
      transcript: req.text,
      voice: { mode: 'id', id: req.voice_id },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: CARTESIA_SAMPLE_RATE_HZ },
      language: this.language,
      ...(speed !== undefined ? { generation_config: { speed } } : {}),
      ...(timed ? { add_timestamps: true } : {}),
    };
    return { body: JSON.stringify(body), headers: { 'content-type': 'application/json', accept: timed ? 'text/event-stream' : '*/*' } };
  }

  /** Cartesia's server-sent events as pieces: audio chunks and word timings; an error event is thrown. */
  private async *sseEvents(bytes: AsyncIterable<Uint8Array>): AsyncIterable<TimedSpeechPiece> {
    let text = '';
    let odd: Buffer | null = null;
    const decoder = new TextDecoder();
    for await (const chunk of bytes) {
      text += decoder.decode(chunk, { stream: true });
      for (let end = text.search(/\r?\n\r?\n/); end >= 0; end = text.search(/\r?\n\r?\n/)) {
        const block = text.slice(0, end);
        text = text.slice(end).replace(/^\r?\n\r?\n/, '');
        const data = block
          .split(/\r?\n/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart())
          .join('\n');
        if (!data) continue;
        const event = parseJsonBody(Buffer.from(data));
        if (!isJsonObject(event)) throw new CartesiaError('unavailable', 'Cartesia sent a server-sent event that is not JSON');
        if (event['type'] === 'chunk' && typeof event['data'] === 'string') {
          const pcm: Buffer = odd ? Buffer.concat([odd, Buffer.from(event['data'], 'base64')]) : Buffer.from(event['data'], 'base64');
          const whole = pcm.length - (pcm.length % 2);
          odd = whole < pcm.length ? pcm.subarray(whole) : null;
          if (whole > 0) yield { pcm: pcm.subarray(0, whole) };
        } else if (event['type'] === 'timestamps') {
          const words = readWordTimestamps(event['word_timestamps']);
          if (words) yield { words };
        } else if (event['type'] === 'done') {
          return;
        } else if (event['type'] === 'error') {
          const status = typeof event['status_code'] === 'number' ? event['status_code'] : 500;
          throw this.said('speech', status, saidOf(event), null);
        }
      }
    }
    throw new CartesiaError('unavailable', 'Cartesia ended the text to speech stream without its done event');
  }

  /**
   * A streamed request: a refusal before any audio is thrown as `synthesize`'s would be; then `read` turns the
   * body into pieces; a body that breaks off, stalls past the time limit or grows too large is `unavailable`.
   */
  private async *streamed(
    path: string,
    init: Init,
    read: (bytes: AsyncIterable<Uint8Array>) => AsyncIterable<TimedSpeechPiece>,
  ): AsyncIterable<TimedSpeechPiece> {
    const timeout = AbortSignal.timeout(this.timeoutsMs.speech);
    const stopped = new AbortController();
    let res: Response;
    try {
      res = await this.send('POST', path, init, AbortSignal.any([timeout, stopped.signal]));
    } catch (err) {
      throw this.transportFailure('speech', timeout, err);
    }
    const reader = res.body?.getReader();
    try {
      if (!res.ok) throw this.failure('speech', res, reader ? await readPrefix(reader, ERROR_BODY_BYTES_MAX) : Buffer.alloc(0));
      if (!reader) return;
      const transport = (err: unknown) => this.transportFailure('speech', timeout, err, 'broke off the text to speech stream');
      yield* read(bodyBytes(reader, transport));
    } finally {
      stopped.abort();
      await reader?.cancel().catch(() => {});
    }
  }

  private async exchange(op: CartesiaOperation, method: string, path: string, init: Init): Promise<{ res: Response; body: Buffer }> {
    const signal = AbortSignal.timeout(this.timeoutsMs[op]);
    try {
      const res = await this.send(method, path, init, signal);
      return { res, body: await readCapped(res, CARTESIA_SPEECH_BYTES_MAX, `Cartesia ${LABELS[op]}`, 'invalid_response') };
    } catch (err) {
      throw this.transportFailure(op, signal, err);
    }
  }

  private send(method: string, path: string, init: Init, signal: AbortSignal): Promise<Response> {
    return fetch(this.baseUrl + path, {
      method,
      headers: {
        authorization: `Bearer ${this.#apiKey}`,
        'cartesia-version': this.version,
        'user-agent': 'video-voice-api',
        ...init.headers,
      },
      ...(init.body !== undefined ? { body: init.body } : {}),
      redirect: 'manual', // a redirect would carry the key elsewhere
      signal,
    });
  }

  private transportFailure(
    op: CartesiaOperation,
    timeout: AbortSignal,
    err: unknown,
    what = `could not be reached for ${LABELS[op]}`,
  ): VoiceProviderError {
    if (err instanceof VoiceProviderError) return err;
    if (timeout.aborted)
      return new CartesiaError('unavailable', `Cartesia did not complete the ${LABELS[op]} within ${this.timeoutsMs[op] / 1000} s`);
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const reason =
      typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : (err as Error).message;
    return new CartesiaError('unavailable', this.scrub(`Cartesia ${what}: ${reason}`));
  }

  private failure(op: CartesiaOperation, res: Response, body: Buffer): CartesiaError {
    return this.said(op, res.status, providerSaid(body), res.headers.get('retry-after'));
  }

  /** The error for a refusal with `status` (see the table at the top). */
  private said(op: CartesiaOperation, status: number, said: { code?: string; message?: string }, retryAfter: string | null): CartesiaError {
    return cartesiaRefusal(op, status, said, retryAfter, (m) => this.scrub(m));
  }

  private scrub(message: string): string {
    return message.split(this.#apiKey).join('[redacted]');
  }
}

/** A stream body's chunks, at most CARTESIA_SPEECH_BYTES_MAX in all; a read that fails is `transport`'s error. */
async function* bodyBytes(reader: ReadableStreamDefaultReader<Uint8Array>, transport: (err: unknown) => Error): AsyncIterable<Uint8Array> {
  let received = 0;
  for (;;) {
    let next: ReadableStreamReadResult<Uint8Array>;
    try {
      next = await reader.read();
    } catch (err) {
      throw transport(err);
    }
    if (next.done) return;
    received += next.value.byteLength;
    if (received > 2 * CARTESIA_SPEECH_BYTES_MAX) {
      throw new CartesiaError(
        'unavailable',
        `Cartesia streamed more than ${2 * CARTESIA_SPEECH_BYTES_MAX} bytes; the stream was abandoned`,
      );
    }
    yield next.value;
  }
}

const malformed = (op: CartesiaOperation, status: number, what: string) =>
  `Cartesia answered the ${LABELS[op]} with HTTP ${status} but an unexpected body (${what})`;

/** The Cartesia voice provider's settings (VOICE_PROVIDERS lists cartesia). */
export interface CartesiaConfig {
  /** From CARTESIA_API_KEY only. Not enumerable: never serialised or logged. */
  apiKey: string | undefined;
  baseUrl: string;
  version: string;
  language: string;
}

const CARTESIA_ENV = {
  CARTESIA_API_KEY: credential().optional(),
  CARTESIA_BASE_URL: z.string().url().default(CARTESIA_DEFAULT_BASE_URL),
  CARTESIA_VERSION: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date such as 2026-03-01')
    .default(CARTESIA_DEFAULT_VERSION),
  CARTESIA_LANGUAGE: z
    .string()
    .regex(/^[a-z]{2}(-[A-Z]{2})?$/, 'must be a language code such as en')
    .default('en'),
};

export const cartesiaDescriptor = voiceProvider({
  kind: 'voice',
  name: 'cartesia',
  env: CARTESIA_ENV,
  settings(e, { selected }): CartesiaConfig {
    if (selected && !e.CARTESIA_API_KEY) {
      throw new ConfigError('CARTESIA_API_KEY must be set when VOICE_PROVIDERS lists cartesia (an API key of your Cartesia account)');
    }
    const baseUrl = secureEndpoint('CARTESIA_BASE_URL', e.CARTESIA_BASE_URL);
    return hideSecret<CartesiaConfig>(
      { apiKey: undefined, baseUrl, version: e.CARTESIA_VERSION, language: e.CARTESIA_LANGUAGE },
      'apiKey',
      e.CARTESIA_API_KEY,
    );
  },
  build({ apiKey, baseUrl, version, language }) {
    if (!apiKey) throw new ConfigError('CARTESIA_API_KEY must be set when VOICE_PROVIDERS lists cartesia');
    return new CartesiaVoiceProvider({ apiKey, baseUrl, version, language });
  },
  capabilities: {
    preset_voices: CARTESIA_PRESET_VOICES,
    pcm_rate_hz: CARTESIA_SAMPLE_RATE_HZ,
    formats: ['wav', 'pcm'],
    example_voice: null,
  },
});
