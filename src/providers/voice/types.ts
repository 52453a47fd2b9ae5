// The voice provider interface: what every adapter (simulator, none, ElevenLabs, ...) implements.
// Adapters throw VoiceProviderError: `rejected` when the provider refused the request (its message
// is shown to the client as a 400), `unavailable` when it could not be reached or failed on its side
// (a 503; deletions retry it), or when the operator's account is the problem (`account`: a 503 whose
// details go to the operator's log only).
import type { AudioFormat } from '../../media/audio-sniff.js';
import type { SpeechFormat } from '../../models/values.js';

export interface VoiceSample {
  /** Client file name: informative only, never trusted. */
  filename: string;
  /** Recognised from the content (src/media/audio-sniff.ts), not the client's content type. */
  format: AudioFormat;
  content_type: string;
  data: Buffer;
}

export interface ClonedVoice {
  /** The voice's id at the provider. */
  voice_id: string;
  requires_verification: boolean;
}

/** What a provider returns whole (the other speech formats are encoded from its PCM by ../../media/audio-encode.ts). */
export type ProviderSpeechFormat = Extract<SpeechFormat, 'wav' | 'pcm'>;

export interface SpeechRequest {
  /** The provider's speech model. */
  model: string;
  /** A cloned voice's provider id or one of `presetVoices()`. */
  voice_id: string;
  text: string;
  format: ProviderSpeechFormat;
  /** Speaking rate, 1 = normal (0.25 to 4); providers that cannot change it speak at 1. */
  speed?: number | undefined;
}

export interface SynthesizedSpeech {
  audio: Buffer;
  content_type: string;
}

/** Words of a speech and when each is spoken, in seconds from the start of its audio (three arrays of one length). */
export interface WordTimestamps {
  words: string[];
  start_s: number[];
  end_s: number[];
}

/** Timings of a part of a speech's words, moved by `by_s` to count from the start of the whole speech. */
export const shiftedWords = (w: WordTimestamps, by_s: number): WordTimestamps => ({
  words: w.words,
  start_s: w.start_s.map((s) => Math.round((s + by_s) * 1000) / 1000),
  end_s: w.end_s.map((s) => Math.round((s + by_s) * 1000) / 1000),
});

/** A piece of a speech streamed with its timing: the next PCM, or the timing of the next words. */
export type TimedSpeechPiece = { pcm: Buffer } | { words: WordTimestamps };

export interface VoiceProvider {
  /** Adapter name, recorded with each voice ("simulator", "elevenlabs", "cartesia"); "none" when not configured. */
  readonly name: string;
  /** False for `none`: every voice operation answers 503 provider_not_configured. */
  readonly configured: boolean;
  /** Named voices of the provider usable in speech without cloning. */
  presetVoices(): readonly string[];
  cloneVoice(input: { name: string; samples: VoiceSample[] }): Promise<ClonedVoice>;
  /** Idempotent: deleting a voice the provider no longer has succeeds. */
  deleteVoice(voice_id: string): Promise<void>;
  synthesize(req: SpeechRequest): Promise<SynthesizedSpeech>;
  /**
   * The speech as raw PCM (s16le mono at `pcm_rate_hz`), chunk by chunk as the provider makes it, for
   * answers streamed while they are made. Providers without it are asked for the whole PCM instead.
   */
  synthesizeStream?(req: Omit<SpeechRequest, 'format'>): AsyncIterable<Buffer>;
  /**
   * The speech as raw PCM, as synthesizeStream, with the timing of its words between the audio: each word
   * once, in order, its times monotonic and within the audio's duration.
   */
  synthesizeStreamWithTimestamps?(req: Omit<SpeechRequest, 'format'>): AsyncIterable<TimedSpeechPiece>;
  /**
   * An utterance spoken while its text arrives (a WebSocket context): over the provider's own streaming
   * input when it has one. Providers without it are asked segment by segment (src/voices/speech-contexts.ts).
   */
  openContext?(req: SpeechContextRequest): ProviderSpeechContext;
  /**
   * A connection carrying several utterances at once (Cartesia's WebSocket of contexts): a speech socket
   * opens one to each such provider as it opens (ahead of its first context), its contexts over it, a new
   * one at a context once it failed, and closes it when it closes. Preferred to `openContext` when both exist.
   */
  openContextConnection?(): ProviderContextConnection;
  /** The sample rate of this provider's PCM (its descriptor's pcm_rate_hz); null for `none`, which speaks nothing. */
  readonly pcm_rate_hz: number | null;
}

