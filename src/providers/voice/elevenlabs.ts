// The ElevenLabs voice provider: instant voice cloning, deletion and text to speech over ElevenLabs'
// REST API (Node's fetch and FormData; no SDK). Wire format, from ElevenLabs' API reference:
//
//   clone   POST   /v1/voices/add                 multipart/form-data: `name`, one `files` part per
//                                                 sample -> 200 {"voice_id", "requires_verification"}
//   delete  DELETE /v1/voices/{voice_id}          -> 200 {"status": "ok"}
//   speech  POST   /v1/text-to-speech/{voice_id}?output_format=pcm_22050
//                                                 JSON {"text", "model_id"} -> 200 audio bytes
//   context GET    /v1/text-to-speech/{voice_id}/stream-input (a WebSocket: text in as it comes, audio
//                                                 and its alignment out; ./elevenlabs-stream-input.ts)
//   stream  POST   /v1/text-to-speech/{voice_id}/stream?output_format=pcm_22050
//                                                 the same JSON -> 200 audio bytes in a chunked body,
//                                                 sent while they are made; errors as speech's
//
// Every request carries the account's key in the `xi-api-key` header. Errors come back as JSON:
// `{"detail": {"status": "<code>", "message": "..."}}` (400/401/403/404/429/5xx) or, for a request
// that fails validation, 422 `{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`.
//
// How answers map onto VoiceProviderError (types.ts):
//   2xx                                  success; a 2xx whose body is not what the API documents
//                                        (malformed JSON, fields missing) is `unavailable`
//   400, 404, 422, other 4xx             `rejected` with the provider's message (our 400)
//   401, 403                             about OUR key or account, not the customer's request:
//                                        `unavailable`, account `credentials` (our 503) with a generic
//                                        message (no provider text, never the key)
//   `quota_exceeded` (a 401 or 400)      the account's character quota is used up: `unavailable`,
//                                        account `quota_exhausted` (our 503; the plan's figures are
//                                        the operator's, logged, never shown to the customer)
//   400 `voice_limit_reached`            the account's voice slots are all taken: `unavailable`,
//                                        account `voice_slots_full` (our 503, logged)
//   408, 429, 5xx, 3xx                   `unavailable` (our 503; deletions retry), with the provider's
//                                        code and message and, when sent, Retry-After in seconds
//   timeout, network failure             `unavailable`
//   DELETE answered 404 (or 400 voice_not_found): the voice is already gone, which is success, so
//   the durable deletion is idempotent.
//
// Speech is always requested as 16-bit mono PCM at 22.05 kHz (`pcm_22050`, offered on every plan):
// `pcm` hands it out as is, `wav` wraps it in a RIFF/WAVE header here. Content types are the
// simulator's, so a client sees the same thing from either provider.
//
// A streamed synthesis (`synthesizeStream`) answers a refusal or failure before any audio exactly as
// `synthesize` does, thrown before the first chunk. Once audio flows, a body that breaks off, stalls past
// the speech time limit (the whole exchange's) or grows beyond ELEVENLABS_SPEECH_BYTES_MAX is
// `unavailable`, thrown after the chunks already handed out. Network chunks may split a 16-bit sample;
// chunks are handed out whole samples only.
//
// The API key lives in a private field: it is sent in the header and nowhere else, is never part of
// an error message (any message is scrubbed of it, to be sure) and is never logged.
import { ERROR_BODY_BYTES_MAX, clipMessage, isJsonObject, parseJsonBody, readCapped, readPrefix, retryAfterMs } from '../http-body.js';
import { pcmToWav } from '../../media/wav.js';
import type { AudioFormat } from '../../media/audio-sniff.js';
import {
  type ClonedVoice,
  type SpeechRequest,
  type SynthesizedSpeech,
  type TimedSpeechPiece,
  type VoiceProvider,
  type VoiceSample,
  type ProviderSpeechContext,
  type SpeechContextRequest,
} from './types.js';
import { streamInputContext } from './elevenlabs-stream-input.js';
import { ElevenLabsError, ELEVENLABS_OUTPUT_FORMAT, ELEVENLABS_SAMPLE_RATE_HZ } from './elevenlabs-wire.js';
export { ElevenLabsError, ELEVENLABS_OUTPUT_FORMAT, ELEVENLABS_SAMPLE_RATE_HZ } from './elevenlabs-wire.js';
import { credential, hideSecret, voiceProvider } from '../descriptor.js';
import { ConfigError } from '../../config-error.js';
import { CharacterWords, wholeSamples } from './speech-pieces.js';
import { z } from 'zod';

