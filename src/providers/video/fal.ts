// The fal adapter (video provider interface), over fal's queue API (fal.ai/docs/api-reference/inference-api,
// .../documentation/model-apis/inference/queue, .../documentation/model-apis/inference/webhooks):
//
//   submit   POST {FAL_QUEUE_URL}/{endpoint}?fal_webhook=<callback>  Authorization: Key <FAL_KEY>, body the
//            model's input  ->  {"request_id", "status_url", "response_url", "cancel_url", ...}
//   poll     GET status_url  ->  202 {"status": "IN_QUEUE", "queue_position"} | {"status": "IN_PROGRESS"},
//            200 {"status": "COMPLETED", "error"?, "error_type"?}; then GET response_url -> the model's output
//            ({"video": {"url", "content_type"}} or {"videos": [...]}), or the model's error as it returned it
//   cancel   PUT cancel_url -> 202 CANCELLATION_REQUESTED | 400 ALREADY_COMPLETED | 404 NOT_FOUND
//   callback POST to fal_webhook when a request ends, signed with ED25519 (verifyCallback)
//
// fal documents that the status, result and cancel URLs must be taken from the submit answer, not built:
// the operation id keeps them (JSON, one entry per request). They are only used when they are on the
// queue host (FAL_QUEUE_URL's origin), so the key never travels elsewhere. fal makes one video per
// request: a job of n videos is n requests (./mapped-input.ts). Generated videos are downloaded from the
// URL in the output, without the key. FAL_KEY is never logged nor put in messages.
import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import type { VideoModelBackend } from '../../models/catalog.js';
import type { IncomingHttpHeaders } from 'node:http';
import { downloadOutput, isFetchableUrl, requestJson, truncate, unreadable, type ErrorDescriber } from './http.js';
import { KEY_FETCH_BACKOFF_MS_MAX, KEY_FETCH_BACKOFF_MS, KeyCache } from './key-cache.js';
import { backendEntry, cancelAnswerOf, combineStatuses, mappedInput, submitEach, type CancelledRequest } from './mapped-input.js';
import { providerErrorKind } from './provider-errors.js';
import {
  CallbackRejected,
  OPERATION_ID_CHARS_MAX,
  VIDEO_OUTPUT_BYTES_MAX,
  ProviderError,
  type CallbackReception,
  type CancelAnswer,
  type ProviderCallback,
  type VerifiedCallback,
  type SubmitOptions,
  type VideoOperationStatus,
  type VideoOutputRef,
  type VideoProvider,
  type VideoSubmission,
} from './types.js';
import { credential, hideSecret, secureEndpoint, videoProvider } from '../descriptor.js';
import { z } from 'zod';

export const FAL_DEFAULT_QUEUE_URL = 'https://queue.fal.run';
/** fal's webhooks page: the public keys that verify its callbacks. */
export const FAL_DEFAULT_JWKS_URL = 'https://rest.fal.ai/.well-known/jwks.json';
/** Below the provider activities' 20 s start-to-close timeout. */
export const FAL_REQUEST_TIMEOUT_MS = 15_000;
export const FAL_DOWNLOAD_TIMEOUT_MS = 25_000;
/** fal's webhooks page: reject a callback whose timestamp is more than 5 minutes from now. */
export const FAL_CALLBACK_TOLERANCE_S = 300;
/** fal allows caching its keys up to 24 hours; half that bounds how long a revoked key is still trusted. */
export const FAL_JWKS_CACHE_MS = 12 * 3_600_000;
/** A callback no cached key verifies fetches the keys again (rotation), at most this often (forged callbacks cannot hammer fal). */
export const FAL_JWKS_MIN_REFRESH_MS = 60_000;
/**
 * The largest callback body read. fal's webhooks page: a callback is {"request_id", "gateway_request_id",
 * "status", "payload", "error"?, "payload_error"?}, the payload being the model's output; a video model's
 * output is a file reference ({"video": {"url", "content_type", "file_name", "file_size"}, "seed"}: a few
 * hundred bytes) and a model's error a short list of messages. 64 KiB is over a hundred times either.
 */
