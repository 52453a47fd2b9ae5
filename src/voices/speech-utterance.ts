// One context of the speech WebSocket (./speech-socket.ts): one utterance, one speech request, charged
// once. Its money (./speech-billing.ts):
//
//   - the first text holds its characters' cost (holdSpeech) before the provider is asked to speak it;
//     each further text grows the hold (growSpeechHold) before it is sent on; a text the balance or the
//     key's spend limit cannot cover is refused with an error, and nothing of it reaches the provider;
//   - as the provider speaks, what it has spoken (characters, bytes of audio) is recorded at most every
//     PROGRESS_INTERVAL_MS, which also keeps the hold alive for the reconciler;
//   - the utterance ends: spoken whole, cancelled, failed at the provider, or its socket gone. It is then
//     settled once (settleSpokenSpeech): what was spoken charged, the rest released. Spoken whole, that is
//     every character; otherwise what the provider reported spoken. If the API process dies first, the
//     reconciler settles the hold from the recorded progress once it is older than SPEECH_HOLD_TTL_MS.
//
// Messages of one context are handled in order (each waits for the one before); the audio is pumped
// from the provider apart from them, and stops being read while the client is behind (backpressure).
import { randomUUID } from 'node:crypto';
import { ApiError } from '../errors.js';
import { withClient } from '../db/pool.js';
import { paymentRequired } from '../billing/owed.js';
import { microEurToEur } from '../money.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { speechCostMicroEur, type SpeechModel } from '../models/catalog.js';
import {
  isContextPcm,
  pcmBase64,
  pcmBytes,
  type ProviderSpeechContext,
  type SpeechContextRequest,
  type VoiceProvider,
} from '../providers/voice/types.js';
import { growSpeechHold, holdSpeechContext, recordSpokenSpeech, settleSpokenSpeech, type SpeechHoldRequest } from './speech-billing.js';
import { countCharacters, type SpeechService } from './speech.js';
import type { SpeechSocketDeps, SpeechTextMessage } from './speech-socket-protocol.js';

/** The server's `error` message of the socket; `context_id` null when the message itself could not be read. */
export const errorMessage = (context_id: string | null, code: string, message: string) => ({ type: 'error', context_id, code, message });

/** How often, at most, an utterance's progress is written (its characters spoken, its hold kept alive). */
export const PROGRESS_INTERVAL_MS = 1_000;
/** Pause between looks at a slow client's buffer while the provider is not read. */
const DRAIN_POLL_MS = 5;
/** Pauses between attempts at the settlement; after the last, the reconciler settles from the progress. */
const SETTLE_RETRY_DELAYS_MS = [100, 300, 1_000, 3_000];

/** What an utterance needs of its socket. */
export interface UtteranceEvents {
  send(message: object): void;
  buffered_bytes(): number;
  open(): boolean;
  /** Audio went out. */
  touch(): void;
  /** The utterance is over (settled, or never opened): its context_id may be used again. */
  ended(): void;
  /** The utterance at its provider (over the socket's connection to it, for a provider that carries several: ./speech-contexts.ts). */
  openContext(provider: VoiceProvider, req: SpeechContextRequest): ProviderSpeechContext;
}

interface Opened {
  speechRequestId: string;
  model: SpeechModel;
  voice: string;
  provider: VoiceProvider;
  context: ProviderSpeechContext;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Utterance {
  private chain: Promise<void> = Promise.resolve();
  private opened: Opened | null = null;
  private input_ended = false;
  private cancelled = false;
  private characters = 0;
  private spoken = 0;
  private audio_bytes = 0;
  private progress_at_ms = 0;
  private progress_writing = false;
  /** The client is behind: the provider is not read until it caught up. */
  private behind = false;
  private resolveSettled!: () => void;
  /** Resolves once the utterance ended and is settled (or never opened). */
  readonly settled = new Promise<void>((r) => (this.resolveSettled = r));

  constructor(
    readonly context_id: string,
    private readonly principal: ApiKeyPrincipal,
    private readonly deps: SpeechSocketDeps,
    private readonly events: UtteranceEvents,
  ) {}

  /** The next text of the context, handled after those before it. */
  accept(m: SpeechTextMessage): void {
    this.chain = this.chain
      .then(() => (this.opened ? this.more(this.opened, m) : this.open(m)))
      .catch((err: unknown) => {
        const e = err instanceof ApiError ? err : null;
        if (!e) this.deps.logger.error({ err_message: (err as Error).message }, 'speech socket: a message failed');
        this.error(e?.code ?? 'internal_error', e?.message ?? 'the message could not be handled');
        if (!this.opened) this.finish();
      });
  }

  /** Speaking or settling what the client has finished sending, not held back by the client: the socket is not idle. */
  get busy(): boolean {
    return this.input_ended && !this.behind;
  }

  /** Stops the utterance: the provider stops, what was spoken is charged, the rest released. */
  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.opened?.context.cancel();
  }

