// Recognises audio files by their content (magic bytes and a little structure), never by the
// client's content type or file name: WAV, MP3 (ID3 tag or MPEG audio frame sync), AAC (ADTS), FLAC,
// Ogg (Opus, Vorbis, Speex, FLAC), M4A (ISO BMFF `ftyp` with an audio brand) and WebM.
// It looks at the head of a file only: SNIFF_BYTES are always enough to decide.

export type AudioFormat = 'wav' | 'mp3' | 'aac' | 'flac' | 'ogg' | 'm4a' | 'webm';

/** Bytes of a file's head that `sniffAudio` needs at most (longer than any MPEG audio frame). */
export const SNIFF_BYTES = 4096;

export const AUDIO_CONTENT_TYPES: Readonly<Record<AudioFormat, string>> = {
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  ogg: 'audio/ogg',
  m4a: 'audio/mp4',
  webm: 'audio/webm',
};

const ascii = (b: Uint8Array, at: number, s: string): boolean => {
  if (at + s.length > b.length) return false;
  for (let i = 0; i < s.length; i++) if (b[at + i] !== s.charCodeAt(i)) return false;
  return true;
};

/**
 * The audio format of a file from its head (its first SNIFF_BYTES, or the whole file when shorter),
 * or null when it is not a recognised audio file.
 */
export function sniffAudio(head: Uint8Array): AudioFormat | null {
  if (head.length < 4) return null;
  if ((ascii(head, 0, 'RIFF') || ascii(head, 0, 'RF64')) && ascii(head, 8, 'WAVE')) return 'wav';
  if (ascii(head, 0, 'fLaC')) return 'flac';
  if (ascii(head, 0, 'OggS')) return sniffOgg(head);
  if (ascii(head, 4, 'ftyp')) return sniffFtyp(head);
  if (head[0] === 0x1a && head[1] === 0x45 && head[2] === 0xdf && head[3] === 0xa3) return sniffEbml(head);
  if (ascii(head, 0, 'ID3')) return sniffId3(head);
  if (head[0] === 0xff && (head[1]! & 0xe0) === 0xe0) return sniffFrames(head);
  return null;
}

// An ID3v2 tag (10-byte header, syncsafe size) precedes MP3 (and sometimes AAC or FLAC) data.
function sniffId3(b: Uint8Array): AudioFormat | null {
  if (b.length < 10) return null;
  const version = b[3]!;
  if (version < 2 || version > 4 || b[4] === 0xff) return null;
  for (let i = 6; i < 10; i++) if (b[i]! >= 0x80) return null;
  const size = (b[6]! << 21) | (b[7]! << 14) | (b[8]! << 7) | b[9]!;
  const end = 10 + size + (b[5]! & 0x10 ? 10 : 0);
  // A tag longer than the head (cover art): the tag alone identifies an audio file.
  if (end + 4 > b.length) return 'mp3';
  const inner = sniffAudio(b.subarray(end));
  return inner === 'mp3' || inner === 'aac' || inner === 'flac' ? inner : null;
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

// A frame header alone is 11 set bits and a few fields: too weak. Require the next frame's header
// right where the first frame ends (or the file to end exactly there).
function sniffFrames(b: Uint8Array): AudioFormat | null {
  const first = frameAt(b, 0);
  if (!first) return null;
  if (first.length === b.length) return first.format;
  const second = frameAt(b, first.length);
  return second && second.format === first.format ? first.format : null;
}

// Ogg carries video (Theora) too: the first page must start an audio codec's stream.
function sniffOgg(b: Uint8Array): AudioFormat | null {
  if (b.length < 28 || b[4] !== 0) return null;
  const payload = 27 + b[26]!;
  if (ascii(b, payload, 'OpusHead') || ascii(b, payload, '\x01vorbis') || ascii(b, payload, 'Speex   ') || ascii(b, payload, '\x7fFLAC')) {
    return 'ogg';
  }
  return null;
}

/** ISO BMFF brands of audio-only files (AAC/ALAC in MP4: .m4a, .m4b audiobooks, .m4p, Flash audio). */
const AUDIO_BRANDS = new Set(['M4A ', 'M4B ', 'M4P ', 'F4A ', 'F4B ']);

function sniffFtyp(b: Uint8Array): AudioFormat | null {
  if (b.length < 16) return null;
  const size = ((b[0]! << 24) >>> 0) + (b[1]! << 16) + (b[2]! << 8) + b[3]!;
  if (size < 16 || size > 4096) return null;
  const end = Math.min(size, b.length);
  const brand = (at: number) => String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);
  if (AUDIO_BRANDS.has(brand(8))) return 'm4a';
  for (let at = 16; at + 4 <= end; at += 4) if (AUDIO_BRANDS.has(brand(at))) return 'm4a';
  return null;
}

/** An EBML variable-length integer at `at`: its value (marker removed unless `keepMarker`) and width. */
function vint(b: Uint8Array, at: number, keepMarker: boolean): { value: number; width: number } | null {
  const first = b[at];
  if (first === undefined || first === 0) return null;
  const width = Math.clz32(first) - 23; // 1..8
  if (width > 8 || at + width > b.length) return null;
  let value = keepMarker ? first : first & (0xff >> width);
  for (let i = 1; i < width; i++) value = value * 256 + b[at + i]!;
  return { value, width };
}

// WebM is Matroska with the EBML DocType "webm".
function sniffEbml(b: Uint8Array): AudioFormat | null {
  const headerSize = vint(b, 4, false);
  if (!headerSize) return null;
  let at = 4 + headerSize.width;
  const end = Math.min(at + headerSize.value, b.length);
  while (at < end) {
    const id = vint(b, at, true);
    if (!id) return null;
    const size = vint(b, at + id.width, false);
    if (!size) return null;
    const data = at + id.width + size.width;
    if (id.value === 0x4282) {
      // DocType
      const docType = String.fromCharCode(...b.subarray(data, Math.min(data + size.value, b.length))).replace(/\0+$/, '');
      return docType === 'webm' ? 'webm' : null;
    }
    at = data + size.value;
  }
  return null;
}