export const FAL_CALLBACK_BODY_BYTES_MAX = 64 * 1024;
const JSON_BYTES_MAX = 4 * 1024 * 1024;
const JWKS_BYTES_MAX = 64 * 1024;
const JWKS_KEYS_MAX = 20;

export interface FalOptions {
  key: string;
  /** Our model id -> the catalog's fal entry of it; undefined = not a fal model. */
  backendFor: (model: string) => VideoModelBackend | undefined;
  queueUrl?: string;
  jwksUrl?: string;
  requestTimeoutMs?: number;
  downloadTimeoutMs?: number;
  outputBytesMax?: number;
  callbackToleranceS?: number;
  jwksCacheMs?: number;
  jwksMinRefreshMs?: number;
  /** First wait after a failed JWKS fetch (doubling, up to jwksFetchBackoffMsMax): no other fetch before it. */
  jwksFetchBackoffMs?: number;
  jwksFetchBackoffMsMax?: number;
  /** FAL_USER_ID: this service's fal account; a callback naming another user is refused before its body is read. */
  userId?: string | undefined;
  /** The clock callbacks' timestamps are checked against (tests). */
  now_ms?: () => number;
}

/** One fal request of a job, as its submit answer named it. */
interface FalRequest {
  request_id: string;
  status_url: string;
  response_url: string;
  cancel_url: string;
}

interface FalOperation {
  fal: FalRequest[];
}

const REQUEST_ID = /^[A-Za-z0-9-]{1,100}$/;

/** fal's error bodies: {"detail": "message"} (request errors) or {"detail": [{"loc", "msg", "type"}]} (model errors). */
export const describeFalError: ErrorDescriber = (body) => {
  const b = body as { detail?: unknown; error?: unknown; error_type?: unknown } | null;
  const detail = b?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail
      .slice(0, 5)
      .map((d: { loc?: unknown; msg?: unknown }) => {
        const loc = Array.isArray(d?.loc) ? d.loc.filter((x) => x !== 'body').join('.') : '';
        return `${loc ? `${loc}: ` : ''}${typeof d?.msg === 'string' ? d.msg : 'invalid'}`;
      })
      .join('; ');
  }
  if (typeof b?.error === 'string') return b.error;
  return '';
};

export class FalVideoProvider implements VideoProvider {
  readonly name = 'fal';
  readonly #key: string;
  private readonly backendFor: (model: string) => VideoModelBackend | undefined;
  private readonly queueUrl: string;
  private readonly queueOrigin: string;
  private readonly jwksUrl: string;
  private readonly requestTimeoutMs: number;
  private readonly downloadTimeoutMs: number;
  private readonly outputBytesMax: number;
  private readonly toleranceS: number;
  private readonly userId: string | undefined;
  private readonly now_ms: () => number;
  private readonly jwks: KeyCache<KeyObject[]>;
  readonly callbackReception: CallbackReception;

  constructor(opts: FalOptions) {
    this.#key = opts.key;
    this.backendFor = opts.backendFor;
    this.queueUrl = (opts.queueUrl ?? FAL_DEFAULT_QUEUE_URL).replace(/\/+$/, '');
    this.queueOrigin = new URL(this.queueUrl).origin;
    this.jwksUrl = opts.jwksUrl ?? FAL_DEFAULT_JWKS_URL;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? FAL_REQUEST_TIMEOUT_MS;
    this.downloadTimeoutMs = opts.downloadTimeoutMs ?? FAL_DOWNLOAD_TIMEOUT_MS;
    this.outputBytesMax = opts.outputBytesMax ?? VIDEO_OUTPUT_BYTES_MAX;
    this.toleranceS = opts.callbackToleranceS ?? FAL_CALLBACK_TOLERANCE_S;
    this.userId = opts.userId;
    this.now_ms = opts.now_ms ?? Date.now;
    this.jwks = new KeyCache(() => this.fetchKeys(), {
      cache_ms: opts.jwksCacheMs ?? FAL_JWKS_CACHE_MS,
      min_refresh_ms: opts.jwksMinRefreshMs ?? FAL_JWKS_MIN_REFRESH_MS,
      failure_backoff_ms: opts.jwksFetchBackoffMs ?? KEY_FETCH_BACKOFF_MS,
      failure_backoff_ms_max: opts.jwksFetchBackoffMsMax ?? KEY_FETCH_BACKOFF_MS_MAX,
      now_ms: this.now_ms,
    });
    this.callbackReception = { body_bytes_max: FAL_CALLBACK_BODY_BYTES_MAX, checkHeaders: (headers) => void this.callbackHeaders(headers) };
  }

