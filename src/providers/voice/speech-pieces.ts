// What the voice adapters share to stream speech: PCM cut at whole 16-bit samples, and word timestamps made
// from a text (the simulator's), or grouped from a provider's character alignment (ElevenLabs').
import type { ContextPcm, WordTimestamps } from './types.js';

/** Chunks of 16-bit PCM cut at whole samples (a network chunk may split one); an odd byte left at the end is not a sample. */
export async function* wholeSamples(bytes: AsyncIterable<Uint8Array>): AsyncIterable<Buffer> {
  let odd: Buffer | null = null;
  for await (const value of bytes) {
    const chunk: Buffer = odd ? Buffer.concat([odd, value]) : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    const whole = chunk.length - (chunk.length % 2);
    odd = whole < chunk.length ? Buffer.from(chunk.subarray(whole)) : null;
    if (whole > 0) yield chunk.subarray(0, whole);
  }
}

/**
 * The bytes canonical base64 (its length a multiple of 4, `=`-padded) decodes to, from its length alone;
 * null for any other. The alphabet is not scanned (that costs more than decoding): a provider's base64 is
 * taken as its documentation says it is.
 */
export function base64Bytes(base64: string): number | null {
  if (base64.length % 4 !== 0) return null;
  const pad = base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0;
  return (base64.length / 4) * 3 - pad;
}

/**
 * A provider's PCM arriving in base64 messages, as pieces of whole 16-bit samples (a sample may straddle
 * two messages). A message of whole samples with nothing carried from the one before is passed on as it
 * came (no decoding); otherwise it is decoded, joined to the byte carried, cut, and its odd byte carried on.
 */
export class Base64Samples {
  #odd: Buffer | null = null;

  /** The whole samples of the next message; null when it completes none. */
  next(base64: string): ContextPcm | null {
    const bytes = this.#odd === null ? base64Bytes(base64) : null;
    if (bytes !== null && bytes % 2 === 0) return bytes > 0 ? { pcm_base64: base64, pcm_bytes: bytes } : null;
    const raw = Buffer.from(base64, 'base64');
    const chunk = this.#odd ? Buffer.concat([this.#odd, raw]) : raw;
    const whole = chunk.length - (chunk.length % 2);
    this.#odd = whole < chunk.length ? Buffer.from(chunk.subarray(whole)) : null;
    return whole > 0 ? { pcm: chunk.subarray(0, whole) } : null;
  }
}

/** The words of a text (runs of non-white-space) with their code point offsets: [from, to). */
export function wordSpans(text: string): { word: string; from: number; to: number }[] {
  const spans: { word: string; from: number; to: number }[] = [];
  let at = 0;
  for (const part of text.split(/(\s+)/u)) {
    const n = [...part].length;
    if (part.length > 0 && !/^\s+$/u.test(part)) spans.push({ word: part, from: at, to: at + n });
    at += n;
  }
  return spans;
}

/** Word timestamps of `spans` when every character takes `char_s` seconds. */
export function evenlyTimed(spans: readonly { word: string; from: number; to: number }[], char_s: number): WordTimestamps {
  const round = (s: number) => Math.round(s * 1e6) / 1e6;
  return {
    words: spans.map((s) => s.word),
    start_s: spans.map((s) => round(s.from * char_s)),
    end_s: spans.map((s) => round(s.to * char_s)),
  };
}

/**
 * A provider's character alignment (characters with their start and end times, in pieces as they stream)
 * grouped into words: white space ends a word; a word is handed out once it has ended (or at `end`).
 * Times are kept monotonic and within the audio received so far.
 */
export class CharacterWords {
  #word = '';
  #start = 0;
  #end = 0;
  #last_end_s = 0;

  /** The words completed by these characters. */
  push(characters: readonly string[], starts: readonly number[], ends: readonly number[], audio_s: number): WordTimestamps | null {
    const out: WordTimestamps = { words: [], start_s: [], end_s: [] };
    characters.forEach((ch, i) => {
      if (/^\s*$/u.test(ch)) {
        this.flushInto(out, audio_s);
        return;
      }
      if (this.#word === '') this.#start = starts[i] ?? this.#end;
      this.#word += ch;
      this.#end = Math.max(this.#end, ends[i] ?? this.#end);
    });
    return out.words.length > 0 ? out : null;
  }

  /** The last word, if the text did not end with white space. */
  end(audio_s: number): WordTimestamps | null {
    const out: WordTimestamps = { words: [], start_s: [], end_s: [] };
    this.flushInto(out, audio_s);
    return out.words.length > 0 ? out : null;
  }

  private flushInto(out: WordTimestamps, audio_s: number): void {
    if (this.#word === '') return;
    const start = Math.min(Math.max(this.#start, this.#last_end_s), audio_s);
    const end = Math.min(Math.max(this.#end, start), audio_s);
    out.words.push(this.#word);
    out.start_s.push(start);
    out.end_s.push(end);
    this.#last_end_s = end;
    this.#word = '';
  }
}
