// Image files for image-to-video tests: a real PNG (encoded here, any size), JPEG-framed bytes and a
// real 1x1 lossless WebP. The service recognises images by their content, so these are what it sees.
import zlib from 'node:zlib';

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** An RGB gradient PNG of width x height; `seed` varies the pixels (distinct files). */
export function pngImage(width = 64, height = 36, seed = 0): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type RGB
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    raw[row] = 0; // filter: none
    for (let x = 0; x < width; x++) {
      raw[row + 1 + x * 3] = (x * 4 + seed) & 0xff;
      raw[row + 2 + x * 3] = (y * 7 + seed * 3) & 0xff;
      raw[row + 3 + x * 3] = (x * y + seed * 5) & 0xff;
    }
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw, { level: 0 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A PNG of about `bytes` bytes (uncompressed pixel data): for the size limits. */
export function pngOfSize(bytes: number): Buffer {
  const width = 1024;
  return pngImage(width, Math.ceil(bytes / (width * 3 + 1)));
}

/** JPEG framing (SOI, an APP0 JFIF segment, scan bytes, EOI): what a JPEG file starts and ends with. */
export function jpegImage(seed = 0): Buffer {
  const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x48, 0x00, 0x48, 0x00, 0x00]);
  const body = Buffer.from(Array.from({ length: 256 }, (_, i) => (i * 31 + seed) & 0x7f));
  return Buffer.concat([Buffer.from([0xff, 0xd8]), app0, body, Buffer.from([0xff, 0xd9])]);
}

/** A 1x1 lossless WebP. */
export const WEBP_IMAGE = Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64');

/** The request field for an image. */
export const imageField = (bytes: Buffer, mimeType: string) => ({ bytesBase64Encoded: bytes.toString('base64'), mimeType });