export const ELEVENLABS_DEFAULT_BASE_URL = 'https://api.elevenlabs.io';
export const ELEVENLABS_DEFAULT_MODEL_ID = 'eleven_multilingual_v2';
export const ELEVENLABS_PCM_CONTENT_TYPE = `audio/pcm;rate=${ELEVENLABS_SAMPLE_RATE_HZ};channels=1;encoding=s16le`;
/** The most audio a synthesis takes (and the most of any answer body read): 30 minutes of PCM, far beyond what the longest input speaks. */
export const ELEVENLABS_SPEECH_BYTES_MAX = 30 * 60 * ELEVENLABS_SAMPLE_RATE_HZ * 2;

/** ElevenLabs' current default ("premade") voices, usable by every account without cloning. */
export const ELEVENLABS_PRESET_VOICES = [
  'Xb7hH8MSUJpSbSDYk0k2', // Alice
  '9BWtsMINqrJLrRacOk9x', // Aria
  'pqHfZKP75CvOlQylNhV4', // Bill
  'nPczCjzI2devNBz1zQrb', // Brian
  'N2lVS1w4EtoT3dr4eOWO', // Callum
  'IKne3meq5aSn9XLyUdCD', // Charlie
  'XB0fDUnXU5powFXDhCwa', // Charlotte
  'iP95p4xoKVk53GoZ742B', // Chris
  'onwK4e9ZLuTAKqWW03F9', // Daniel
  'cjVigY5qzO86Huf0OWal', // Eric
  'JBFqnCBsd6RMkjVDRZzb', // George
  'cgSgspJ2msm6clMCkdW9', // Jessica
  'FGY2WhTYpPnrIDTdsKH5', // Laura
  'TX3LPaxmHKxFdv7VOQHJ', // Liam
  'pFZP5JQG7iQjIQuC4Bku', // Lily
  'XrExE9yKIg1WjnnlVkGX', // Matilda
  'SAz9YHcvj6GT2YYXdXww', // River
  'CwhRBWXzGAHq8TQ4Fs17', // Roger
  'EXAVITQu4vr4xnSDxMaL', // Sarah
  'bIHbv24MWmeRgasZH58o', // Will
] as const;

export type ElevenLabsOperation = 'clone' | 'delete' | 'speech';

/** Per-request time limits: the whole exchange, body included. A deletion stays under the activity's 30 s. */
export const ELEVENLABS_DEFAULT_TIMEOUTS_MS: Readonly<Record<ElevenLabsOperation, number>> = {
  clone: 60_000,
  delete: 20_000,
  speech: 120_000,
};

export interface ElevenLabsOptions {
  apiKey: string;
  baseUrl?: string;
  modelId?: string;
  timeoutsMs?: Partial<Record<ElevenLabsOperation, number>>;
}

const FILE_EXTENSIONS: Readonly<Record<AudioFormat, string>> = {
  wav: 'wav',
  mp3: 'mp3',
  aac: 'aac',
  flac: 'flac',
  ogg: 'ogg',
  m4a: 'm4a',
  webm: 'webm',
};

const OPERATION_LABELS: Readonly<Record<ElevenLabsOperation, string>> = {
  clone: 'voice cloning',
  delete: 'voice deletion',
  speech: 'text to speech',
};

/** `detail.status` codes with which ElevenLabs says a voice does not exist (a 404 now; a 400 in older answers). */
const VOICE_GONE_CODES = new Set(['voice_not_found', 'voice_does_not_exist']);

/** The API key format the header can carry: printable ASCII, no spaces. */
export const isValidElevenLabsApiKey = (key: string) => /^[\x21-\x7e]+$/.test(key);

