// An utterance whose text arrives piece by piece (a WebSocket context, ./speech-socket.ts), at a provider.
// A provider with streaming input of its own (ElevenLabs' stream-input) opens it there (`openContext`);
// the others are asked segment by segment: each text the client sends is one synthesis, streamed, spoken
// in order after the one before. A segment counts as spoken once its first audio arrived: the provider
// has then taken (and bills) the whole of it.
import type {
  ContextPiece,
  ProviderSpeechContext,
  SpeechContextRequest,
  TimedSpeechPiece,
  VoiceProvider,
  WordTimestamps,
} from '../providers/voice/types.js';

/** The provider's context for `req`: its own when it has one, else segments. */
export function openSpeechContext(provider: VoiceProvider, req: SpeechContextRequest): ProviderSpeechContext {
  return provider.openContext ? provider.openContext(req) : segmentedContext(provider, req);
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

/** Timings of a segment's words, moved to count from the start of the utterance. */
const shifted = (w: WordTimestamps, by_s: number): WordTimestamps => ({
  words: w.words,
  start_s: w.start_s.map((s) => Math.round((s + by_s) * 1000) / 1000),
  end_s: w.end_s.map((s) => Math.round((s + by_s) * 1000) / 1000),
});

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
        if ('words' in piece) yield { words: shifted(piece.words, start_s) };
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
