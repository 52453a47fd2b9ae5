// Recognises the image files video models take as frames by their content (magic bytes), never by the
// client's declared type: PNG (its 8-byte signature and an IHDR chunk first), JPEG (SOI then a marker)
// and WebP (a RIFF container of form type WEBP with a VP8/VP8L/VP8X chunk first).
import type { ImageMimeType } from '../models/values.js';

const ascii = (b: Uint8Array, at: number, s: string): boolean => {
  if (at + s.length > b.length) return false;
  for (let i = 0; i < s.length; i++) if (b[at + i] !== s.charCodeAt(i)) return false;
  return true;
};

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** The image type of a file from its bytes, or null when it is not a PNG, JPEG or WebP image. */
export function sniffImage(bytes: Uint8Array): ImageMimeType | null {
  if (bytes.length >= 16 && PNG_SIGNATURE.every((v, i) => bytes[i] === v) && ascii(bytes, 12, 'IHDR')) return 'image/png';
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff && bytes[3]! >= 0xc0 && bytes[3] !== 0xff)
    return 'image/jpeg';
  if (
    bytes.length >= 16 &&
    ascii(bytes, 0, 'RIFF') &&
    ascii(bytes, 8, 'WEBP') &&
    (ascii(bytes, 12, 'VP8 ') || ascii(bytes, 12, 'VP8L') || ascii(bytes, 12, 'VP8X'))
  ) {
    return 'image/webp';
  }
  return null;
}