/** The base URL, or why it cannot be used: https (the key goes with every request), plain http only to this machine. */
export function checkElevenLabsBaseUrl(raw: string): { url: string } | { error: string } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { error: 'must be an absolute URL such as https://api.elevenlabs.io' };
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && loopback)) {
    return { error: 'must use https (the API key is sent with every request); plain http only to localhost' };
  }
  if (u.username || u.password || u.search || u.hash) return { error: 'must not contain credentials, a query or a fragment' };
  return { url: u.toString().replace(/\/+$/, '') };
}

export class ElevenLabsVoiceProvider implements VoiceProvider {
  readonly name = 'elevenlabs';
  readonly configured = true;
  readonly pcm_rate_hz = ELEVENLABS_SAMPLE_RATE_HZ;
  readonly baseUrl: string;
  readonly modelId: string;
  readonly timeoutsMs: Readonly<Record<ElevenLabsOperation, number>>;
  readonly #apiKey: string;

  constructor(opts: ElevenLabsOptions) {
    // src/config.ts checks these at startup with one-line errors; this only backs it up.
    if (!opts.apiKey || !isValidElevenLabsApiKey(opts.apiKey)) {
      throw new Error('ELEVENLABS_API_KEY must be set to an ElevenLabs API key (printable characters, no spaces)');
    }
    const base = checkElevenLabsBaseUrl(opts.baseUrl ?? ELEVENLABS_DEFAULT_BASE_URL);
    if ('error' in base) throw new Error(`ELEVENLABS_BASE_URL ${base.error}`);
    this.#apiKey = opts.apiKey;
    this.baseUrl = base.url;
    this.modelId = opts.modelId ?? ELEVENLABS_DEFAULT_MODEL_ID;
    this.timeoutsMs = { ...ELEVENLABS_DEFAULT_TIMEOUTS_MS, ...opts.timeoutsMs };
  }

  presetVoices(): readonly string[] {
    return ELEVENLABS_PRESET_VOICES;
  }

  async cloneVoice(input: { name: string; samples: VoiceSample[] }): Promise<ClonedVoice> {
    if (input.samples.length === 0) throw new ElevenLabsError('rejected', 'at least one audio sample is required');
    const form = new FormData();
    form.append('name', input.name);
    // File names are ours (the client's are not trusted); the extension names the sniffed format.
    input.samples.forEach((s, i) => {
      form.append('files', new Blob([new Uint8Array(s.data)], { type: s.content_type }), `sample-${i + 1}.${FILE_EXTENSIONS[s.format]}`);
    });
    const { res, body } = await this.exchange('clone', 'POST', '/v1/voices/add', { body: form, headers: { accept: 'application/json' } });
    if (!res.ok) throw this.failure('clone', res, body);
    const json = parseJsonBody(body);
    const voice_id =
      isJsonObject(json) && typeof json['voice_id'] === 'string' && /^[A-Za-z0-9_-]{1,128}$/.test(json['voice_id'])
        ? json['voice_id']
        : null;
    const requires_verification = isJsonObject(json) ? json['requires_verification'] : undefined;
    if (voice_id === null || typeof requires_verification !== 'boolean') {
      // A voice it did create but answered unreadably would be orphaned: remove it, best effort.
      if (voice_id !== null) await this.deleteVoice(voice_id).catch(() => {});
      throw new ElevenLabsError(
        'unavailable',
        malformed('clone', res.status, json === undefined ? 'not JSON' : 'voice_id or requires_verification missing'),
        {
          status: res.status,
        },
      );
    }
    return { voice_id, requires_verification };
  }

  async deleteVoice(voice_id: string): Promise<void> {
    const { res, body } = await this.exchange('delete', 'DELETE', `/v1/voices/${encodeURIComponent(voice_id)}`, {
      headers: { accept: 'application/json' },
    });
    if (res.status === 404) return; // already gone: deleted before, or never there
    if (!res.ok) {
      const failure = this.failure('delete', res, body);
      if (res.status === 400 && failure.details.code && VOICE_GONE_CODES.has(failure.details.code)) return;
      throw failure;
    }
    if (!isJsonObject(parseJsonBody(body))) {
      throw new ElevenLabsError('unavailable', malformed('delete', res.status, 'not a JSON object'), { status: res.status });
    }
  }