  /** The endpoint a request goes to: fal has one per kind of input (text, first frame, first and last frame). */
  endpointFor(req: VideoSubmission, entry: VideoModelBackend): string {
    if (req.last_frame) return entry.first_last_frame_endpoint ?? entry.image_endpoint ?? entry.provider_model_id;
    if (req.image) return entry.image_endpoint ?? entry.provider_model_id;
    return entry.provider_model_id;
  }

  /** The body of each request of a job (exported for the contract tests). */
  buildInput(req: VideoSubmission): { endpoint: string; input: Record<string, unknown> } {
    const entry = backendEntry(this.backendFor, req.model, 'fal');
    return { endpoint: this.endpointFor(req, entry), input: mappedInput(req, entry.input, `fal model ${entry.provider_model_id}`) };
  }

  // fal's queue has no idempotency key: a submit retried after a lost answer may start a second
  // (unbilled to the customer) generation, as with Vertex AI.
  async submit(req: VideoSubmission, opts: SubmitOptions = {}): Promise<{ operation_id: string }> {
    const { endpoint, input } = this.buildInput(req);
    const url = `${this.queueUrl}/${endpoint}${opts.callback_url ? `?fal_webhook=${encodeURIComponent(opts.callback_url)}` : ''}`;
    const requests = await submitEach(
      req.params.n,
      async () => {
        const { body } = await this.call('POST', url, input, 'fal submit');
        return this.submitted(body);
      },
      (made) => this.cancelOne(made).catch(() => {}),
    );
    const operation_id = JSON.stringify({ fal: requests } satisfies FalOperation);
    if (operation_id.length > OPERATION_ID_CHARS_MAX) {
      await Promise.allSettled(requests.map((r) => this.cancelOne(r)));
      throw new ProviderError(`fal's request URLs make an operation id longer than ${OPERATION_ID_CHARS_MAX} characters`, {
        code: 'invalid_response',
        retryable: false,
      });
    }
    return { operation_id };
  }

  async poll(operation_id: string): Promise<VideoOperationStatus> {
    const op = this.parseOperationId(operation_id);
    return combineStatuses(await Promise.all(op.fal.map((r) => this.pollOne(r))));
  }

  async fetchOutput(_operation_id: string, output: VideoOutputRef): Promise<Buffer> {
    return downloadOutput(output.ref, 'fal video download', this.downloadTimeoutMs, this.outputBytesMax);
  }

