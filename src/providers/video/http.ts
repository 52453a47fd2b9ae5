// HTTP plumbing shared by the video adapters: one request with a timeout and a cap on the bytes read,
// Retry-After, transport failures, and (for the aggregators, fal and Replicate) the mapping of an HTTP
// refusal to a ProviderError:
//   - 400 and 422: the provider refused the input (the customer's): final, code invalid_request, with the
//     provider's own message;
//   - 401, 403, 404 and any other 4xx: final (our key, our endpoint, our account: retrying cannot help);
//   - 408, 429 and 5xx: passing, retryable, with the provider's Retry-After when it sent one;
//   - a 2xx answer that is not the JSON documented: code invalid_response, retryable (the core bounds
//     the retries; a provider's glitch usually passes).
// Credentials travel in the headers the caller gives and are never put in messages.
import type http from 'node:http';
import { Readable } from 'node:stream';
import { ProviderError } from './types.js';
import { ERROR_BODY_BYTES_MAX, MESSAGE_CHARS_MAX, readCapped, retryAfterMs } from '../http-body.js';
import {
  resolveWebhookTarget,
  systemResolver,
  WebhookTargetError,
  type Resolver,
  type TargetPolicy,
} from '../../webhooks/target-policy.js';
import { pinnedRequest } from '../../webhooks/sender.js';

export function truncate(s: string, max = MESSAGE_CHARS_MAX): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/** A request that never got an answer: a timeout or a network error, both passing. */
export function transportError(err: unknown, what: string, timeoutMs: number): ProviderError {
  const name = (err as { name?: string } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return new ProviderError(`${what} did not answer within ${timeoutMs} ms`, { code: 'provider_timeout', retryable: true });
  }
  const cause = (err as { cause?: { code?: string; message?: string } } | null)?.cause;
  const reason = cause?.code ?? cause?.message ?? (err as Error)?.message ?? 'network error';
  return new ProviderError(`${what} could not be reached (${truncate(String(reason), 200)})`, {
    code: 'provider_unreachable',
    retryable: true,
  });
}

/** The retryable error of a passing refusal (408, 429, 5xx), carrying the provider's Retry-After. */
export function passingRefusal(status: number, described: string, retryAfter: string | null): ProviderError {
  const retry_after_ms = retryAfterMs(retryAfter);
  const suffix = retry_after_ms !== undefined ? `; retry after ${Math.ceil(retry_after_ms / 1000)} s` : '';
  const code = status === 429 ? 'rate_limited' : status === 408 ? 'provider_timeout' : 'provider_unavailable';
  return new ProviderError(truncate(described + suffix), {
    code,
    retryable: true,
    ...(retry_after_ms !== undefined ? { retry_after_ms } : {}),
  });
}

export const isPassingStatus = (status: number) => status === 408 || status === 429 || status >= 500;

/** How an aggregator's error body reads: its message, or '' when it has none we can read. */
export type ErrorDescriber = (body: unknown) => string;

/** The provider's message in an error answer's body; '' when the body is not JSON (a proxy's HTML page) or says nothing readable. */
export async function readErrorDetail(res: Response, what: string, describe: ErrorDescriber): Promise<string> {
  try {
    const text = (await readCapped(res, ERROR_BODY_BYTES_MAX, what, 'invalid_response')).toString('utf8');
    return describe(JSON.parse(text));
  } catch {
    return '';
  }
}

/** A non-2xx answer of fal or Replicate as a ProviderError (the rules at the top of this file). */
export async function aggregatorRefusal(res: Response, what: string, describe: ErrorDescriber): Promise<ProviderError> {
  const detail = await readErrorDetail(res, what, describe);
  const s = res.status;
  if (isPassingStatus(s))
    return passingRefusal(s, `${what} answered HTTP ${s}${detail ? ` (${detail})` : ''}`, res.headers.get('retry-after'));
  if (s === 400 || s === 422) {
    // The provider's words about the input, as the job's error message.
    return new ProviderError(truncate(detail || `${what} refused the input (HTTP ${s})`), { code: 'invalid_request', retryable: false });
  }
  const code =
    s === 401
      ? 'provider_unauthenticated'
      : s === 402
        ? 'provider_payment_required'
        : s === 403
          ? 'provider_permission_denied'
          : s === 404
            ? 'not_found'
            : 'provider_rejected';
  return new ProviderError(truncate(`${what} answered HTTP ${s}${detail ? ` (${detail})` : ''}`), { code, retryable: false });
}