  async synthesize(req: SpeechRequest): Promise<SynthesizedSpeech> {
    const path = `/v1/text-to-speech/${encodeURIComponent(req.voice_id)}?output_format=${ELEVENLABS_OUTPUT_FORMAT}`;
    const { res, body } = await this.exchange('speech', 'POST', path, {
      body: JSON.stringify({ text: req.text, model_id: this.modelId }),
      headers: { 'content-type': 'application/json' },
    });
    if (!res.ok) throw this.failure('speech', res, body);
    if ((res.headers.get('content-type') ?? '').includes('json')) {
      throw new ElevenLabsError('unavailable', malformed('speech', res.status, 'JSON instead of audio'), { status: res.status });
    }
    // 16-bit samples: an odd trailing byte is not a sample.
    const pcm = body.subarray(0, body.length - (body.length % 2));
    if (req.format === 'pcm') return { audio: pcm, content_type: ELEVENLABS_PCM_CONTENT_TYPE };
    return { audio: pcmToWav(pcm, ELEVENLABS_SAMPLE_RATE_HZ), content_type: 'audio/wav' };
  }

  /**
   * The speech as PCM while ElevenLabs makes it, chunk by chunk, each a whole number of samples. Ends
   * the request when the caller stops reading early.
   */
  synthesizeStream(req: Omit<SpeechRequest, 'format'>): AsyncIterable<Buffer> {
    return wholeSamples(this.streamBody(`/v1/text-to-speech/${encodeURIComponent(req.voice_id)}/stream`, req, 'audio'));
  }

  /**
   * The speech as PCM with its words' timings, from the stream with timestamps: newline-separated JSON objects
   * `{"audio_base64", "alignment": {"characters", "character_start_times_seconds", "character_end_times_seconds"}
   * | null}`, the times from the start of the audio; the characters are grouped into words (white space ends one).
   */
  async *synthesizeStreamWithTimestamps(req: Omit<SpeechRequest, 'format'>): AsyncIterable<TimedSpeechPiece> {
    const body = this.streamBody(`/v1/text-to-speech/${encodeURIComponent(req.voice_id)}/stream/with-timestamps`, req, 'json');
    const words = new CharacterWords();
    let audio_bytes = 0;
    const audio_s = () => audio_bytes / 2 / ELEVENLABS_SAMPLE_RATE_HZ;
    const pcm = wholeSamplesOf();
    for await (const line of jsonLines(body)) {
      const piece = parseJsonBody(line);
      if (!isJsonObject(piece))
        throw new ElevenLabsError('unavailable', malformed('speech', 200, 'a line of the stream is not a JSON object'));
      if (typeof piece['audio_base64'] === 'string') {
        const samples = pcm(Buffer.from(piece['audio_base64'], 'base64'));
        if (samples.length > 0) {
          audio_bytes += samples.length;
          yield { pcm: samples };
        }
      }
      const a = piece['alignment'];
      if (isJsonObject(a) && Array.isArray(a['characters'])) {
        const done = words.push(
          a['characters'].map(String),
          numbers(a['character_start_times_seconds']),
          numbers(a['character_end_times_seconds']),
          audio_s(),
        );
        if (done) yield { words: done };
      }
    }
    const last = words.end(audio_s());
    if (last) yield { words: last };
  }

