// Text to speech: validate against the catalog, resolve the voice within the workspace, hold the cost,
// synthesise, keep the audio, capture the hold, and hand the audio out (src/voices/speech-billing.ts).
// The provider is called only with money held for it: at most as many calls run as the balance covers.
// A provider failure releases the hold (nothing charged). One request per (workspace, Idempotency-Key):
// a replay of a delivered request is answered from the kept audio, never by the provider, never charged
// again; while the first is in flight a replay is a 409; with another body it is a 409.
//
// The provider always makes PCM; ../media/audio-encode.ts turns it into the format asked for. The formats
// FFmpeg encodes (opus, aac, flac) take a place in the media worker's speech lane before the provider is
// called, kept until the encode is done: audio the provider made (and billed us for) always finds its
// encoder, and a full lane is a 503 with the hold released before any provider call. A streamed
// answer (`speakStream`) is held the same way before the provider is called, and its first bytes go out
// as soon as the provider's first chunk is encoded: if the provider fails before it made anything, the
// hold is released and the request answered with the error; if it fails after, the hold is released
// (nothing charged) and the stream is cut. Once the provider finished, the hold is captured before the
// last bytes go out; if that fails, the request is recorded as delivered before they go out, and the
// capture retried (what still fails, the reconciler captures: delivered audio is always charged). A client
// that goes away mid-stream does not stop that: the service reads the provider to the end (the provider
// bills the whole synthesis) and captures, so the client is charged for what the provider made.
import { createHash, randomUUID } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import type { Db, Tx } from '../db/pool.js';
import { uuidForKey } from '../ids.js';
import { paymentRequired } from '../billing/owed.js';
import {
  captureSpeech,
  holdSpeech,
  holdSpeechForVoice,
  markSpeechDelivered,
  releaseSpeech,
  type DeliveredSpeech,
  type SpeechHoldRequest,
  type SpeechCharge,
  type SpeechHoldResult,
  type VoiceToResolve,
} from './speech-billing.js';
import type { Storage } from '../storage/local.js';
import { defaultSpeechModelFor, findSpeechModel, speechCostMicroEur, speechModels, type SpeechModel } from '../models/catalog.js';
import { ApiError, invalidParam, keySpendLimitExceeded, notFound } from '../errors.js';
import { microEurToEur } from '../money.js';
import { creditsCharged } from '../metrics.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { requireKeyAllowsModel } from '../models/key-models.js';
import type { VoicesService } from './service.js';
import { audioEncoder, needsMediaWorker, pcmRateOf, type AudioEncoder } from '../media/audio-encode.js';
import type { SpeechFormat } from '../models/values.js';
import type { FfmpegWasm, MediaReservation } from '../media/ffmpeg-wasm.js';
import { inSpan, markSpans, SPEECH_REQUEST_ID_ATTRIBUTE } from '../telemetry/index.js';
import {
  NOT_CONFIGURED_MESSAGE,
  type SpeechRequest,
  type TimedSpeechPiece,
  type VoiceProvider,
  type WordTimestamps,
} from '../providers/voice/types.js';

/** A speech request's voice: its provider voice id, its registry row (null for a preset voice), the provider that speaks it. */
export type VoiceForSpeech = Awaited<ReturnType<VoicesService['resolveForSpeech']>>;

export interface SpeechInput {
  model?: string | undefined;
  input: string;
  voice: string;
  response_format?: SpeechFormat | undefined;
  speed?: number | undefined;
  /** `word`: a streamed speech carries its words' timings between its audio (stream_format sse only). */
  timestamps?: 'word' | undefined;
}