  private error(code: string, message: string): void {
    this.events.send(errorMessage(this.context_id, code, message));
  }

  /** Never opened (or settled): gone from its socket. */
  private finish(): void {
    this.events.ended();
    this.resolveSettled();
  }

  private checkLength(characters: number, before: number): void {
    const { message_chars_max, context_chars_max } = this.deps.limits;
    if (characters > message_chars_max) {
      throw new ApiError(
        400,
        'invalid_request_error',
        'message_too_long',
        `a text has at most ${message_chars_max} characters (this one ${characters}); not spoken`,
      );
    }
    if (before + characters > context_chars_max) {
      throw new ApiError(
        400,
        'invalid_request_error',
        'context_too_long',
        `a context speaks at most ${context_chars_max} characters (${before} so far, ${characters} more asked); not spoken`,
      );
    }
  }

  /** The context's first text: resolve, hold, open at the provider, start the audio. */
  private async open(m: SpeechTextMessage): Promise<void> {
    if (this.cancelled) return this.finish();
    const voice = m.voice;
    if (voice === undefined) throw new ApiError(400, 'invalid_request_error', 'invalid_message', 'voice: a context opens with a voice');
    const characters = countCharacters(m.text);
    if (m.text.trim().length === 0) throw new ApiError(400, 'invalid_request_error', 'invalid_message', 'text: a context opens with text');
    this.checkLength(characters, 0);
    const guess = this.deps.speech.guessUtterance(this.principal, { model: m.model, voice });
    const { u, context, speechRequestId, held } =
      (guess && (await this.holdGuessed(guess, characters))) ?? (await this.holdResolved({ model: m.model, voice }, characters));
    if (held.kind !== 'held') {
      context.cancel();
      throw holdRefused(held);
    }
    this.characters = characters;
    this.progress_at_ms = performance.now();
    this.opened = { speechRequestId, model: u.model, voice, provider: u.provider, context };
    this.events.send({
      type: 'context',
      context_id: this.context_id,
      speech_request_id: speechRequestId,
      model: u.model.id,
      sample_rate_hz: u.provider.pcm_rate_hz,
    });
    void this.pump(this.opened);
    // Cancelled while the hold was taken: nothing is spoken (the settlement releases the hold).
    if (this.cancelled) return context.cancel();
    this.speak(this.opened, m, characters);
  }

  /**
   * The first hold with the voice resolved in its own statement (one round trip), for the provider the
   * voice most likely is. Null, nothing held, when the voice is not that provider's.
   */
  private async holdGuessed(guess: NonNullable<ReturnType<SpeechService['guessUtterance']>>, characters: number) {
    const speechRequestId = randomUUID();
    const { context, held } = await this.openWhileHolding(guess, () =>
      holdSpeechContext(this.deps.db, this.holdRequest(speechRequestId, guess, characters), guess.resolve),
    );
    if (held.kind === 'voice_unresolved') {
      context.cancel();
      return null;
    }
    return { u: guess, context, speechRequestId, held };
  }

