// An utterance whose text arrives piece by piece (a WebSocket context, ./speech-socket.ts), at a provider.
// A provider with streaming input of its own (ElevenLabs' stream-input) opens it there (`openContext`);
// the others are asked segment by segment: each text the client sends is one synthesis, streamed, spoken
// in order after the one before. A segment counts as spoken once its first audio arrived: the provider
// has then taken (and bills) the whole of it.
import type { ContextPiece, ProviderSpeechContext, SpeechContextRequest, VoiceProvider } from '../providers/voice/types.js';

/** The provider's context for `req`: its own when it has one, else segments. */
export function openSpeechContext(provider: VoiceProvider, req: SpeechContextRequest): ProviderSpeechContext {
  return provider.openContext ? provider.openContext(req) : segmentedContext(provider, req);
}

/** The PCM of one segment, streamed when the provider streams, else whole. */
function segmentAudio(provider: VoiceProvider, req: SpeechContextRequest, text: string): AsyncIterable<Buffer> {
  const r = { model: req.model, voice_id: req.voice_id, text, speed: req.speed };
  if (provider.synthesizeStream) return provider.synthesizeStream(r);
  return (async function* () {
    yield (await provider.synthesize({ ...r, format: 'pcm' })).audio;
  })();
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
  async function* pieces(): AsyncGenerator<ContextPiece> {
    let spoken = 0;
    for (;;) {
      while (segments.length === 0 && !ended && !cancelled) await new Promise<void>((r) => (wake = r));
      if (cancelled || segments.length === 0) return;
      const text = segments.shift()!;
      let first = true;
      for await (const pcm of segmentAudio(provider, req, text)) {
        if (cancelled) return;
        if (first) {
          first = false;
          spoken += [...text].length;
          yield { spoken_characters: spoken };
        }
        if (pcm.length > 0) yield { pcm };
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