/**
 * The voice providers this process runs side by side, in their configured order: the first is where a clone
 * goes unless it names another. A voice is always spoken and deleted by the provider that cloned it.
 */
export class VoiceProviderSet {
  readonly #byName: ReadonlyMap<string, VoiceProvider>;

  constructor(readonly list: readonly VoiceProvider[]) {
    this.#byName = new Map(list.map((p) => [p.name, p]));
  }

  /** False when none is configured: every voice operation answers 503 provider_not_configured. */
  get configured(): boolean {
    return this.list.length > 0;
  }

  /** Where a clone goes when it names no provider; undefined when none is configured. */
  get default(): VoiceProvider | undefined {
    return this.list[0];
  }

  get names(): readonly string[] {
    return this.list.map((p) => p.name);
  }

  /** The configured provider of that name; undefined when it is not configured here. */
  get(name: string): VoiceProvider | undefined {
    return this.#byName.get(name);
  }
}

/**
 * A failure that is the operator's account at the provider, not the customer's request: credentials
 * refused, its quota used up, its voice slots all taken. The customer gets a 503 that says so without
 * the account's details; the operator gets a log line with them.
 */
export type ProviderAccountProblem = 'credentials' | 'quota_exhausted' | 'voice_slots_full';

/** What every voice operation answers (503 provider_not_configured) while no voice provider is configured. */
export const NOT_CONFIGURED_MESSAGE = 'the third-party voice provider is not configured';

export class VoiceProviderError extends Error {
  override name = 'VoiceProviderError';
  constructor(
    readonly kind: 'rejected' | 'unavailable',
    message: string,
    readonly account?: ProviderAccountProblem,
  ) {
    super(message);
  }
}

/** A VoiceProviderError with what the provider said: its HTTP status, its error code, its Retry-After (an adapter's errors). */
export class VoiceProviderCallError extends VoiceProviderError {
  constructor(
    kind: 'rejected' | 'unavailable',
    message: string,
    readonly details: { status?: number; code?: string; retryAfterSeconds?: number } = {},
    account?: ProviderAccountProblem,
  ) {
    super(kind, message, account);
  }
}

export const isVoiceProviderError = (err: unknown): err is VoiceProviderError => err instanceof VoiceProviderError;

/** What opens an utterance whose text arrives piece by piece. */
export interface SpeechContextRequest {
  model: string;
  voice_id: string;
  speed?: number | undefined;
}

/**
 * The next PCM of an utterance (s16le mono at pcm_rate_hz, whole samples): bytes, or the base64 a provider
 * sent it in over its WebSocket with the number of bytes it decodes to. The speech socket sends its audio
 * in base64: the provider's is relayed as it came, not decoded and encoded again for every chunk.
 */
export type ContextPcm = { pcm: Buffer } | { pcm_base64: string; pcm_bytes: number };

export const isContextPcm = (piece: ContextPiece): piece is ContextPcm => 'pcm' in piece || 'pcm_base64' in piece;

/** The bytes of a piece of PCM. */
export const pcmBytes = (p: ContextPcm): number => ('pcm' in p ? p.pcm.length : p.pcm_bytes);

/** A piece of PCM in base64: the provider's own when it came so. */
export const pcmBase64 = (p: ContextPcm): string => ('pcm' in p ? p.pcm.toString('base64') : p.pcm_base64);

/**
 * What an utterance yields as the provider makes it: the next PCM, the timing of the next words, or how
 * many of the characters sent it has now spoken (a running total).
 */
export type ContextPiece = ContextPcm | { words: WordTimestamps } | { spoken_characters: number };

/** One utterance at the provider: text in, pieces out. */
export interface ProviderSpeechContext {
  /** The next text of the utterance; `flush`: speak what it has now rather than wait for more. */
  send(text: string, flush: boolean): void;
  /** No more text: the pieces end once everything sent is spoken. */
  end(): void;
  /** Stop now: the pieces end without the rest (what was spoken so far has been reported). */
  cancel(): void;
  /** Ends when the utterance is spoken (or cancelled); throws a VoiceProviderError when the provider failed. */
  readonly pieces: AsyncIterable<ContextPiece>;
}

/** One connection to a provider carrying several utterances (its contexts), each a ProviderSpeechContext. */
export interface ProviderContextConnection {
  /** False once the connection failed or was closed: a new utterance needs a new connection. */
  readonly usable: boolean;
  openContext(req: SpeechContextRequest): ProviderSpeechContext;
  /** Closes the connection; contexts still open over it end (failed, unless cancelled first). */
  close(): void;
}