  /**
   * The first hold after the voice is looked up, both on one connection of the pool (at many speakers at
   * once, connections are what a context waits for: once rather than twice).
   */
  private holdResolved(body: { model?: string | undefined; voice: string }, characters: number) {
    return withClient(this.deps.db, async (client) => {
      const u = await this.deps.speech.resolveUtterance(this.principal, body, client);
      const speechRequestId = randomUUID();
      const { context, held } = await this.openWhileHolding(u, () =>
        holdSpeechContext(client, { ...this.holdRequest(speechRequestId, u, characters), voiceRegistryId: u.registry_id }),
      );
      return { u, context, speechRequestId, held };
    });
  }

  /**
   * The utterance opened at its provider while `hold` runs: the connection's handshake and the hold
   * overlap, and no text goes to the provider before the hold is taken. Cancelled if the hold throws.
   */
  private async openWhileHolding<R>(
    u: { model: SpeechModel; voice_id: string; provider: VoiceProvider },
    hold: () => Promise<R>,
  ): Promise<{ context: ProviderSpeechContext; held: R }> {
    const context = this.events.openContext(u.provider, { model: u.model.id, voice_id: u.voice_id });
    try {
      return { context, held: await hold() };
    } catch (err) {
      context.cancel();
      throw err;
    }
  }

  /** The new request a context's first text holds (its voice's registry id apart). */
  private holdRequest(
    speechRequestId: string,
    u: { model: SpeechModel; voice_id: string; provider: VoiceProvider },
    characters: number,
  ): Omit<SpeechHoldRequest, 'voiceRegistryId'> {
    return {
      speechRequestId,
      workspaceId: this.principal.workspace_id,
      idempotencyKey: `websocket:${speechRequestId}`,
      requestFingerprint: 'websocket',
      model: u.model.id,
      voice: u.voice_id,
      characters,
      responseFormat: 'pcm',
      cost_micro_eur: speechCostMicroEur(u.model, characters),
      apiKeyId: this.principal.key_id,
      backend: u.provider.name,
    };
  }

  /** A further text: its characters held, then sent on. */
  private async more(o: Opened, m: SpeechTextMessage): Promise<void> {
    if (this.input_ended || this.cancelled) {
      throw new ApiError(400, 'invalid_request_error', 'context_ended', "this context's text has ended; open another context_id");
    }
    if ((m.voice !== undefined && m.voice !== o.voice) || (m.model !== undefined && m.model !== o.model.id)) {
      throw new ApiError(400, 'invalid_request_error', 'invalid_message', 'voice and model stay those the context opened with');
    }
    const characters = countCharacters(m.text);
    this.checkLength(characters, this.characters);
    if (characters > 0) {
      const total = this.characters + characters;
      const grown = await growSpeechHold(this.deps.db, {
        speechRequestId: o.speechRequestId,
        workspaceId: this.principal.workspace_id,
        characters: total,
        cost_micro_eur: speechCostMicroEur(o.model, total),
      });
      if (grown.kind !== 'held') throw holdRefused(grown);
      this.characters = total;
    }
    // Cancelled while the hold was taken: the provider is not asked (the settlement releases it).
    if (this.cancelled) return;
    this.speak(o, m, characters);
  }

  private speak(o: Opened, m: SpeechTextMessage, characters: number): void {
    if (characters > 0 || m.flush) o.context.send(characters > 0 ? m.text : '', m.flush === true);
    if (m.continue !== true) {
      this.input_ended = true;
      o.context.end();
    }
  }

  /** The provider's audio to the client until the utterance ends, then the settlement. */
  private async pump(o: Opened): Promise<void> {
    let failure: unknown = null;
    try {
      for await (const piece of o.context.pieces) {
        if (isContextPcm(piece)) {
          this.audio_bytes += pcmBytes(piece);
          this.events.send({ type: 'audio', context_id: this.context_id, audio: pcmBase64(piece) });
          this.events.touch();
          this.progress(o);
          // A slow client: the provider is not read until it caught up (or went away).
          while (this.events.open() && this.events.buffered_bytes() > this.deps.limits.buffered_bytes_max) {
            this.behind = true;
            await sleep(DRAIN_POLL_MS);
          }
          this.behind = false;
        } else if ('words' in piece) {
          this.events.send({ type: 'word_timestamps', context_id: this.context_id, ...piece.words });
        } else {
          this.spoken = Math.min(this.characters, Math.max(this.spoken, piece.spoken_characters));
          this.progress(o);
        }
        if (this.cancelled) break;
      }
      // Ended on its own: every character sent was spoken.
      if (!this.cancelled) this.spoken = this.characters;
    } catch (err) {
      failure = err;
      o.context.cancel();
    }
    await this.settle(o, failure);
  }