/** A streamed speech: what is known when it starts, and its bytes as they are made. */
export interface SpeechStream extends Omit<SpeechResult, 'audio'> {
  /**
   * Object mode: the audio bytes (Buffers) and, when word timestamps were asked for, the words' timings
   * (WordTimestamps) between them. Ends when the audio is complete; errors (and is cut) when the provider failed midway.
   */
  body: Readable;
  /** Settles when the money is settled (captured, or released after a failure; `unsettled` when the database failed, left to the reconciler); never rejects. */
  settled: Promise<'captured' | 'released' | 'unsettled'>;
}

/** What `prepare` leaves: the request held (call the provider), or delivered before (replay). */
type Prepared =
  | { kind: 'replay'; result: SpeechResult }
  | {
      kind: 'held';
      speechRequestId: string;
      model: SpeechModel;
      voice_id: string;
      /** The provider of the voice: the one that speaks. */
      provider: VoiceProvider;
      format: SpeechFormat;
      characters: number;
      text: string;
      speed: number | undefined;
    };

export interface SpeechResult {
  audio: Buffer;
  content_type: string;
  speech_request_id: string;
  model: string;
  characters: number;
  cost_micro_eur: number;
  /** An Idempotency-Key retry of a request already charged: delivered again, not charged again. */
  replayed: boolean;
}

/**
 * Pauses between attempts at a write the client's answer waits for: recording a streamed speech as
 * delivered before its last bytes go out, capturing a whole speech before it is answered.
 */
const ANSWER_RETRY_DELAYS_MS = [100, 300, 1_000];
/** Pauses between attempts to capture a delivered speech's hold; after the last, the reconciler captures it. */
const CAPTURE_RETRY_DELAYS_MS = [100, 300, 1_000, 3_000, 10_000];