  /**
   * Cancels every request of the job; one that already ended (400 ALREADY_COMPLETED, 404) is fine. fal
   * (fal.ai/docs/inference-api/queue/cancel) removes a request still in the queue (IN_QUEUE: never run, so
   * never billed) and sends a cancellation signal to the runner of one in progress (IN_PROGRESS: it used
   * compute, which fal bills, and may even run on); a COMPLETED one is billed and the cancel changes nothing.
   * The answer counts them per request (see CancelAnswer): a job of n videos is n requests, each one unit.
   */
  async cancel(operation_id: string): Promise<CancelAnswer> {
    const op = this.parseOperationId(operation_id);
    const results = await Promise.allSettled(op.fal.map((r) => this.cancelOne(r)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const requests = results.map((r) => (r as PromiseFulfilledResult<CancelledRequest>).value);
    return cancelAnswerOf('fal', requests, { queued: 'IN_QUEUE', running: 'IN_PROGRESS', ended: 'COMPLETED' });
  }

  /**
   * The checks made on a fal callback's headers before its body is read: X-Fal-Webhook-Request-Id,
   * -User-Id, -Timestamp (Unix seconds, within 5 minutes of now) and -Signature (hex) present and well
   * formed, and the user id this service's (FAL_USER_ID) when it is configured: fal signs every
   * account's callbacks with the same keys, so only the user id tells ours from another customer's.
   */
  private callbackHeaders(headers: IncomingHttpHeaders) {
    const header = (name: string) => {
      const v = headers[name];
      return typeof v === 'string' ? v : undefined;
    };
    const request_id = header('x-fal-webhook-request-id');
    const user_id = header('x-fal-webhook-user-id');
    const timestamp = header('x-fal-webhook-timestamp');
    const signatureHex = header('x-fal-webhook-signature');
    if (!request_id || !user_id || !timestamp || !signatureHex) throw new CallbackRejected('the fal webhook headers are missing');
    if (!REQUEST_ID.test(request_id) || user_id.length > 200)
      throw new CallbackRejected('the fal webhook request id or user id is malformed');
    if (this.userId !== undefined && user_id !== this.userId) throw new CallbackRejected('the fal webhook is from another fal account');
    if (!/^[0-9]{1,12}$/.test(timestamp)) throw new CallbackRejected('the fal webhook timestamp is not Unix seconds');
    if (Math.abs(this.now_ms() / 1000 - Number(timestamp)) > this.toleranceS) {
      throw new CallbackRejected(`the fal webhook timestamp is more than ${this.toleranceS} s away from now`);
    }
    if (!/^[0-9a-fA-F]{128}$/.test(signatureHex)) throw new CallbackRejected('the fal webhook signature is not 64 bytes of hex');
    return { request_id, user_id, timestamp, signatureHex };
  }

  /**
   * fal's documented verification: the headers as callbackHeaders checks them; the message is request
   * id, user id, timestamp and the hex SHA-256 of the raw body, joined by "\n"; it must verify with
   * ED25519 under one of the keys of fal's JWKS. Throws CallbackRejected when it does not; a JWKS that
   * cannot be fetched (and none held) is a ProviderError (retryable: the callback is answered 503 and fal
   * delivers it again). The delivery is its request id and timestamp: a replay repeats both, and fal's
   * own retries of a delivery are signed anew.
   */
  async verifyCallback(callback: ProviderCallback): Promise<VerifiedCallback> {
    const { request_id, user_id, timestamp, signatureHex } = this.callbackHeaders(callback.headers);
    const message = Buffer.from(
      `${request_id}\n${user_id}\n${timestamp}\n${createHash('sha256').update(callback.raw_body).digest('hex')}`,
      'utf8',
    );
    const signature = Buffer.from(signatureHex, 'hex');
    const verifiedBy = (keys: KeyObject[]) => keys.some((key) => verifySignature(null, message, key, signature));
    const verified = { delivery_id: `fal:${request_id}:${timestamp}`, request_ref: request_id };
    if (verifiedBy(await this.jwks.get(false))) return verified;
    // Perhaps fal rotated its keys since they were cached: fetch them again (rate-bounded) and retry.
    if (verifiedBy(await this.jwks.get(true))) return verified;
    throw new CallbackRejected("the fal webhook signature does not verify with any of fal's keys");
  }

  /** A fal callback concerns a job only if its request id is one of the job's requests. */
  callbackConcerns(operation_id: string, callback: VerifiedCallback): boolean {
    try {
      return this.parseOperationId(operation_id).fal.some((r) => r.request_id === callback.request_ref);
    } catch {
      return false;
    }
  }

  private async pollOne(r: FalRequest): Promise<VideoOperationStatus> {
    const { body } = await this.call('GET', r.status_url, undefined, 'fal status');
    const s = body as { status?: unknown; queue_position?: unknown; error?: unknown; error_type?: unknown } | null;
    switch (s?.status) {
      case 'IN_QUEUE':
        return {
          state: 'running',
          progress: null,
          queue_position: typeof s.queue_position === 'number' && s.queue_position >= 0 ? Math.floor(s.queue_position) : null,
        };
      case 'IN_PROGRESS':
        // Out of the queue: position 0, which also replaces the last position kept for the job (a null
        // would leave it, as the job's queue position only moves down).
        return { state: 'running', progress: null, queue_position: 0 };
      case 'COMPLETED':
        if (typeof s.error === 'string' && s.error) {
          return {
            state: 'failed',
            code: typeof s.error_type === 'string' && s.error_type ? s.error_type : 'generation_failed',
            message: truncate(s.error),
          };
        }
        return this.result(r);
      default:
        throw unreadable('fal status', `an unknown status ${truncate(JSON.stringify(s?.status ?? null), 50)}`);
    }
  }

  /** The output of a completed request: its videos, or the model's error as a failed status. */
  private async result(r: FalRequest): Promise<VideoOperationStatus> {
    let body: unknown;
    try {
      ({ body } = await this.call('GET', r.response_url, undefined, 'fal result'));
    } catch (err) {
      // The result answers with the model's own error (a 422 about the input, a content policy refusal):
      // that request failed for good. A passing error, or our key refused, is thrown, and the poll retried.
      if (err instanceof ProviderError && !err.opts.retryable && providerErrorKind(err.opts) !== 'credentials')
        return { state: 'failed', code: err.opts.code, message: err.message };
      throw err;
    }
    const b = body as { video?: unknown; videos?: unknown } | null;
    const candidates: unknown[] = Array.isArray(b?.videos) ? b.videos : b?.video ? [b.video] : [];
    const outputs: VideoOutputRef[] = [];
    for (const v of candidates) {
      const file = v as { url?: unknown; content_type?: unknown } | null;
      if (typeof file?.url !== 'string' || !isFetchableUrl(file.url)) continue;
      const content_type =
        typeof file.content_type === 'string' && file.content_type.startsWith('video/') ? file.content_type : 'video/mp4';
      outputs.push({ ref: file.url, content_type });
    }
    if (outputs.length === 0) throw unreadable('fal result', 'no video file in the output');
    return { state: 'succeeded', outputs };
  }

  /**
   * Cancels one request; where it stood: its status just before the cancel, unless the cancel found it
   * completed meanwhile (400 ALREADY_COMPLETED). A request that left the queue between the two counts as
   * queued: its cost is then fal's to us, never more than the customer's.
   */
  private async cancelOne(r: FalRequest): Promise<CancelledRequest> {
    const { body } = await this.call('GET', r.status_url, undefined, 'fal status');
    const status = (body as { status?: unknown } | null)?.status;
    let stood: CancelledRequest = status === 'IN_QUEUE' ? 'queued' : status === 'IN_PROGRESS' ? 'running' : 'ended';
    try {
      await this.call('PUT', r.cancel_url, undefined, 'fal cancel');
    } catch (err) {
      // 400 ALREADY_COMPLETED and 404 NOT_FOUND: nothing left to cancel.
      if (!(err instanceof ProviderError && (err.opts.code === 'invalid_request' || err.opts.code === 'not_found'))) throw err;
      if (err.opts.code === 'invalid_request') stood = 'ended';
    }
    return stood;
  }

  private submitted(body: unknown): FalRequest {
    const b = body as Partial<Record<keyof FalRequest, unknown>> | null;
    const r = { request_id: b?.request_id, status_url: b?.status_url, response_url: b?.response_url, cancel_url: b?.cancel_url };
    if (!this.isRequest(r)) throw unreadable('fal submit', 'no request_id and queue URLs on the queue host');
    return r;
  }

  private isRequest(r: Partial<Record<keyof FalRequest, unknown>>): r is FalRequest {
    const onQueueHost = (u: unknown) => typeof u === 'string' && isFetchableUrl(u) && new URL(u).origin === this.queueOrigin;
    return (
      typeof r.request_id === 'string' &&
      REQUEST_ID.test(r.request_id) &&
      onQueueHost(r.status_url) &&
      onQueueHost(r.response_url) &&
      onQueueHost(r.cancel_url)
    );
  }

  private parseOperationId(operation_id: string): FalOperation {
    let parsed: unknown;
    try {
      parsed = JSON.parse(operation_id);
    } catch {
      parsed = undefined;
    }
    const requests = (parsed as Partial<FalOperation> | undefined)?.fal;
    if (!Array.isArray(requests) || requests.length === 0 || !requests.every((r) => this.isRequest(r ?? {}))) {
      throw new ProviderError(`"${truncate(operation_id, 200)}" is not a fal operation id`, { code: 'not_found', retryable: false });
    }
    return { fal: requests };
  }

  private call(method: 'GET' | 'POST' | 'PUT', url: string, json: unknown, what: string) {
    return requestJson({
      method,
      url,
      headers: { authorization: `Key ${this.#key}` },
      json,
      what,
      timeoutMs: this.requestTimeoutMs,
      bytesMax: JSON_BYTES_MAX,
      describe: describeFalError,
    });
  }

  private async fetchKeys(): Promise<KeyObject[]> {
    const { body } = await requestJson({
      method: 'GET',
      url: this.jwksUrl,
      headers: {},
      what: 'fal JWKS',
      timeoutMs: this.requestTimeoutMs,
      bytesMax: JWKS_BYTES_MAX,
      describe: describeFalError,
    });
    const entries = (body as { keys?: unknown } | null)?.keys;
    if (!Array.isArray(entries)) throw unreadable('fal JWKS', 'no keys');
    const keys: KeyObject[] = [];
    for (const jwk of entries.slice(0, JWKS_KEYS_MAX)) {
      const k = jwk as { kty?: unknown; crv?: unknown; x?: unknown } | null;
      if (k?.kty !== 'OKP' || k.crv !== 'Ed25519' || typeof k.x !== 'string') continue;
      try {
        // fal's JWKS has been seen padding x; a JWK's base64url has no padding.
        keys.push(createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: k.x.replace(/=+$/, '') }, format: 'jwk' }));
      } catch {
        // not a usable key: skipped
      }
    }
    if (keys.length === 0) throw unreadable('fal JWKS', 'no Ed25519 key');
    return keys;
  }
}