  /**
   * A streamed request's body, chunk by chunk (at most ELEVENLABS_SPEECH_BYTES_MAX): a refusal or failure
   * before any audio is thrown as `synthesize`'s; a body that breaks off or stalls past the speech time limit
   * is `unavailable`, thrown after what was handed out. Ends the request when the caller stops reading early.
   */
  private async *streamBody(route: string, req: Omit<SpeechRequest, 'format'>, expected: 'audio' | 'json'): AsyncIterable<Uint8Array> {
    const path = `${route}?output_format=${ELEVENLABS_OUTPUT_FORMAT}`;
    const timeout = AbortSignal.timeout(this.timeoutsMs.speech);
    const stopped = new AbortController();
    const init = { body: JSON.stringify({ text: req.text, model_id: this.modelId }), headers: { 'content-type': 'application/json' } };
    let res: Response;
    try {
      res = await this.send('POST', path, init, AbortSignal.any([timeout, stopped.signal]));
    } catch (err) {
      throw this.transportFailure('speech', timeout, err);
    }
    const reader = res.body?.getReader();
    try {
      if (!res.ok) throw this.failure('speech', res, reader ? await readPrefix(reader, ERROR_BODY_BYTES_MAX) : Buffer.alloc(0));
      if (expected === 'audio' && (res.headers.get('content-type') ?? '').includes('json')) {
        throw new ElevenLabsError('unavailable', malformed('speech', res.status, 'JSON instead of audio'), { status: res.status });
      }
      if (!reader) return;
      let received_bytes = 0;
      for (;;) {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (err) {
          throw this.transportFailure('speech', timeout, err, `broke off the text to speech stream after ${received_bytes} bytes`);
        }
        if (next.done) return;
        received_bytes += next.value.byteLength;
        if (received_bytes > ELEVENLABS_SPEECH_BYTES_MAX) {
          throw new ElevenLabsError(
            'unavailable',
            `ElevenLabs streamed more than ${ELEVENLABS_SPEECH_BYTES_MAX} bytes of speech; the stream was abandoned`,
            { status: res.status },
          );
        }
        yield next.value;
      }
    } finally {
      // Stopped early (the caller's choice, or a failure above): the request is ended, not left running.
      stopped.abort();
      await reader?.cancel().catch(() => {});
    }
  }

