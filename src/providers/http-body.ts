// What every provider adapter (video and voice) reads of an HTTP answer the same way: a body with a cap
// on its bytes, the Retry-After header, and the length a provider's message is kept to.
import { ProviderError } from './video/types.js';

/** The most characters of a provider's message kept (an error's, a simulated failure's): a longer one is cut. */
export const MESSAGE_CHARS_MAX = 500;

/** What is read of a provider's error answer: enough for its message. */
export const ERROR_BODY_BYTES_MAX = 64 * 1024;

/** Past `threshold_bytes` (declared or read), the rest of a body is read only after `take()` has resolved. */
export interface LargeRead {
  threshold_bytes: number;
  take: () => Promise<void>;
}

interface ChunksRead {
  body: Buffer;
  /** Bytes read: past `bytes_max` when the body was longer (the rest is left unread). */
  bytes: number;
  over: boolean;
}

/**
 * Reads a body chunk by chunk until it ends or more than `bytes_max` bytes have arrived. `beforeChunk`
 * runs with the bytes read so far, the new chunk's included, before the chunk is kept. A failed read
 * is thrown, or with `keepOnError` ends the read with what arrived.
 */
async function readChunks(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  bytes_max: number,
  options: { beforeChunk?: (bytes: number) => Promise<void>; keepOnError?: boolean } = {},
): Promise<ChunksRead> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      await options.beforeChunk?.(bytes);
      chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
      if (bytes > bytes_max) return { body: Buffer.concat(chunks, bytes), bytes, over: true };
    }
  } catch (err) {
    if (!options.keepOnError) throw err;
    // What arrived is what there is to read.
  }
  return { body: Buffer.concat(chunks), bytes, over: false };
}

/**
 * Reads a whole answer body, at most `bytes_max` of it (a declared larger length is refused before
 * reading): a longer one is a ProviderError with `tooLargeCode`. With `large`, a body past its
 * threshold waits for `take()` before reading on (a bound on the large answers read at once).
 */
export async function readCapped(res: Response, bytes_max: number, what: string, tooLargeCode: string, large?: LargeRead): Promise<Buffer> {
  const tooLarge = (n: number) =>
    new ProviderError(`${what}: the answer is larger than the ${bytes_max} bytes accepted (${n}+ bytes)`, {
      code: tooLargeCode,
      retryable: false,
    });
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > bytes_max) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge(declared);
  }
  if (!res.body) return Buffer.alloc(0);
  let taken = false;
  if (large && Number.isFinite(declared) && declared > large.threshold_bytes) {
    taken = true;
    await large.take();
  }
  const reader = res.body.getReader();
  const beforeChunk = async (bytes: number) => {
    if (large && !taken && bytes > large.threshold_bytes) {
      taken = true;
      await large.take();
    }
  };
  const read = await readChunks(reader, bytes_max, { beforeChunk });
  if (read.over) {
    await reader.cancel().catch(() => {});
    throw tooLarge(read.bytes);
  }
  return read.body;
}

/** The first `bytes_max` bytes of a body (the rest is not read); a failed read keeps what arrived. */
export async function readPrefix(reader: ReadableStreamDefaultReader<Uint8Array>, bytes_max: number): Promise<Buffer> {
  // Reading stops once `bytes_max` bytes have arrived: more than `bytes_max - 1`.
  const read = await readChunks(reader, bytes_max - 1, { keepOnError: true });
  return read.body.subarray(0, bytes_max);
}

/** Retry-After in milliseconds from now: delay-seconds or an HTTP-date (RFC 9110 10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now_ms = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^[0-9]+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now_ms) : undefined;
}

/** A JSON object (not an array, not null). */
export const isJsonObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A body parsed as JSON; undefined when it is not JSON. */
export function parseJsonBody(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** A provider's message on one line, cut to MESSAGE_CHARS_MAX. */
export function clipMessage(s: string): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > MESSAGE_CHARS_MAX ? `${one.slice(0, MESSAGE_CHARS_MAX - 1)}…` : one;
}
