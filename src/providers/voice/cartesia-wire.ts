// What Cartesia's HTTP adapter (./cartesia.ts) and its WebSocket of contexts (./cartesia-websocket.ts) share:
// the PCM asked for, the speeds taken, the error carrying what Cartesia said and how a refusal maps onto it
// (the table at the top of ./cartesia.ts), and the documented shape of word timestamps.
import { clipMessage, isJsonObject, parseJsonBody, retryAfterMs } from '../http-body.js';
import { VoiceProviderCallError } from './types.js';

export const CARTESIA_SAMPLE_RATE_HZ = 24_000;
/** The speeds `generation_config.speed` takes (Sonic 3); ours (0.25 to 4) are brought within them. */
const SPEED_MIN = 0.6;
const SPEED_MAX = 1.5;

export type CartesiaOperation = 'clone' | 'delete' | 'speech';

export const LABELS: Readonly<Record<CartesiaOperation, string>> = {
  clone: 'voice cloning',
  delete: 'voice deletion',
  speech: 'text to speech',
};

/** A VoiceProviderError with what Cartesia said: its HTTP status, its error code, its Retry-After. */
export class CartesiaError extends VoiceProviderCallError {}

/** `generation_config.speed` for our speed: none at 1, else brought within Cartesia's range. */
export const cartesiaSpeed = (speed: number | undefined): number | undefined =>
  speed === undefined || speed === 1 ? undefined : Math.min(SPEED_MAX, Math.max(SPEED_MIN, speed));

/** `word_timestamps` of a timestamps event, as ours; null when it is not the documented shape. */
export function readWordTimestamps(v: unknown): { words: string[]; start_s: number[]; end_s: number[] } | null {
  if (!isJsonObject(v)) return null;
  const { words, start, end } = v;
  const numbers = (a: unknown): a is number[] => Array.isArray(a) && a.every((x) => typeof x === 'number' && Number.isFinite(x));
  if (!Array.isArray(words) || !words.every((w) => typeof w === 'string') || !numbers(start) || !numbers(end)) return null;
  if (start.length !== words.length || end.length !== words.length || words.length === 0) return null;
  return { words: words as string[], start_s: start, end_s: end };
}

/** The code and message of an error object `{"error_code", "title", "message"}`. */
export function saidOf(o: Record<string, unknown>): { code?: string; message?: string } {
  const code = typeof o['error_code'] === 'string' ? o['error_code'] : undefined;
  const text = typeof o['message'] === 'string' && o['message'].trim() ? o['message'] : typeof o['title'] === 'string' ? o['title'] : '';
  return { ...(code ? { code } : {}), ...(text ? { message: clipMessage(text) } : {}) };
}

/** The error for a refusal with `status`; `scrub` takes the API key out of what is shown. */
export function cartesiaRefusal(
  op: CartesiaOperation,
  status: number,
  said: { code?: string; message?: string },
  retryAfter: string | null,
  scrub: (message: string) => string,
): CartesiaError {
  const retry_after_ms = retryAfterMs(retryAfter);
  const retryAfterSeconds = retry_after_ms === undefined ? undefined : Math.ceil(retry_after_ms / 1000);
  const details = {
    status,
    ...(said.code ? { code: said.code } : {}),
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
  };
  if (status === 401 || status === 403) {
    const message = `the voice provider refused the service's credentials (HTTP ${status}); an operator must check CARTESIA_API_KEY`;
    return new CartesiaError('unavailable', message, details, 'credentials');
  }
  if (status === 402) {
    const message = `Cartesia refused the ${LABELS[op]}: the account's credits are used up (HTTP 402)${said.message ? `: ${said.message}` : ''}`;
    return new CartesiaError('unavailable', scrub(message), details, 'quota_exhausted');
  }
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return new CartesiaError('rejected', scrub(said.message ?? `Cartesia refused the ${LABELS[op]} (HTTP ${status})`), details);
  }
  const what =
    status >= 300 && status < 400
      ? `redirected the ${LABELS[op]} (HTTP ${status}; not followed)`
      : `answered HTTP ${status} to the ${LABELS[op]}`;
  const message =
    `Cartesia ${what}${said.code ? ` (${said.code})` : ''}` +
    (said.message ? `: ${said.message}` : '') +
    (retryAfterSeconds !== undefined ? `; retry after ${retryAfterSeconds} s` : '');
  return new CartesiaError('unavailable', scrub(message), details);
}

/** Cartesia's code and message from an error body: its JSON error object, or an older version's plain text. */
export function providerSaid(body: Buffer): { code?: string; message?: string } {
  const json = parseJsonBody(body);
  if (isJsonObject(json)) return saidOf(json);
  const text = body.toString('utf8').trim();
  // eslint-disable-next-line no-control-regex
  if (json !== undefined || text.length === 0 || text.startsWith('<') || /[\x00-\x08]/.test(text)) return {};
  return { message: clipMessage(text) };
}
