// Speech in the formats OpenAI's speech API offers, from the provider's 16-bit mono PCM:
//
//   pcm   the samples as they are (s16le, mono, at the provider's rate)          streamed as made
//   wav   RIFF/WAVE around them; streamed with the sizes unknown (0xFFFFFFFF),    streamed as made
//         as OpenAI's streamed WAV is; whole, with the exact sizes
//   mp3   MPEG-1/2 Layer III by LAME (@breezystack/lamejs, pure JavaScript)     streamed as made
//   opus  Opus in Ogg by libopus, resampled to 24 kHz                            whole (see below)
//   aac   AAC-LC in ADTS by FFmpeg's native AAC encoder                         whole
//   flac  FLAC by FFmpeg's encoder                                               whole
//
// opus, aac and flac are encoded by FFmpeg compiled to WebAssembly (@ffmpeg/core, run in a worker by
// ./ffmpeg-wasm.ts), which encodes a complete input: a stream in these formats sends its bytes when
// the provider has finished. Their encoder runs in a place of the worker's speech lane that the caller
// reserved before the provider was called; a worker that stopped mid-encode is replaced and the encode
// tried once more (an encode FFmpeg threw on is not: it would throw again). No encoder downloads anything at install or run time.
import { Mp3Encoder } from '@breezystack/lamejs';
import { ApiError } from '../errors.js';
import { MediaCommandTrapped, type MediaCommand } from './ffmpeg-wasm.js';
import type { SpeechFormat } from '../models/values.js';
import { pcmToWav } from './wav.js';

export const SPEECH_CONTENT_TYPES: Readonly<Record<SpeechFormat, (rate_hz: number) => string>> = {
  mp3: () => 'audio/mpeg',
  opus: () => 'audio/ogg; codecs=opus',
  aac: () => 'audio/aac',
  flac: () => 'audio/flac',
  wav: () => 'audio/wav',
  pcm: (rate_hz) => `audio/pcm;rate=${rate_hz};channels=1;encoding=s16le`,
};

/** MP3 bit rate: speech, mono. */
const MP3_KBPS = 64;

/** An encoder fed PCM as it arrives: `push` returns what can be sent now, `end` the rest. */
export interface AudioEncoder {
  readonly content_type: string;
  /** Whether bytes come out before the input ends. */
  readonly incremental: boolean;
  push(pcm: Buffer): Buffer;
  end(): Promise<Buffer>;
}

/** Whether `format` is encoded by FFmpeg (a place in its speech lane is reserved before the provider is called). */
export const needsMediaWorker = (format: SpeechFormat): format is 'opus' | 'aac' | 'flac' =>
  format === 'opus' || format === 'aac' || format === 'flac';

/** The sample rate of a `audio/pcm;rate=N;...` content type. */
export function pcmRateOf(content_type: string): number {
  const m = /rate=(\d+)/.exec(content_type);
  if (!m) throw new Error(`invariant: a PCM content type names its rate (${content_type})`);
  return Number(m[1]);
}

const samplesOf = (pcm: Buffer) => new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + pcm.length - (pcm.length % 2)));

/** A WAV header whose sizes say "unknown" (streamed): players read to the end. */
function streamingWavHeader(rate_hz: number): Buffer {
  const h = pcmToWav(Buffer.alloc(0), rate_hz);
  h.writeUInt32LE(0xffffffff, 4);
  h.writeUInt32LE(0xffffffff, 40);
  return h;
}

const FFMPEG_ARGS: Record<'opus' | 'aac' | 'flac', { args: string[]; out: string }> = {
  opus: { args: ['-c:a', 'libopus', '-ar', '24000', '-b:a', '32k', '-application', 'voip', '-f', 'ogg'], out: 'out.opus' },
  aac: { args: ['-c:a', 'aac', '-b:a', '64k', '-f', 'adts'], out: 'out.aac' },
  flac: { args: ['-c:a', 'flac', '-f', 'flac'], out: 'out.flac' },
};

/**
 * An encoder of `format` for PCM at `rate_hz`. `streaming`: bytes go out before the end (a WAV then has
 * unknown sizes); otherwise the output is one complete file. `media` runs FFmpeg for the formats that
 * need it (a reserved place; null for the others).
 */
export function audioEncoder(format: SpeechFormat, rate_hz: number, media: MediaCommand | null, streaming: boolean): AudioEncoder {
  const content_type = SPEECH_CONTENT_TYPES[format](rate_hz);
  switch (format) {
    case 'pcm':
      return { content_type, incremental: true, push: (pcm) => pcm, end: async () => Buffer.alloc(0) };
    case 'mp3': {
      const lame = new Mp3Encoder(1, rate_hz, MP3_KBPS);
      let odd: Buffer = Buffer.alloc(0);
      return {
        content_type,
        incremental: true,
        push(pcm) {
          const all = odd.length ? Buffer.concat([odd, pcm]) : pcm;
          odd = all.length % 2 ? Buffer.from(all.subarray(all.length - 1)) : Buffer.alloc(0);
          return Buffer.from(lame.encodeBuffer(samplesOf(all)));
        },
        end: async () => Buffer.from(lame.flush()),
      };
    }
    case 'wav': {
      if (streaming) {
        let first = true;
        return {
          content_type,
          incremental: true,
          push(pcm) {
            if (!first) return pcm;
            first = false;
            return Buffer.concat([streamingWavHeader(rate_hz), pcm]);
          },
          end: async () => (first ? streamingWavHeader(rate_hz) : Buffer.alloc(0)),
        };
      }
      return wholeFile(content_type, async (pcm) => pcmToWav(pcm, rate_hz));
    }
    case 'opus':
    case 'aac':
    case 'flac': {
      const { args, out } = FFMPEG_ARGS[format];
      if (!media) throw new Error(`invariant: ${format} is encoded with a place reserved in the media worker`);
      return wholeFile(content_type, async (pcm) => {
        // The media worker takes the input it is given: each attempt gets a WAV of its own.
        let encoded: Buffer | null;
        try {
          encoded = await media(pcmToWav(pcm, rate_hz), 'in.wav', args, out);
        } catch (err) {
          // A worker that stopped is replaced; FFmpeg that threw on this input would throw again.
          if (!(err instanceof ApiError && err.code === 'media_worker_unavailable') || err instanceof MediaCommandTrapped) throw err;
          encoded = await media(pcmToWav(pcm, rate_hz), 'in.wav', args, out);
        }
        if (!encoded) throw new Error(`FFmpeg could not encode ${format}`);
        return encoded;
      });
    }
  }
}

/** An encoder that needs the whole input: collects it, encodes at the end. */
function wholeFile(content_type: string, encode: (pcm: Buffer) => Promise<Buffer>): AudioEncoder {
  const chunks: Buffer[] = [];
  return {
    content_type,
    incremental: false,
    push(pcm) {
      chunks.push(pcm);
      return Buffer.alloc(0);
    },
    end: () => encode(Buffer.concat(chunks)),
  };
}
