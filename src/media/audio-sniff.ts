// Recognises audio files by their content (never by the client's content type or file name), with the
// `file-type` package: WAV, MP3, AAC (ADTS), FLAC, Ogg (Opus, Vorbis, Speex, FLAC), M4A and WebM.
// Two checks file-type does not make are kept here: an MPEG audio or ADTS frame header alone (11 set
// bits and a few fields, which plenty of binary data has) must be followed by a second frame header
// right where the first frame ends; and an ISO BMFF file whose major brand is generic (isom, mp42)
// is audio when one of its compatible brands is an audio brand.
import { fileTypeFromBuffer } from 'file-type';

export type AudioFormat = 'wav' | 'mp3' | 'aac' | 'flac' | 'ogg' | 'm4a' | 'webm';

/** Bytes of a file's head that `sniffAudio` needs at most (file-type's own detection size). */
export const SNIFF_BYTES = 4100;

export const AUDIO_CONTENT_TYPES: Readonly<Record<AudioFormat, string>> = {
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  ogg: 'audio/ogg',
  m4a: 'audio/mp4',
  webm: 'audio/webm',
};

/** file-type's extensions of the audio files accepted, by our format. */
const FORMAT_OF_EXT: Readonly<Record<string, AudioFormat>> = {
  wav: 'wav',
  flac: 'flac',
  ogg: 'ogg',
  opus: 'ogg',
  oga: 'ogg',
  spx: 'ogg',
  m4a: 'm4a',
  m4b: 'm4a',
  m4p: 'm4a',
  f4a: 'm4a',
  f4b: 'm4a',
  webm: 'webm',
};

/**
 * The audio format of a file from its head (its first SNIFF_BYTES, or the whole file when shorter),
 * or null when it is not a recognised audio file.
 */
export async function sniffAudio(head: Uint8Array): Promise<AudioFormat | null> {
  const type = await fileTypeFromBuffer(head.subarray(0, SNIFF_BYTES)).catch(() => undefined);
  if (!type) return null;
  if (type.ext === 'mp3' || type.ext === 'aac') return confirmFrames(head);
  if (type.ext === 'mp4') return hasAudioBrand(head) ? 'm4a' : null;
  return FORMAT_OF_EXT[type.ext] ?? null;
}

// MP3 or AAC as file-type sees it: behind an ID3v2 tag, or raw frames.
function confirmFrames(b: Uint8Array): AudioFormat | null {
  if (b.length >= 10 && b[0] === 0x49 && b[1] === 0x44 && b[2] === 0x33) {
    // ID3v2: 10-byte header, syncsafe size, optional 10-byte footer. A tag longer than the head
    // (cover art): the tag alone identifies an audio file.
    const size = (b[6]! << 21) | (b[7]! << 14) | (b[8]! << 7) | b[9]!;
    const end = 10 + size + (b[5]! & 0x10 ? 10 : 0);
    return end + 4 > b.length ? 'mp3' : framesAt(b.subarray(end));
  }
  return framesAt(b);
}

const MPEG_BITRATES_KBPS: Record<string, readonly number[]> = {
  // [version 1 | 2/2.5][layer I | II | III]: index 1..14
  '1-1': [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  '1-2': [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  '1-3': [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  '2-1': [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  '2-2': [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  '2-3': [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const MPEG_SAMPLE_RATES: Record<number, readonly number[]> = {
  3: [44100, 48000, 32000], // MPEG 1
  2: [22050, 24000, 16000], // MPEG 2
  0: [11025, 12000, 8000], // MPEG 2.5
};
const ADTS_SAMPLE_RATE_INDEX_MAX = 12;

/** Length of the MPEG audio or ADTS frame at `at`, its format, or null when no valid header is there. */
function frameAt(b: Uint8Array, at: number): { format: 'mp3' | 'aac'; length: number } | null {
  if (at + 7 > b.length) return null;
  const b1 = b[at + 1]!;
  if (b[at] !== 0xff || (b1 & 0xe0) !== 0xe0) return null;
  const layerBits = (b1 >> 1) & 3;
  if (layerBits === 0) {
    // ADTS (AAC): a 12-bit sync word, then the frame length in 13 bits.
    if ((b1 & 0xf0) !== 0xf0) return null;
    if (((b[at + 2]! >> 2) & 0x0f) > ADTS_SAMPLE_RATE_INDEX_MAX) return null;
    const length = ((b[at + 3]! & 0x03) << 11) | (b[at + 4]! << 3) | (b[at + 5]! >> 5);
    return length >= 7 ? { format: 'aac', length } : null;
  }
  const versionBits = (b1 >> 3) & 3;
  if (versionBits === 1) return null; // reserved
  const bitrateIndex = b[at + 2]! >> 4;
  const rateIndex = (b[at + 2]! >> 2) & 3;
  if (bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return null; // free-format or invalid
  const layer = 4 - layerBits; // 1, 2 or 3
  const v1 = versionBits === 3;
  const kbps = MPEG_BITRATES_KBPS[`${v1 ? 1 : 2}-${layer}`]![bitrateIndex - 1]!;
  const rate = MPEG_SAMPLE_RATES[versionBits]![rateIndex]!;
  const padding = (b[at + 2]! >> 1) & 1;
  const length =
    layer === 1
      ? (Math.floor((12 * kbps * 1000) / rate) + padding) * 4
      : Math.floor(((layer === 3 && !v1 ? 72 : 144) * kbps * 1000) / rate) + padding;
  return { format: 'mp3', length };
}

// The next frame's header right where the first frame ends (or the file ending exactly there).
function framesAt(b: Uint8Array): AudioFormat | null {
  const first = frameAt(b, 0);
  if (!first) return null;
  if (first.length === b.length) return first.format;
  const second = frameAt(b, first.length);
  return second && second.format === first.format ? first.format : null;
}

/** ISO BMFF brands of audio-only files (AAC/ALAC in MP4: .m4a, .m4b audiobooks, .m4p, Flash audio). */
const AUDIO_BRANDS = new Set(['M4A ', 'M4B ', 'M4P ', 'F4A ', 'F4B ']);

// file-type decides by the major brand; a generic one (isom, mp42, ...) may list an audio brand
// among the compatible brands that follow it in the `ftyp` box.
function hasAudioBrand(b: Uint8Array): boolean {
  if (b.length < 16) return false;
  const size = ((b[0]! << 24) >>> 0) + (b[1]! << 16) + (b[2]! << 8) + b[3]!;
  const end = Math.min(size, b.length, 4096);
  const brand = (at: number) => String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);
  for (let at = 16; at + 4 <= end; at += 4) if (AUDIO_BRANDS.has(brand(at))) return true;
  return false;
}
