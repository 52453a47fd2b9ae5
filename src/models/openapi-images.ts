// The `image` / `lastFrame` inputs of a create as the OpenAPI document states them, exactly as the
// server enforces them (src/media/image-sniff.ts): an image is recognised by the first bytes of its
// file, so its base64 text must begin in a way that only such bytes encode. For each type the file's
// leading bytes are a template (a set of allowed values per byte); every base64 character those bytes
// fully determine becomes a character class of a `pattern`. With `mimeType` tied to its pattern, a
// request the document allows is one the server accepts.
import type { ImageMimeType } from './values.js';

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const ANY = 'any' as const;
type ByteSet = readonly number[] | typeof ANY;

const bytes = (...values: number[]): ByteSet[] => values.map((v) => [v]);
const text = (s: string): ByteSet[] => bytes(...[...s].map((c) => c.charCodeAt(0)));
const anyOf = (...values: number[]): ByteSet => values;
const range = (from: number, to: number): ByteSet => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const any = (n: number): ByteSet[] => Array.from({ length: n }, () => ANY);

/** The leading bytes image-sniff.ts requires of each type. */
const TEMPLATES: Record<ImageMimeType, ByteSet[]> = {
  // 8-byte signature, the first chunk's length, then its type IHDR
  'image/png': [...bytes(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a), ...any(4), ...text('IHDR')],
  // SOI (FF D8), then a marker: FF and a code from C0 to FE
  'image/jpeg': [...bytes(0xff, 0xd8, 0xff), range(0xc0, 0xfe)],
  // RIFF, its size, form type WEBP, then a VP8, VP8L or VP8X chunk
  'image/webp': [...text('RIFF'), ...any(4), ...text('WEBPVP8'), anyOf(0x20, 0x4c, 0x58)],
};

const BITS = 6;
const isSet = (b: ByteSet | undefined): b is readonly number[] => b !== undefined && b !== ANY && b.length > 1;

/** The bytes base64 character `index` spans (one or two). */
const bytesOf = (index: number) => [Math.floor((index * BITS) / 8), Math.floor((index * BITS + BITS - 1) / 8)];

/** The 6-bit values character `index` can take, given allowed values per byte (past the template: any). */
function charValues(template: ByteSet[], index: number): Set<number> {
  const [b0, b1] = bytesOf(index) as [number, number];
  const values = (b: number) => {
    const set = template[b] ?? ANY;
    return set === ANY ? (range(0, 255) as number[]) : set;
  };
  const possible = new Set<number>();
  for (const v0 of values(b0)) {
    for (const v1 of b1 === b0 ? [0] : values(b1)) {
      possible.add((((v0 << 8) | v1) >> (16 - ((index * BITS) % 8) - BITS)) & 0x3f);
    }
  }
  return possible;
}

function classOf(values: Set<number>): string {
  if (values.size === 64) return '[A-Za-z0-9+/]';
  const chars = [...values].sort((a, b) => a - b).map((v) => B64[v]!.replace(/[+/]/, (c) => `\\${c}`));
  return chars.length === 1 ? chars[0]! : `[${chars.join('')}]`;
}

/**
 * `^` and the base64 characters that encode the template's bytes. Characters are independent except
 * two that share a byte whose allowed values are a set (neither one value nor any): those are written
 * as an alternation over the set's values, so the pattern is exact (e.g. JPEG's marker byte C0-FE).
 */
export function base64PrefixPattern(mime: ImageMimeType): string {
  const template = TEMPLATES[mime];
  const chars = Math.ceil((template.length * 8) / BITS);
  let out = '^';
  for (let i = 0; i < chars; i++) {
    const [, b1] = bytesOf(i) as [number, number];
    if (i + 1 < chars && isSet(template[b1]) && bytesOf(i + 1)[0] === b1) {
      // Characters i and i+1 share the set byte b1: one alternative per value, merged on i+1's class.
      const alternatives = new Map<string, Set<number>>();
      for (const v of template[b1]) {
        const fixed = [...template];
        fixed[b1] = [v];
        const tail = classOf(charValues(fixed, i + 1));
        const head = alternatives.get(tail) ?? new Set<number>();
        for (const x of charValues(fixed, i)) head.add(x);
        alternatives.set(tail, head);
      }
      out += `(?:${[...alternatives].map(([tail, head]) => classOf(head) + tail).join('|')})`;
      i++;
      continue;
    }
    out += classOf(charValues(template, i));
  }
  return out;
}

/** An image input that a model taking `mimeTypes` accepts: one variant per type, its content tied to it. */
export function imageInputSchema(mimeTypes: readonly ImageMimeType[], bytes_max: number, description: string): Record<string, unknown> {
  const chars_max = 4 * Math.ceil(bytes_max / 3);
  return {
    description,
    oneOf: mimeTypes.map((mime) => ({
      type: 'object',
      title: mime,
      properties: {
        mimeType: { type: 'string', const: mime },
        bytesBase64Encoded: {
          type: 'string',
          contentEncoding: 'base64',
          contentMediaType: mime,
          maxLength: chars_max,
          // Standard base64 with padding, and a file of this type (its leading bytes).
          allOf: [{ pattern: '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$' }, { pattern: base64PrefixPattern(mime) }],
          description: `A ${mime} file, base64 (padded); at most ${bytes_max} bytes decoded (a larger image is refused with 413).`,
        },
      },
      required: ['bytesBase64Encoded', 'mimeType'],
      additionalProperties: false,
    })),
  };
}
