// An utterance whose text arrives piece by piece (a WebSocket context, ./speech-socket.ts), at a provider.
// A provider that carries several utterances over one connection (Cartesia's WebSocket of contexts) has one
// such connection per speech socket, opened ahead when the socket opens (so that its first context does not
// wait for the provider's handshake), replaced at the next context once it failed, and closed with the
// socket (ContextConnections). A provider with streaming input of its own per utterance (ElevenLabs'
// stream-input) opens it there (`openContext`). The others are asked segment by segment: each text the client
// sends is one synthesis, streamed, spoken in order after the one before. A segment counts as spoken once its
// first audio arrived: the provider has then taken (and bills) the whole of it.
import {
  shiftedWords,
  type ContextPiece,
  type ProviderContextConnection,
  type ProviderSpeechContext,
  type SpeechContextRequest,
  type TimedSpeechPiece,
  type VoiceProvider,
} from '../providers/voice/types.js';

/** The provider's context for `req`: its own when it has one, else segments. */
export function openSpeechContext(provider: VoiceProvider, req: SpeechContextRequest): ProviderSpeechContext {
  return provider.openContext ? provider.openContext(req) : segmentedContext(provider, req);
}

/** A speech socket's connections to the providers that carry several contexts over one, by provider name. */
export class ContextConnections {
  private readonly byProvider = new Map<string, ProviderContextConnection>();
  private closed = false;

  /**
   * Opens the connection to each of `providers` that carries contexts over one, ahead of the socket's first
   * context. Nothing is said of it to anyone: one that fails (the provider unreachable, our key refused,
   * or the provider closing it while idle) is replaced at the next context, which meets any failure of
   * its own handshake as its own. One still opening is taken as it is, its failure then the context's.
   */
  preconnect(providers: readonly VoiceProvider[]): void {
    for (const p of providers) {
      if (!p.openContextConnection || this.closed || this.byProvider.has(p.name)) continue;
      this.byProvider.set(p.name, p.openContextConnection());
    }
  }

  /** A context at `provider`: over this socket's connection to it (a new one if it has none, or it failed), or as openSpeechContext. */
  open(provider: VoiceProvider, req: SpeechContextRequest): ProviderSpeechContext {
    if (!provider.openContextConnection || this.closed) return openSpeechContext(provider, req);
    let conn = this.byProvider.get(provider.name);
    if (!conn?.usable) {
      conn = provider.openContextConnection();
      this.byProvider.set(provider.name, conn);
    }
    return conn.openContext(req);
  }

  /** Closes every connection (once the socket's contexts are settled). */
  close(): void {
    this.closed = true;
    for (const c of this.byProvider.values()) c.close();
    this.byProvider.clear();
  }
}

/** The PCM of one segment with its words' timings when the provider times them, streamed when it streams, else whole. */
async function* segmentAudio(provider: VoiceProvider, req: SpeechContextRequest, text: string): AsyncGenerator<TimedSpeechPiece> {
  const r = { model: req.model, voice_id: req.voice_id, text, speed: req.speed };
  if (provider.synthesizeStreamWithTimestamps) return yield* provider.synthesizeStreamWithTimestamps(r);
  if (provider.synthesizeStream) {
    for await (const pcm of provider.synthesizeStream(r)) yield { pcm };
    return;
  }
  yield { pcm: (await provider.synthesize({ ...r, format: 'pcm' })).audio };
}

export function segmentedContext(provider: VoiceProvider, req: SpeechContextRequest): ProviderSpeechContext {
  const segments: string[] = [];
  let ended = false;
  let cancelled = false;
  let wake: (() => void) | null = null;
  const poke = () => {
    wake?.();
    wake = null;
  };
  const rate_hz = provider.pcm_rate_hz ?? 1;
  async function* pieces(): AsyncGenerator<ContextPiece> {
    let spoken = 0;
    let audio_bytes = 0;
    for (;;) {
      while (segments.length === 0 && !ended && !cancelled) await new Promise<void>((r) => (wake = r));
      if (cancelled || segments.length === 0) return;
      const text = segments.shift()!;
      const start_s = audio_bytes / 2 / rate_hz;
      let first = true;
      for await (const piece of segmentAudio(provider, req, text)) {
        if (cancelled) return;
        if (first) {
          first = false;
          spoken += [...text].length;
          yield { spoken_characters: spoken };
        }
        if ('words' in piece) yield { words: shiftedWords(piece.words, start_s) };
        else if (piece.pcm.length > 0) {
          audio_bytes += piece.pcm.length;
          yield { pcm: piece.pcm };
        }
      }
    }
  }
  return {
    send(text) {
      if (ended || cancelled) throw new Error('invariant: text sent to an utterance that ended');
      segments.push(text);
      poke();
    },
    end() {
      ended = true;
      poke();
    },
    cancel() {
      cancelled = true;
      poke();
    },
    pieces: pieces(),
  };
}