/** `attempt`, tried again after each pause of `delays_ms` while it throws; the last error is thrown. */
async function withRetries<T>(delays_ms: readonly number[], attempt: () => Promise<T>): Promise<T> {
  for (const delay of delays_ms) {
    try {
      return await attempt();
    } catch {
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  return attempt();
}

/** Characters as billed and limited: Unicode code points. */
export const countCharacters = (text: string) => [...text].length;

/** A speech request id derived from (workspace, Idempotency-Key). */
export function speechRequestIdForKey(workspaceId: string, key: string): string {
  return uuidForKey('speech', workspaceId, key);
}

const insufficientCredits = (cost_micro_eur: number) =>
  new ApiError(
    402,
    'insufficient_credits_error',
    'insufficient_credits',
    `the workspace balance does not cover the cost of this speech (${microEurToEur(cost_micro_eur)} EUR); nothing was charged`,
  );
export const audioKey = (speechRequestId: string, format: string) => `speech/${speechRequestId}.${format}`;

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const keyReused = () =>
  new ApiError(409, 'idempotency_error', 'idempotency_key_reused', 'this Idempotency-Key was already used with different parameters');

const requestInProgress = () =>
  new ApiError(
    409,
    'idempotency_error',
    'idempotency_request_in_progress',
    'a request with this Idempotency-Key is being answered; retry in a moment',
    null,
    { 'Retry-After': '1' },
  );

/**
 * What makes two requests under one Idempotency-Key the same request. A streamed WAV differs from a whole
 * one (its sizes are unknown): another request under the same key.
 */
function speechFingerprint(model_id: string, voice_id: string, body: SpeechInput, format: SpeechFormat, streamed: boolean): string {
  return createHash('sha256')
    .update(
      JSON.stringify([
        model_id,
        voice_id,
        body.input,
        format,
        ...(body.speed !== undefined && body.speed !== 1 ? [body.speed] : []),
        ...(streamed ? ['stream'] : []),
        ...(body.timestamps ? [`timestamps:${body.timestamps}`] : []),
      ]),
    )
    .digest('hex');
}

/**
 * The provider's PCM chunk by chunk: streamed when it streams, else its whole synthesis as one chunk; with
 * `timed`, its words' timings between the chunks (every adapter that speaks streams them).
 */
function pcmChunks(provider: VoiceProvider, request: Omit<SpeechRequest, 'format'>, timed: boolean): AsyncIterator<TimedSpeechPiece> {
  const source: AsyncIterable<TimedSpeechPiece> =
    timed && provider.synthesizeStreamWithTimestamps
      ? provider.synthesizeStreamWithTimestamps(request)
      : (async function* () {
          if (provider.synthesizeStream) {
            for await (const pcm of provider.synthesizeStream(request)) yield { pcm };
          } else {
            yield { pcm: (await provider.synthesize({ ...request, format: 'pcm' })).audio };
          }
        })();
  return source[Symbol.asyncIterator]();
}

/** The provider's first audio, and the word timings it sent before it (null when it ended without audio). */
async function firstAudio(chunks: AsyncIterator<TimedSpeechPiece>): Promise<{ pcm: Buffer; words: WordTimestamps[] } | null> {
  const words: WordTimestamps[] = [];
  for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
    if ('words' in next.value) words.push(next.value.words);
    else if (next.value.pcm.length > 0) return { pcm: next.value.pcm, words };
  }
  return null;
}

export class SpeechService {
  constructor(
    private readonly deps: {
      db: Db;
      voices: VoicesService;
      storage: Storage;
      ffmpeg: FfmpegWasm;
      /** Called after a capture committed: starts the deliveries of the budget alerts its ledger entry may have recorded. */
      afterCharge?: (workspaceId: string) => void;
    },
  ) {}

  /**
   * Counts a capture that charged (once: a retry that finds it captured counts nothing) and lets its
   * budget alerts go out, when the workspace has a webhook endpoint (else the charge recorded none).
   */
  charged(captured: SpeechCharge): void {
    if (!captured.captured) return;
    creditsCharged.inc({ kind: 'speech' }, captured.cost_micro_eur);
    if (captured.alerts_possible) this.deps.afterCharge?.(captured.workspace_id);
  }

  assertConfigured(): void {
    this.deps.voices.assertConfigured();
  }

  /** The voice providers configured, in their order. */
  get providers(): readonly VoiceProvider[] {
    return this.deps.voices.providers.list;
  }

  /** The model a request names: it exists (404), its provider is configured here (503), the key may use it (403). */
  private requestedModel(principal: ApiKeyPrincipal, requested: string): SpeechModel {
    const model = findSpeechModel(requested);
    if (!model) throw notFound('model_not_found', `speech model "${requested}" does not exist`, 'model');
    if (!this.deps.voices.providers.get(model.provider)) {
      throw new ApiError(503, 'provider_error', 'provider_not_configured', `the provider of model ${model.id} is not configured`, 'model');
    }
    requireKeyAllowsModel(principal, model.id);
    return model;
  }

  /**
   * What speaks an utterance streamed over a WebSocket (./speech-socket.ts): its model and voice checked
   * as a speech request's (a model asked for must be the voice's provider's), and the provider of the voice;
   * the voice looked up on `q` (the pool, or a connection the caller goes on with).
   */
  async resolveUtterance(
    principal: ApiKeyPrincipal,
    body: { model?: string | undefined; voice: string },
    q: Db | Tx = this.deps.db,
  ): Promise<{ model: SpeechModel; voice_id: string; registry_id: string | null; provider: VoiceProvider }> {
    this.deps.voices.assertConfigured();
    const requested = body.model === undefined ? undefined : this.requestedModel(principal, body.model);
    const voice = await this.deps.voices.resolveForSpeech(principal, body.voice, requested?.provider, q);
    const model = this.modelForVoice(principal, requested, voice);
    return { model, voice_id: voice.voice_id, registry_id: voice.registry_id, provider: voice.provider };
  }

  /**
   * resolveUtterance before the voice is read, with the provider it most likely resolves to
   * (VoicesService.guessForSpeech): the context's hold then resolves the voice in its own statement and
   * holds only if it is that provider's. Null when there is no guess or the utterance is not valid with it
   * (resolveUtterance then answers, the voice read first).
   */
  guessUtterance(
    principal: ApiKeyPrincipal,
    body: { model?: string | undefined; voice: string },
  ): { model: SpeechModel; voice_id: string; provider: VoiceProvider; resolve: VoiceToResolve } | null {
    try {
      this.deps.voices.assertConfigured();
      const requested = body.model === undefined ? undefined : this.requestedModel(principal, body.model);
      const guess = this.deps.voices.guessForSpeech(body.voice, requested?.provider);
      if (!guess) return null;
      const model = this.modelForVoice(principal, requested, { voice_id: body.voice, registry_id: null, provider: guess.provider });
      return { model, voice_id: body.voice, provider: guess.provider, resolve: guess.resolve };
    } catch {
      return null;
    }
  }

  /** A provider failure as the customer's error (logged for the operator when it is theirs). */
  failure(err: unknown): unknown {
    return this.deps.voices.failure(err);
  }

  /**
   * The model that speaks with the voice's provider: the one asked for, which must be that provider's (400
   * naming `model` otherwise), else that provider's default model.
   */
  private modelForVoice(principal: ApiKeyPrincipal, requested: SpeechModel | undefined, voice: VoiceForSpeech): SpeechModel {
    const provider = voice.provider.name;
    if (requested) {
      if (requested.provider !== provider) {
        throw invalidParam(
          'model',
          `model ${requested.id} is spoken by voice provider ${requested.provider}, but voice "${voice.voice_id}" is a voice of ` +
            `${provider}: use one of its models (${speechModels()
              .filter((m) => m.provider === provider)
              .map((m) => m.id)
              .join(', ')}) or omit model`,
        );
      }
      return requested;
    }
    const model = defaultSpeechModelFor(provider);
    if (!model) {
      throw new ApiError(503, 'provider_error', 'provider_not_configured', `no speech model is available for voice provider ${provider}`);
    }
    requireKeyAllowsModel(principal, model.id);
    return model;
  }

  /**
   * The model, voice, format and length of a speech request, checked against the catalog: a model asked for
   * is checked before the voice is looked up, the default model after (it is the voice's provider's).
   */
  private async validated(
    principal: ApiKeyPrincipal,
    body: SpeechInput,
    resolved?: Map<string, VoiceForSpeech>,
  ): Promise<{ model: SpeechModel; voice: VoiceForSpeech; format: SpeechFormat; characters: number }> {
    const requested = this.requested(principal, body);
    const key = `${requested?.provider ?? ''}\u0000${body.voice}`;
    const voice = resolved?.get(key) ?? (await this.deps.voices.resolveForSpeech(principal, body.voice, requested?.provider));
    resolved?.set(key, voice);
    return this.priced(principal, body, requested, voice);
  }

  /** The model asked for, checked with the input before any voice is looked up (a provider is configured). */
  private requested(principal: ApiKeyPrincipal, body: SpeechInput): SpeechModel | undefined {
    this.deps.voices.assertConfigured();
    const requested = body.model === undefined ? undefined : this.requestedModel(principal, body.model);
    if (requested) this.checkInput(requested, body);
    return requested;
  }

  /** The model that speaks with `voice`, and the format and length of the input as it takes them. */
  private priced(principal: ApiKeyPrincipal, body: SpeechInput, requested: SpeechModel | undefined, voice: VoiceForSpeech) {
    const model = this.modelForVoice(principal, requested, voice);
    return { model, voice, ...this.checkInput(model, body) };
  }

  /**
   * `validated` before the voice is read, with the provider the voice most likely resolves to
   * (VoicesService.guessForSpeech): the hold then resolves the voice in its own statement and holds only
   * if it is that provider's. Null when there is no guess or the request is not valid with it (`validated`
   * then answers, the voice read first, as always).
   */
  private guessed(principal: ApiKeyPrincipal, body: SpeechInput) {
    try {
      const requested = this.requested(principal, body);
      const guess = this.deps.voices.guessForSpeech(body.voice, requested?.provider);
      if (!guess) return null;
      const voice: VoiceForSpeech = { voice_id: body.voice, registry_id: null, provider: guess.provider };
      return { ...this.priced(principal, body, requested, voice), resolve: guess.resolve };
    } catch {
      return null;
    }
  }

  /** The format and length of the input, as `model` takes them. */
  private checkInput(model: SpeechModel, body: SpeechInput): { format: SpeechFormat; characters: number } {
    const format = body.response_format ?? 'wav';
    if (!model.response_formats.includes(format)) {
      throw invalidParam('response_format', `response_format must be one of ${model.response_formats.join(', ')} for model ${model.id}`);
    }
    if (body.input.trim().length === 0) throw invalidParam('input', 'input must not be empty');
    const characters = countCharacters(body.input);
    if (characters > model.max_input_chars) {
      throw invalidParam('input', `input must be at most ${model.max_input_chars} characters for model ${model.id} (it has ${characters})`);
    }
    return { format, characters };
  }

  /**
   * A batch's speech request validated as this request alone would be (model, format, length, the key's
   * models, the voice of this workspace, a model of the voice's provider), with its price; nothing held.
   * Formats FFmpeg encodes are not spoken in batches (the media worker is the API's). `voices` caches the
   * voices resolved for one batch.
   */
  async validateForBatch(principal: ApiKeyPrincipal, body: SpeechInput, voices: Map<string, VoiceForSpeech>) {
    const { model, voice, format, characters } = await this.validated(principal, body, voices);
    if (needsMediaWorker(format))
      throw invalidParam('response_format', `response_format ${format} is not available in batches: use wav, pcm or mp3`);
    return {
      model: model.id,
      voice_id: voice.voice_id,
      voice_registry_id: voice.registry_id,
      input: body.input,
      format,
      ...(body.speed !== undefined ? { speed: body.speed } : {}),
      characters,
      request_fingerprint: speechFingerprint(model.id, voice.voice_id, body, format, false),
      api_key_id: principal.key_id,
      backend: voice.provider.name,
      cost_micro_eur: speechCostMicroEur(model, characters),
    };
  }

  /**
   * Validates, resolves the voice and holds the cost (or finds the request delivered before): in one
   * round trip to PostgreSQL when the voice resolves as guessed (`guessed`), else the voice is read first.
   */
  private async prepare(
    principal: ApiKeyPrincipal,
    body: SpeechInput,
    idempotencyKey: string | undefined,
    streamed: boolean,
  ): Promise<Prepared> {
    const guess = this.guessed(principal, body);
    if (guess) {
      const held = await holdSpeechForVoice(
        this.deps.db,
        this.holdRequest(principal, body, idempotencyKey, streamed, guess),
        guess.resolve,
      );
      if (held.kind !== 'voice_unresolved') return this.afterHold(held, body, guess);
    }
    const priced = await this.validated(principal, body);
    const held = await holdSpeech(this.deps.db, {
      ...this.holdRequest(principal, body, idempotencyKey, streamed, priced),
      voiceRegistryId: priced.voice.registry_id,
    });
    return this.afterHold(held, body, priced);
  }

  /** The hold of a priced request (its voice's registry id apart). */
  private holdRequest(
    principal: ApiKeyPrincipal,
    body: SpeechInput,
    idempotencyKey: string | undefined,
    streamed: boolean,
    { model, voice, format, characters }: { model: SpeechModel; voice: VoiceForSpeech; format: SpeechFormat; characters: number },
  ): Omit<SpeechHoldRequest, 'voiceRegistryId'> {
    const workspaceId = principal.workspace_id;
    return {
      speechRequestId: idempotencyKey ? speechRequestIdForKey(workspaceId, idempotencyKey) : randomUUID(),
      workspaceId,
      idempotencyKey: idempotencyKey ?? randomUUID(),
      requestFingerprint: speechFingerprint(model.id, voice.voice_id, body, format, streamed),
      model: model.id,
      voice: voice.voice_id,
      characters,
      responseFormat: format,
      cost_micro_eur: speechCostMicroEur(model, characters),
      apiKeyId: principal.key_id,
      backend: voice.provider.name,
    };
  }

  /** What a hold means for the request: an error, a replay, or the request held (the provider to be asked). */
  private async afterHold(
    held: SpeechHoldResult,
    body: SpeechInput,
    { model, voice, format, characters }: { model: SpeechModel; voice: VoiceForSpeech; format: SpeechFormat; characters: number },
  ): Promise<Prepared> {
    switch (held.kind) {
      case 'idempotency_key_reused':
        throw keyReused();
      case 'payment_required':
        throw paymentRequired(held.owed_micro_eur);
      case 'insufficient_credits':
        throw insufficientCredits(speechCostMicroEur(model, characters));
      case 'key_spend_limit_exceeded':
        throw keySpendLimitExceeded();
      case 'in_progress':
        throw requestInProgress();
      case 'delivered':
        return { kind: 'replay', result: await this.deliveredBefore(held.prior, { model: model.id, characters }) };
      case 'held':
        return {
          kind: 'held',
          speechRequestId: held.speech_request_id,
          model,
          voice_id: voice.voice_id,
          provider: voice.provider,
          format,
          characters,
          text: body.input,
          speed: body.speed,
        };
    }
  }

  /** The answer to a replay of a request delivered before: its kept audio, not charged again (410 once the audio is gone). */
  private async deliveredBefore(prior: DeliveredSpeech, result: { model: string; characters: number }): Promise<SpeechResult> {
    const audio = prior.audio_storage_key ? await this.deps.storage.open(prior.audio_storage_key) : null;
    if (!audio)
      throw new ApiError(
        410,
        'invalid_request_error',
        'speech_no_longer_available',
        'this request was delivered and charged once; its audio is no longer kept',
      );
    return {
      ...result,
      audio: await readAll(audio.stream),
      content_type: prior.audio_content_type ?? 'application/octet-stream',
      speech_request_id: prior.speech_request_id,
      cost_micro_eur: prior.cost_micro_eur,
      replayed: true,
    };
  }

  /**
   * The encoder's place for a format FFmpeg encodes (null for the others), reserved before the provider
   * is called; a full lane releases the hold (nothing was called, nothing charged) and is the 503.
   */
  private async reserveEncoder(speechRequestId: string, format: SpeechFormat): Promise<MediaReservation | null> {
    if (!needsMediaWorker(format)) return null;
    try {
      return this.deps.ffmpeg.reserve('speech');
    } catch (err) {
      await releaseSpeech(this.deps.db, speechRequestId).catch(() => {});
      throw err;
    }
  }

  /** The whole speech as one file. */
  async speak(principal: ApiKeyPrincipal, body: SpeechInput, idempotencyKey: string | undefined): Promise<SpeechResult> {
    const prepared = await this.prepare(principal, body, idempotencyKey, false);
    if (prepared.kind === 'replay') return prepared.result;
    const { speechRequestId, model, format, characters } = prepared;
    markSpans(SPEECH_REQUEST_ID_ATTRIBUTE, speechRequestId);
    const key = audioKey(speechRequestId, format);
    const place = await this.reserveEncoder(speechRequestId, format);
    let speech: { audio: Buffer; content_type: string };
    try {
      let pcm;
      try {
        pcm = await prepared.provider.synthesize({
          model: model.id,
          voice_id: prepared.voice_id,
          text: prepared.text,
          format: 'pcm',
          speed: prepared.speed,
        });
      } catch (err) {
        throw this.deps.voices.failure(err);
      }
      if (pcm.audio.length === 0) {
        throw new ApiError(502, 'provider_error', 'provider_invalid_response', 'the voice provider returned no audio; nothing was charged');
      }
      speech = await inSpan('speech encode', { 'speech.format': format }, async () => {
        const encoder = audioEncoder(format, pcmRateOf(pcm.content_type), place?.run ?? null, false);
        return { audio: Buffer.concat([encoder.push(pcm.audio), await encoder.end()]), content_type: encoder.content_type };
      });
      // Kept for replays of this Idempotency-Key, so they never reach the provider.
      await this.deps.storage.put(key, speech.audio, speech.content_type).catch((err: Error) => {
        throw new ApiError(
          503,
          'api_error',
          'storage_unavailable',
          `the audio could not be kept (${err.message}); nothing was charged`,
          null,
          { 'Retry-After': '5' },
        );
      });
    } catch (err) {
      // Nothing delivered: give the hold back (if this fails too, the reconciler releases it later).
      await releaseSpeech(this.deps.db, speechRequestId).catch(() => {});
      throw err;
    } finally {
      place?.release();
    }
    // A database blip does not lose audio the provider made (and billed us for); if it outlasts the
    // retries, nothing was delivered and the reconciler releases the hold.
    const captured = await withRetries(ANSWER_RETRY_DELAYS_MS, () =>
      captureSpeech(this.deps.db, {
        speechRequestId,
        audioBytes: speech.audio.length,
        audioStorageKey: key,
        audioContentType: speech.content_type,
      }),
    );
    this.charged(captured);
    return {
      model: model.id,
      characters,
      audio: speech.audio,
      content_type: speech.content_type,
      speech_request_id: speechRequestId,
      cost_micro_eur: captured.cost_micro_eur,
      replayed: false,
    };
  }

  /**
   * The speech streamed while the provider makes it. Resolves once the provider's first chunk is in
   * (an error before that is thrown, nothing charged); the money then settles on its own (see the top).
   */
  async speakStream(principal: ApiKeyPrincipal, body: SpeechInput, idempotencyKey: string | undefined): Promise<SpeechStream> {
    const prepared = await this.prepare(principal, body, idempotencyKey, true);
    if (prepared.kind === 'replay') {
      const r = prepared.result;
      const out = new PassThrough();
      out.end(r.audio);
      return { ...r, body: out, settled: Promise.resolve('captured') };
    }
    const { speechRequestId, model, format, characters } = prepared;
    markSpans(SPEECH_REQUEST_ID_ATTRIBUTE, speechRequestId);
    const place = await this.reserveEncoder(speechRequestId, format);
    const provider = prepared.provider;
    const rate_hz = provider.pcm_rate_hz;
    const request = { model: model.id, voice_id: prepared.voice_id, text: prepared.text, speed: prepared.speed };
    const chunks = pcmChunks(provider, request, body.timestamps === 'word');
    const release = () => releaseSpeech(this.deps.db, speechRequestId).catch(() => false);
    let first: { pcm: Buffer; words: WordTimestamps[] } | null;
    try {
      first = await firstAudio(chunks);
      if (!first)
        throw new ApiError(502, 'provider_error', 'provider_invalid_response', 'the voice provider returned no audio; nothing was charged');
      if (rate_hz === null) throw new ApiError(503, 'provider_error', 'provider_not_configured', NOT_CONFIGURED_MESSAGE);
    } catch (err) {
      place?.release();
      await release();
      throw this.deps.voices.failure(err);
    }
    const encoder = audioEncoder(format, rate_hz, place?.run ?? null, true);
    // Object mode: audio bytes (Buffers), and with timestamps the words' timings between them.
    const out = new PassThrough({ objectMode: true });
    const settled = this.streamAndSettle({ speechRequestId, format, first, chunks, encoder, out, place, release });
    const cost_micro_eur = speechCostMicroEur(model, characters);
    return {
      content_type: encoder.content_type,
      speech_request_id: speechRequestId,
      model: model.id,
      characters,
      cost_micro_eur,
      replayed: false,
      body: out,
      settled,
    };
  }

  /**
   * Reads the provider to its end whatever the client does, encoding into `out`, then settles the money:
   * captured once the provider finished (the audio kept for replays), released when it failed midway.
   */
  private async streamAndSettle(stream: {
    speechRequestId: string;
    format: SpeechFormat;
    first: { pcm: Buffer; words: WordTimestamps[] };
    chunks: AsyncIterator<TimedSpeechPiece>;
    encoder: AudioEncoder;
    out: PassThrough;
    place: MediaReservation | null;
    release: () => Promise<unknown>;
  }): Promise<'captured' | 'released' | 'unsettled'> {
    const { speechRequestId, chunks, encoder, out } = stream;
    const sent: Buffer[] = [];
    const send = (b: Buffer) => {
      if (b.length === 0) return;
      sent.push(b);
      if (!out.destroyed) out.write(b);
    };
    try {
      const words = (w: WordTimestamps) => {
        if (!out.destroyed) out.write(w);
      };
      send(encoder.push(stream.first.pcm));
      stream.first.words.forEach(words);
      for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
        if ('pcm' in next.value) send(encoder.push(next.value.pcm));
        else words(next.value.words);
      }
      send(await encoder.end());
    } catch (err) {
      await stream.release();
      out.destroy(err instanceof Error ? err : new Error(String(err)));
      return 'released';
    } finally {
      stream.place?.release();
    }
    const audio = Buffer.concat(sent);
    return this.deliverAndCapture({ speechRequestId, format: stream.format, audio, content_type: encoder.content_type, out });
  }

  /**
   * The end of a streamed speech the provider finished: kept for replays, captured or at least marked
   * delivered before its last bytes go out (else the stream is cut: audio that is not recorded as
   * delivered is not handed out whole), then captured, retried; a capture that still fails is left to
   * the reconciler, which captures delivered holds.
   */
  private async deliverAndCapture(d: {
    speechRequestId: string;
    format: SpeechFormat;
    audio: Buffer;
    content_type: string;
    out: PassThrough;
  }): Promise<'captured' | 'released' | 'unsettled'> {
    const key = audioKey(d.speechRequestId, d.format);
    // Kept for replays; the audio is delivered, so a storage failure does not undo the charge.
    await this.deps.storage.put(key, d.audio, d.content_type).catch(() => {});
    const delivered = {
      speechRequestId: d.speechRequestId,
      audioBytes: d.audio.length,
      audioStorageKey: key,
      audioContentType: d.content_type,
    };
    // Captured before the last bytes go out: once the answer has ended the balance shows its charge, and
    // the workspace's next request does not wait behind this capture for the workspace's lock. A capture
    // that fails is done the long way: the delivery recorded, the stream ended, the capture retried.
    const captured = await captureSpeech(this.deps.db, delivered).catch(() => null);
    if (captured) {
      d.out.end();
      this.charged(captured);
      return 'captured';
    }
    try {
      if (!(await withRetries(ANSWER_RETRY_DELAYS_MS, () => markSpeechDelivered(this.deps.db, delivered))))
        throw new Error(`speech request ${d.speechRequestId} is no longer held`);
    } catch (err) {
      d.out.destroy(new Error(`the delivery could not be recorded (${(err as Error).message}); nothing was charged`));
      return (await releaseSpeech(this.deps.db, d.speechRequestId).catch(() => false)) ? 'released' : 'unsettled';
    }
    d.out.end();
    try {
      const captured = await withRetries(CAPTURE_RETRY_DELAYS_MS, () => captureSpeech(this.deps.db, delivered));
      this.charged(captured);
      return 'captured';
    } catch {
      return 'unsettled';
    }
  }
}