  /** An utterance over ElevenLabs' WebSocket of partial text input (./elevenlabs-stream-input.ts). */
  openContext(req: SpeechContextRequest): ProviderSpeechContext {
    return streamInputContext({ baseUrl: this.baseUrl, apiKey: this.#apiKey, modelId: this.modelId, req });
  }

  /**
   * One request and its whole body (at most ELEVENLABS_SPEECH_BYTES_MAX, the longest speech), within the
   * operation's time limit. Transport failures, and a larger body, are `unavailable`.
   */
  private async exchange(
    op: ElevenLabsOperation,
    method: string,
    path: string,
    init: { body?: FormData | string; headers?: Record<string, string> },
  ): Promise<{ res: Response; body: Buffer }> {
    const signal = AbortSignal.timeout(this.timeoutsMs[op]);
    try {
      const res = await this.send(method, path, init, signal);
      return { res, body: await readCapped(res, ELEVENLABS_SPEECH_BYTES_MAX, `ElevenLabs ${OPERATION_LABELS[op]}`, 'invalid_response') };
    } catch (err) {
      throw this.transportFailure(op, signal, err);
    }
  }

  /** The request, answered up to its headers. */
  private send(
    method: string,
    path: string,
    init: { body?: FormData | string; headers?: Record<string, string> },
    signal: AbortSignal,
  ): Promise<Response> {
    return fetch(this.baseUrl + path, {
      method,
      headers: { 'xi-api-key': this.#apiKey, 'user-agent': 'video-voice-api', ...init.headers },
      ...(init.body !== undefined ? { body: init.body } : {}),
      // A redirect would carry the key to wherever it points: not followed (answered as unavailable).
      redirect: 'manual',
      signal,
    });
  }

  /** A request or body that failed in transport: past its time limit (`timeout` fired), or the network's failure. */
  private transportFailure(
    op: ElevenLabsOperation,
    timeout: AbortSignal,
    err: unknown,
    what = `could not be reached for ${OPERATION_LABELS[op]}`,
  ): ElevenLabsError {
    if (timeout.aborted) {
      return new ElevenLabsError(
        'unavailable',
        `ElevenLabs did not complete the ${OPERATION_LABELS[op]} within ${this.timeoutsMs[op] / 1000} s`,
      );
    }
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const reason =
      typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : (err as Error).message;
    return new ElevenLabsError('unavailable', this.scrub(`ElevenLabs ${what}: ${reason}`));
  }

  /** The error for a non-2xx answer (see the table at the top). */
  private failure(op: ElevenLabsOperation, res: Response, body: Buffer): ElevenLabsError {
    const status = res.status;
    const said = providerSaid(body);
    const code = said.code;
    const retry_after_ms = retryAfterMs(res.headers.get('retry-after'));
    const retryAfterSeconds = retry_after_ms === undefined ? undefined : Math.ceil(retry_after_ms / 1000);
    const details = { status, ...(code ? { code } : {}), ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) };
    if (code === 'quota_exceeded' || code === 'voice_limit_reached') {
      // The operator's plan is used up (characters) or full (voice slots): not the customer's request.
      const account = code === 'quota_exceeded' ? 'quota_exhausted' : 'voice_slots_full';
      const message =
        `ElevenLabs refused the ${OPERATION_LABELS[op]}: the account's ` +
        `${code === 'quota_exceeded' ? 'quota is used up' : 'voice slots are all taken'} (HTTP ${status} ` +
        `${code})${said.message ? `: ${said.message}` : ''}`;
      return new ElevenLabsError('unavailable', this.scrub(message), details, account);
    }
    if (status === 401 || status === 403) {
      // Our key or account, not the customer's request: the service is misconfigured. No provider text.
      return new ElevenLabsError(
        'unavailable',
        `the voice provider refused the service's credentials (HTTP ${status}); an operator must check ELEVENLABS_API_KEY`,
        details,
        'credentials',
      );
    }
    const rejected = status >= 400 && status < 500 && status !== 408 && status !== 429;
    if (rejected) {
      const message = said.message ?? `ElevenLabs refused the ${OPERATION_LABELS[op]} (HTTP ${status}${code ? ` ${code}` : ''})`;
      return new ElevenLabsError('rejected', this.scrub(message), details);
    }
    const what =
      status >= 300 && status < 400
        ? `redirected the ${OPERATION_LABELS[op]} (HTTP ${status}; not followed)`
        : `answered HTTP ${status}${code ? ` (${code})` : ''} to the ${OPERATION_LABELS[op]}`;
    const message =
      `ElevenLabs ${what}` +
      (said.message ? `: ${said.message}` : '') +
      (retryAfterSeconds !== undefined ? `; retry after ${retryAfterSeconds} s` : '');
    return new ElevenLabsError('unavailable', this.scrub(message), details);
  }

  private scrub(message: string): string {
    return message.split(this.#apiKey).join('[redacted]');
  }
}

/** Numbers of an alignment's array (anything else reads as 0). */
const numbers = (v: unknown): number[] => (Array.isArray(v) ? v.map((x) => (typeof x === 'number' && Number.isFinite(x) ? x : 0)) : []);

/** A cutter of PCM into whole 16-bit samples across pieces: each call gives the whole samples so far. */
function wholeSamplesOf(): (b: Buffer) => Buffer {
  let odd: Buffer | null = null;
  return (b) => {
    const chunk = odd ? Buffer.concat([odd, b]) : b;
    const whole = chunk.length - (chunk.length % 2);
    odd = whole < chunk.length ? Buffer.from(chunk.subarray(whole)) : null;
    return chunk.subarray(0, whole);
  };
}

/** The lines of a body (newline-separated; blank lines skipped). */
async function* jsonLines(body: AsyncIterable<Uint8Array>): AsyncIterable<Buffer> {
  let rest = Buffer.alloc(0);
  for await (const chunk of body) {
    rest = Buffer.concat([rest, chunk]);
    for (let nl = rest.indexOf(0x0a); nl >= 0; nl = rest.indexOf(0x0a)) {
      const line = rest.subarray(0, nl);
      rest = rest.subarray(nl + 1);
      if (line.toString('utf8').trim()) yield line;
    }
  }
  if (rest.toString('utf8').trim()) yield rest;
}

const malformed = (op: ElevenLabsOperation, status: number, what: string) =>
  `ElevenLabs answered the ${OPERATION_LABELS[op]} with HTTP ${status} but an unexpected body (${what})`;

/**
 * The provider's code and message from an error body: `{"detail": {"status", "message"}}`, a 422's
 * `{"detail": [{"loc", "msg"}]}`, `{"detail": "text"}`, or a short plain-text body. An HTML page (a
 * proxy's) or anything unreadable gives no message.
 */
export function providerSaid(body: Buffer): { code?: string; message?: string } {
  const json = parseJsonBody(body);
  if (json === undefined) {
    const text = body.toString('utf8').trim();
    // Binary (a control character below tab) is not a message.
    // eslint-disable-next-line no-control-regex
    if (text.length === 0 || text.startsWith('<') || /[\x00-\x08]/.test(text)) return {};
    return { message: clipMessage(text) };
  }
  const detail = isJsonObject(json) && 'detail' in json ? json['detail'] : json;
  if (typeof detail === 'string' && detail.trim()) return { message: clipMessage(detail) };
  if (Array.isArray(detail)) {
    const parts = detail.filter(isJsonObject).map((d) => {
      const loc = Array.isArray(d['loc']) ? d['loc'].map(String).join('.') : '';
      const msg = typeof d['msg'] === 'string' ? d['msg'] : 'invalid';
      return loc ? `${loc}: ${msg}` : msg;
    });
    return parts.length ? { code: 'validation_error', message: clipMessage(parts.join('; ')) } : {};
  }
  if (isJsonObject(detail)) {
    const code = typeof detail['status'] === 'string' ? detail['status'] : typeof detail['code'] === 'string' ? detail['code'] : undefined;
    const message = typeof detail['message'] === 'string' && detail['message'].trim() ? clipMessage(detail['message']) : undefined;
    return { ...(code ? { code } : {}), ...(message ? { message } : {}) };
  }
  return {};
}

/** The ElevenLabs voice provider's settings (VOICE_PROVIDER=elevenlabs). */
export interface ElevenLabsConfig {
  /** From ELEVENLABS_API_KEY only; required when VOICE_PROVIDER=elevenlabs. Not enumerable: never serialised or logged. */
  apiKey: string | undefined;
  baseUrl: string;
  /** The ElevenLabs model (`model_id`) that speaks for the catalog's ElevenLabs speech model. */
  modelId: string;
}

const ELEVENLABS_ENV = {
  ELEVENLABS_API_KEY: credential().optional(),
  ELEVENLABS_BASE_URL: z.string().default(ELEVENLABS_DEFAULT_BASE_URL),
  ELEVENLABS_MODEL_ID: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,100}$/, 'not an ElevenLabs model id')
    .default(ELEVENLABS_DEFAULT_MODEL_ID),
};

/** ElevenLabs as the voice provider; its base URL is checked even when another provider is selected. */
export const elevenLabsDescriptor = voiceProvider({
  kind: 'voice',
  name: 'elevenlabs',
  env: ELEVENLABS_ENV,
  settings(e, { selected }): ElevenLabsConfig {
    if (selected && !e.ELEVENLABS_API_KEY) {
      throw new ConfigError('ELEVENLABS_API_KEY must be set when VOICE_PROVIDER=elevenlabs (an API key of your ElevenLabs account)');
    }
    const base = checkElevenLabsBaseUrl(e.ELEVENLABS_BASE_URL);
    if ('error' in base) throw new ConfigError(`invalid environment variable ELEVENLABS_BASE_URL: ${base.error}`);
    return hideSecret<ElevenLabsConfig>(
      { apiKey: undefined, baseUrl: base.url, modelId: e.ELEVENLABS_MODEL_ID },
      'apiKey',
      e.ELEVENLABS_API_KEY,
    );
  },
  build({ apiKey, baseUrl, modelId }) {
    if (!apiKey) throw new ConfigError('ELEVENLABS_API_KEY must be set when VOICE_PROVIDER=elevenlabs');
    return new ElevenLabsVoiceProvider({ apiKey, baseUrl, modelId });
  },
  capabilities: {
    preset_voices: ELEVENLABS_PRESET_VOICES,
    pcm_rate_hz: ELEVENLABS_SAMPLE_RATE_HZ,
    formats: ['wav', 'pcm'],
    example_voice: null,
  },
});