export interface JsonRequest {
  method: 'GET' | 'POST' | 'PUT';
  url: string;
  headers: Record<string, string>;
  json?: unknown;
  /** Names the call in messages ("fal submit"). */
  what: string;
  timeoutMs: number;
  bytesMax: number;
  describe: ErrorDescriber;
}

/** One request to an aggregator whose 2xx answer `read` reads; a refusal or a failure is a ProviderError by the rules above. */
async function requestAnswer<T>(
  r: JsonRequest & { form?: FormData },
  read: (res: Response) => Promise<T>,
): Promise<{ status: number; answer: T }> {
  const headers: Record<string, string> = { accept: 'application/json', ...r.headers };
  if (r.json !== undefined) headers['content-type'] = 'application/json';
  try {
    const res = await fetch(r.url, {
      method: r.method,
      headers,
      body: r.form ?? (r.json !== undefined ? JSON.stringify(r.json) : undefined),
      signal: AbortSignal.timeout(r.timeoutMs),
      redirect: 'error',
    });
    if (!res.ok) throw await aggregatorRefusal(res, r.what, r.describe);
    return { status: res.status, answer: await read(res) };
  } catch (err) {
    if (err instanceof ProviderError) throw err;
    throw transportError(err, r.what, r.timeoutMs);
  }
}

/** One JSON request to an aggregator (a JSON body, or a multipart `form`): its parsed answer, or a ProviderError by the rules above. */
export async function requestJson(r: JsonRequest & { form?: FormData }): Promise<{ status: number; body: unknown }> {
  const { status, answer: raw } = await requestAnswer(r, (res) => readCapped(res, r.bytesMax, r.what, 'invalid_response'));
  try {
    return { status, body: raw.length === 0 ? null : JSON.parse(raw.toString('utf8')) };
  } catch {
    throw unreadable(r.what, 'malformed JSON');
  }
}

/**
 * One JSON request whose answer may be far larger than what is needed of it (a provider that echoes
 * the request's input): only the string values of the `fields` named at the top level of the answer's
 * object are kept (see scanTopLevelStrings); the rest is read and dropped, never held.
 */
export async function requestJsonFields(
  r: JsonRequest & { fields: readonly string[] },
): Promise<{ status: number; fields: Record<string, string> }> {
  const { status, answer } = await requestAnswer(r, (res) => scanTopLevelStrings(res, r.fields, r.bytesMax, r.what));
  return { status, fields: answer };
}

/** The longest value scanTopLevelStrings keeps (an id, a status). */
const SCANNED_VALUE_BYTES_MAX = 4096;

/**
 * Reads a JSON object answer as a stream, keeping only the string values of the top-level fields
 * named (each at most a few KiB); nested values, and strings of other fields, are scanned and dropped as
 * they arrive. Stops reading once every field named was found. At most `bytesMax` are read; a body that
 * is not a JSON object is `invalid_response`.
 */
export async function scanTopLevelStrings(
  res: Response,
  names: readonly string[],
  bytesMax: number,
  what: string,
): Promise<Record<string, string>> {
  const scan = new TopLevelStringScan(new Set(names), what);
  if (!res.body) throw unreadable(what, 'an empty body');
  const reader = res.body.getReader();
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > bytesMax)
        throw new ProviderError(`${what}: the answer is larger than the ${bytesMax} bytes read`, {
          code: 'invalid_response',
          retryable: false,
        });
      if (scan.feed(value)) return scan.found;
      if (names.every((n) => n in scan.found)) return scan.found;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  if (!scan.started || scan.depth !== 0) throw unreadable(what, 'malformed JSON');
  return scan.found;
}

/**
 * Where scanTopLevelStrings is in the answer between its chunks (the nesting depth, inside a string or
 * not, after a backslash, before a key or a value) and the top-level strings it keeps.
 */