/** fal's settings: enabled by FAL_KEY. */
export interface FalConfig {
  /** FAL_KEY. Not enumerable: never serialised or logged. */
  key: string;
  queueUrl: string;
  jwksUrl: string;
  /** FAL_USER_ID, when set. */
  userId?: string;
}

const FAL_ENV = {
  FAL_KEY: credential().optional(),
  FAL_QUEUE_URL: z.string().url().default(FAL_DEFAULT_QUEUE_URL),
  FAL_JWKS_URL: z.string().url().default(FAL_DEFAULT_JWKS_URL),
  // This service's fal user id: fal signs every account's callbacks with the same keys, so a callback
  // naming another user is refused before its body is read. Unset: any user id (the request id still
  // has to be one of the job's).
  FAL_USER_ID: z
    .string()
    .regex(/^[\x21-\x7e]{1,200}$/, 'must be printable characters without spaces')
    .optional(),
};

/** fal (queue API) as a video backend: it serves the models whose catalog entry lists a fal backend; callbacks verified with FAL_JWKS_URL's keys. */
export const falDescriptor = videoProvider({
  kind: 'video',
  name: 'fal',
  env: FAL_ENV,
  settings(e): FalConfig | null {
    if (!e.FAL_KEY) return null;
    const config: FalConfig = {
      key: '',
      queueUrl: secureEndpoint('FAL_QUEUE_URL', e.FAL_QUEUE_URL),
      jwksUrl: secureEndpoint('FAL_JWKS_URL', e.FAL_JWKS_URL),
      ...(e.FAL_USER_ID ? { userId: e.FAL_USER_ID } : {}),
    };
    return hideSecret(config, 'key', e.FAL_KEY);
  },
  build: ({ key, queueUrl, jwksUrl, userId }, { catalog }) =>
    new FalVideoProvider({ key, queueUrl, jwksUrl, userId, backendFor: (id) => catalog.backendFor(id, 'fal') }),
  capabilities: { callbacks: true, cancel_bills: 'started_requests', parameters: null, memory_held: [] },
});