  /**
   * Records the progress, at most every PROGRESS_INTERVAL_MS from the hold (which is the first sign of
   * life), one write at a time; nothing before audio came (spoken without audio is not spoken, and the
   * row's audio_bytes is never 0).
   */
  private progress(o: Opened): void {
    const now = performance.now();
    if (this.progress_writing || now - this.progress_at_ms < PROGRESS_INTERVAL_MS || this.spoken === 0 || this.audio_bytes === 0) return;
    this.progress_at_ms = now;
    this.progress_writing = true;
    recordSpokenSpeech(this.deps.db, { speechRequestId: o.speechRequestId, spokenCharacters: this.spoken, audioBytes: this.audio_bytes })
      .catch(() => {})
      .finally(() => (this.progress_writing = false));
  }

  private async settle(o: Opened, failure: unknown): Promise<void> {
    // The messages in hand first: a hold being grown is part of what is settled.
    await this.chain;
    const spoken = this.audio_bytes > 0 ? this.spoken : 0;
    let charged = { characters: 0, cost_micro_eur: 0 };
    let settled = false;
    for (const delay of [...SETTLE_RETRY_DELAYS_MS, null]) {
      try {
        const r = await settleSpokenSpeech(this.deps.db, {
          speechRequestId: o.speechRequestId,
          workspaceId: this.principal.workspace_id,
          spokenCharacters: spoken,
          spoken_cost_micro_eur: spoken > 0 ? speechCostMicroEur(o.model, spoken) : 0,
          audioBytes: this.audio_bytes,
          audioContentType: `audio/pcm;rate=${o.provider.pcm_rate_hz};channels=1;encoding=s16le`,
        });
        this.deps.speech.charged({
          captured: r.status === 'captured',
          cost_micro_eur: r.cost_micro_eur,
          workspace_id: this.principal.workspace_id,
          alerts_possible: r.alerts_possible,
        });
        charged = r;
        settled = true;
        break;
      } catch (err) {
        if (delay === null)
          this.deps.logger.error({ err_message: (err as Error).message }, 'speech socket: settlement left to the reconciler');
        else await sleep(delay);
      }
    }
    if (failure !== null) {
      const e = this.deps.speech.failure(failure);
      this.error(e instanceof ApiError ? e.code : 'provider_failed', e instanceof ApiError ? e.message : 'the voice provider failed');
    }
    this.events.send({
      type: 'done',
      context_id: this.context_id,
      speech_request_id: o.speechRequestId,
      characters: charged.characters,
      cost_in_euro: microEurToEur(charged.cost_micro_eur),
      ...(this.cancelled ? { cancelled: true } : {}),
      ...(settled ? {} : { settlement: 'pending' }),
    });
    this.finish();
  }
}

function holdRefused(
  refusal:
    | { kind: 'insufficient_credits' | 'key_spend_limit_exceeded' | 'not_held' | 'idempotency_key_reused' | 'delivered' | 'in_progress' }
    | { kind: 'payment_required'; owed_micro_eur: number },
): ApiError {
  switch (refusal.kind) {
    case 'payment_required':
      return paymentRequired(refusal.owed_micro_eur);
    case 'insufficient_credits':
      return new ApiError(
        402,
        'insufficient_credits_error',
        'insufficient_credits',
        'the workspace balance does not cover this text; it was not spoken',
      );
    case 'key_spend_limit_exceeded':
      return new ApiError(
        403,
        'permission_error',
        'key_spend_limit_exceeded',
        "this API key's spend limit does not cover this text; it was not spoken",
      );
    default:
      return new ApiError(409, 'invalid_request_error', 'context_ended', 'this context was settled; open another context_id');
  }
}