class TopLevelStringScan {
  /** The wanted fields' string values found so far. */
  readonly found: Record<string, string> = {};
  depth = 0;
  /** The answer's opening brace was seen. */
  started = false;
  private inString = false;
  private escaped = false;
  private expectKey = false;
  /** The key whose value comes next at the top level. */
  private key: string | undefined;
  /** The bytes of the top-level string being kept (a key, or a wanted value), or undefined. */
  private kept: number[] | undefined;
  private keptIsKey = false;

  constructor(
    private readonly wanted: ReadonlySet<string>,
    private readonly what: string,
  ) {}

  /** Scans one chunk of the answer; true once the top-level object has closed (the rest is not read). */
  feed(value: Uint8Array): boolean {
    for (let i = 0; i < value.length; i++) {
      if (this.inString && !this.kept && !this.escaped) {
        // A string nothing keeps (an echoed image): skip to its next quote or backslash unseen.
        const next = nextQuoteOrBackslash(value, i);
        if (next === -1) break;
        i = next;
      }
      const c = value[i]!;
      if (this.inString) {
        this.stringByte(c);
        continue;
      }
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
      if (!this.started) {
        if (c !== 0x7b) throw unreadable(this.what, 'an answer that is not a JSON object');
        this.started = true;
      }
      if (c === 0x22) this.openString();
      else if (this.structural(c)) return true;
    }
    return false;
  }

  /** A byte inside a string: kept as written (escapes included), decoded once the string ends; too long, it is dropped. */
  private stringByte(c: number): void {
    if (this.kept && (this.escaped || c !== 0x22)) {
      if (this.kept.length >= SCANNED_VALUE_BYTES_MAX) this.kept = undefined;
      else this.kept.push(c);
    }
    if (this.escaped) this.escaped = false;
    else if (c === 0x5c) this.escaped = true;
    else if (c === 0x22) {
      this.inString = false;
      if (this.kept) {
        const text = decodeJsonString(this.kept);
        if (this.keptIsKey) this.key = text;
        else if (this.key !== undefined) this.found[this.key] = text;
      }
      this.kept = undefined;
    }
  }

  /** An opening quote: the string is kept when it is a top-level key, or the value of a wanted field not found yet. */
  private openString(): void {
    this.inString = true;
    this.keptIsKey = this.depth === 1 && this.expectKey;
    const wantedValue = this.depth === 1 && this.key !== undefined && this.wanted.has(this.key) && !(this.key in this.found);
    this.kept = this.keptIsKey || wantedValue ? [] : undefined;
  }

  /** A byte outside strings: brackets change the depth, a top-level colon or comma moves from key to value and back. True when the top-level object closes. */
  private structural(c: number): boolean {
    if (c === 0x7b || c === 0x5b) {
      this.depth++;
      if (this.depth === 1) this.expectKey = true;
    } else if (c === 0x7d || c === 0x5d) {
      this.depth--;
      if (this.depth === 0) return true;
    } else if (this.depth === 1 && c === 0x3a) this.expectKey = false;
    else if (this.depth === 1 && c === 0x2c) {
      this.expectKey = true;
      this.key = undefined;
    }
    return false;
  }
}

/** The index of the first quote or backslash of `value` from `from` on, or -1. */
function nextQuoteOrBackslash(value: Uint8Array, from: number): number {
  const quote = value.indexOf(0x22, from);
  const backslash = quote === -1 ? value.indexOf(0x5c, from) : value.subarray(from, quote).indexOf(0x5c);
  return backslash !== -1 ? (quote === -1 ? backslash : from + backslash) : quote;
}

/** A JSON string's bytes as written between its quotes (escapes included), decoded. */
const decodeJsonString = (bytes: number[]) => JSON.parse(`"${Buffer.from(bytes).toString('utf8')}"`) as string;

/** A 2xx answer that is not what the provider documents: retryable, bounded by the core. */
export function unreadable(what: string, why: string): ProviderError {
  return new ProviderError(truncate(`${what} answered with ${why}`), { code: 'invalid_response', retryable: true });
}

/**
 * Whether a URL a provider handed back may be fetched: https, or http to a loopback host (a local fake).
 * Output URLs are fetched without credentials.
 */
export function isFetchableUrl(url: string): boolean {
  try {
    const u = new URL(url);
    if (u.username || u.password) return false;
    if (u.protocol === 'https:') return true;
    return u.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
  } catch {
    return false;
  }
}

/** Redirects an output download follows (each hop checked as the first URL is). */
export const OUTPUT_REDIRECTS_MAX = 5;

/** Where output downloads may go: the webhook targets' address policy (production: public https only), and the resolver (a fake in tests). */
export interface OutputPolicy extends TargetPolicy {
  resolver?: Resolver;
}

const outputPolicyOfEnv = (): OutputPolicy => ({ production: process.env['NODE_ENV'] === 'production' });

/** One GET to the address already checked for `url` (its name still in Host and SNI), without credentials. */
function getPinned(url: URL, target: { address: string; family: 4 | 6 }, signal: AbortSignal): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = pinnedRequest(url, target, 'GET', { accept: '*/*' }, signal);
    req.on('response', resolve);
    req.on('error', reject);
    req.end();
  });
}

/**
 * Downloads a generated video from the URL the provider gave (fal's CDN, replicate.delivery): no
 * credentials are sent there; at most bytesMax are read. The URL and every redirect (at most
 * OUTPUT_REDIRECTS_MAX, followed here, not by the HTTP client) obey the address policy of webhook targets:
 * each host is resolved, every address checked, and the request goes to the address checked (in
 * production only public https addresses; in development loopback too, for local fakes). A 404/410 is
 * final (the provider deleted it: Replicate keeps outputs an hour); other failures pass.
 */
export async function downloadOutput(
  url: string,
  what: string,
  timeoutMs: number,
  bytesMax: number,
  policy: OutputPolicy = outputPolicyOfEnv(),
): Promise<Buffer> {
  const refused = (u: string, why: string) =>
    new ProviderError(`${what}: refusing to download ${truncate(u, 200)} (${why})`, { code: 'invalid_response', retryable: false });
  const signal = AbortSignal.timeout(timeoutMs);
  let current = url;
  try {
    for (let hop = 0; ; hop++) {
      if (!isFetchableUrl(current)) throw refused(current, 'not https');
      const target = await resolveWebhookTarget(new URL(current), policy, policy.resolver ?? systemResolver).catch((err: unknown) => {
        if (!(err instanceof WebhookTargetError)) throw err;
        if (err.code === 'dns_unavailable')
          throw new ProviderError(`${what}: ${err.message}`, { code: 'provider_unreachable', retryable: true });
        throw refused(current, err.message.replace(/^the host of url/, 'its host'));
      });
      const res = await getPinned(new URL(current), target, signal);
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (status >= 300 && status < 400 && location) {
        res.destroy();
        if (hop >= OUTPUT_REDIRECTS_MAX)
          throw new ProviderError(`${what}: more than ${OUTPUT_REDIRECTS_MAX} redirects`, { code: 'invalid_response', retryable: false });
        try {
          current = new URL(location, current).toString();
        } catch {
          throw refused(location, 'not a URL');
        }
        continue;
      }
      const headers = new Headers();
      if (res.headers['content-length'] !== undefined) headers.set('content-length', res.headers['content-length']);
      if (typeof res.headers['retry-after'] === 'string') headers.set('retry-after', res.headers['retry-after']);
      if (status < 200 || status >= 300) {
        res.destroy();
        if (isPassingStatus(status)) throw passingRefusal(status, `${what} answered HTTP ${status}`, headers.get('retry-after'));
        throw new ProviderError(`${what} answered HTTP ${status}`, {
          code: status === 404 || status === 410 ? 'output_expired' : 'provider_rejected',
          retryable: false,
        });
      }
      const body = new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, headers });
      const bytes = await readCapped(body, bytesMax, what, 'output_too_large');
      if (bytes.length === 0) throw new ProviderError(`${what}: the video is empty`, { code: 'invalid_output', retryable: false });
      return bytes;
    }
  } catch (err) {
    if (err instanceof ProviderError) throw err;
    throw transportError(err, what, timeoutMs);
  }
}
