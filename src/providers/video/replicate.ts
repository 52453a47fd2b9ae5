// The Replicate adapter (video provider interface), over Replicate's HTTP API
// (replicate.com/docs/reference/http, .../docs/topics/webhooks, .../docs/topics/webhooks/verify-webhook):
//
//   files    POST {REPLICATE_API_URL}/v1/files, multipart (content, filename, type, metadata)  ->  201
//            {"id", "urls": {"get"}, ...}: an image larger than Replicate's data-URL advice (256 KB) is
//            uploaded once per submission and the model's input names its URL
//   submit   POST {REPLICATE_API_URL}/v1/models/{owner}/{name}/predictions (or POST /v1/predictions with
//            "version"), Authorization: Bearer <token>, Cancel-After: <the job's remaining time>,
//            {"input", "webhook"?, "webhook_events_filter": ["completed"]}  ->  201 the prediction {"id", "status", ...};
//            the answer echoes the input, so only its top-level "id" is kept, read as the answer streams in
//   poll     GET /v1/predictions/{id}  ->  {"status": "starting" | "processing" | "succeeded" | "failed" |
//            "canceled" | "aborted", "output", "error", "logs", "data_removed"}
//   cancel   POST /v1/predictions/{id}/cancel
//   callback POST to "webhook" when the prediction ends, signed the Standard Webhooks way (verifyCallback)
//
// Replicate deletes outputs an hour after a prediction ends (data_removed): the core copies them as soon
// as the job succeeds. One prediction makes one video: a job of n videos is n predictions
// (./mapped-input.ts); the operation id is their ids, comma-separated. The token is never logged.
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { VideoModelBackend } from '../../models/catalog.js';
import type { IncomingHttpHeaders } from 'node:http';
import { downloadOutput, isFetchableUrl, requestJson, requestJsonFields, truncate, unreadable, type ErrorDescriber } from './http.js';
import { KEY_FETCH_BACKOFF_MS_MAX, KEY_FETCH_BACKOFF_MS, KeyCache } from './key-cache.js';
import {
  backendEntry,
  cancelAnswerOf,
  combineStatuses,
  mappedInput,
  submitEach,
  type CancelledRequest,
  type ImageRefs,
} from './mapped-input.js';
import {
  CallbackRejected,
  VIDEO_OUTPUT_BYTES_MAX,
  ProviderError,
  type CallbackReception,
  type CancelAnswer,
  type InputImage,
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

export const REPLICATE_DEFAULT_API_URL = 'https://api.replicate.com';
export const REPLICATE_REQUEST_TIMEOUT_MS = 15_000;
export const REPLICATE_DOWNLOAD_TIMEOUT_MS = 25_000;
/** How long a signing secret fetched from Replicate is used before it is fetched again. */
export const REPLICATE_SECRET_CACHE_MS = 3_600_000;
/** A callback the cached secret does not verify fetches it again (rotation), at most this often. */
export const REPLICATE_SECRET_MIN_REFRESH_MS = 60_000;
/** Replicate's webhooks page: reject a callback whose timestamp is more than 5 minutes from now. */
export const REPLICATE_CALLBACK_TOLERANCE_S = 300;
/**
 * The largest callback body read. Replicate's webhooks page: the body is the prediction as its API
 * answers it: ids, status, timestamps, URLs and metrics (about 1 KiB), the input as it was sent (the
 * prompt, the negative prompt and the parameters, each bounded by this API well below 64 KiB; images
 * given as file URLs), the logs (a video model's progress lines: tens of KiB) and the output (video
 * URLs). 1 MiB leaves room for ten times the logs. A prediction whose input carried its images inline
 * (data: URIs of up to 8 MiB each) is larger: its callback is refused unread (413) and its job
 * completes by polling, the fallback every callback has.
 */
export const REPLICATE_CALLBACK_BODY_BYTES_MAX = 1024 * 1024;
/** Replicate refuses a deadline shorter than a few seconds; a job this close to its end is given this much. */
const MIN_CANCEL_AFTER_S = 5;
const JSON_BYTES_MAX = 16 * 1024 * 1024;
/** How much of a create answer is read at most while looking for the prediction's id (it echoes the input). */
const CREATE_ANSWER_BYTES_MAX = 256 * 1024 * 1024;
/**
 * Replicate's advice for file inputs (HTTP API reference, predictions.create "input"): a data URL for a
 * file of at most 256 KB, an uploaded file's URL for a larger one. Larger images are uploaded.
 */
export const REPLICATE_DATA_URL_BYTES_MAX = 256 * 1000;
const FILE_EXTENSIONS: Record<InputImage['mime_type'], string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };
const PREDICTION_ID = /^[a-z0-9]{1,64}$/;

export interface ReplicateOptions {
  token: string;
  /** Our model id -> the catalog's replicate entry of it; undefined = not a Replicate model. */
  backendFor: (model: string) => VideoModelBackend | undefined;
  apiUrl?: string;
  /** REPLICATE_WEBHOOK_SECRET (`whsec_...`); unset = fetched from GET /v1/webhooks/default/secret. */
  webhookSecret?: string;
  requestTimeoutMs?: number;
  downloadTimeoutMs?: number;
  outputBytesMax?: number;
  secretCacheMs?: number;
  secretMinRefreshMs?: number;
  /** First wait after a failed fetch of the secret (doubling, up to secretFetchBackoffMsMax): no other fetch before it. */
  secretFetchBackoffMs?: number;
  secretFetchBackoffMsMax?: number;
  now_ms?: () => number;
}

/** Replicate's error bodies (RFC 7807 problem details): {"title", "detail", "status", "invalid_fields"?}. */
export const describeReplicateError: ErrorDescriber = (body) => {
  const b = body as { title?: unknown; detail?: unknown; invalid_fields?: unknown } | null;
  const parts = [typeof b?.detail === 'string' ? b.detail : typeof b?.title === 'string' ? b.title : ''];
  if (Array.isArray(b?.invalid_fields)) {
    for (const f of b.invalid_fields.slice(0, 5)) {
      const field = f as { field?: unknown; description?: unknown } | null;
      if (typeof field?.description === 'string')
        parts.push(`${typeof field.field === 'string' ? `${field.field}: ` : ''}${field.description}`);
    }
  }
  return parts.filter(Boolean).join('; ');
};

/** Cancel-After's duration ("1h2m3s"), Replicate's format for a prediction deadline. */
export function cancelAfterValue(remaining_ms: number): string {
  let s = Math.max(MIN_CANCEL_AFTER_S, Math.ceil(remaining_ms / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s || (!h && !m) ? `${s}s` : ''}`;
}

/**
 * Progress from a prediction's logs, as Replicate's own client reads it: the last progress bar line
 * (`45%|████      | 45/100 [...]`), as current/total x 100. Null when the logs have none.
 */
export function progressFromLogs(logs: unknown): number | null {
  if (typeof logs !== 'string' || logs.length === 0) return null;
  const lines = logs
    .slice(-64 * 1024)
    .split(/\r?\n|\r/)
    .reverse();
  for (const line of lines) {
    const m = /^\s*(\d+)%\s*\|.+?\|\s*(\d+)\/(\d+)/.exec(line);
    if (m && Number(m[3]) > 0) return Math.min(100, Math.floor((Number(m[2]) / Number(m[3])) * 100));
  }
  return null;
}

export class ReplicateVideoProvider implements VideoProvider {
  readonly name = 'replicate';
  readonly #token: string;
  readonly #configuredSecret: string | undefined;
  private readonly backendFor: (model: string) => VideoModelBackend | undefined;
  private readonly apiUrl: string;
  private readonly requestTimeoutMs: number;
  private readonly downloadTimeoutMs: number;
  private readonly outputBytesMax: number;
  private readonly now_ms: () => number;
  readonly #secret: KeyCache<Webhook>;
  readonly callbackReception: CallbackReception;

  constructor(opts: ReplicateOptions) {
    this.#token = opts.token;
    this.#configuredSecret = opts.webhookSecret;
    this.backendFor = opts.backendFor;
    this.apiUrl = (opts.apiUrl ?? REPLICATE_DEFAULT_API_URL).replace(/\/+$/, '');
    this.requestTimeoutMs = opts.requestTimeoutMs ?? REPLICATE_REQUEST_TIMEOUT_MS;
    this.downloadTimeoutMs = opts.downloadTimeoutMs ?? REPLICATE_DOWNLOAD_TIMEOUT_MS;
    this.outputBytesMax = opts.outputBytesMax ?? VIDEO_OUTPUT_BYTES_MAX;
    this.now_ms = opts.now_ms ?? Date.now;
    this.#secret = new KeyCache(() => this.fetchSecret(), {
      cache_ms: opts.secretCacheMs ?? REPLICATE_SECRET_CACHE_MS,
      min_refresh_ms: opts.secretMinRefreshMs ?? REPLICATE_SECRET_MIN_REFRESH_MS,
      failure_backoff_ms: opts.secretFetchBackoffMs ?? KEY_FETCH_BACKOFF_MS,
      failure_backoff_ms_max: opts.secretFetchBackoffMsMax ?? KEY_FETCH_BACKOFF_MS_MAX,
      now_ms: this.now_ms,
    });
    this.callbackReception = {
      body_bytes_max: REPLICATE_CALLBACK_BODY_BYTES_MAX,
      checkHeaders: (headers) => void this.callbackHeaders(headers),
    };
    // A configured secret is checked now: a mistake stops the process at startup, not every callback.
    if (this.#configuredSecret !== undefined) new Webhook(this.#configuredSecret);
  }

  /** Where a prediction is created and its body (exported for the contract tests). */
  buildRequest(req: VideoSubmission, opts: SubmitOptions = {}, imageRefs: ImageRefs = {}): { url: string; body: Record<string, unknown> } {
    const entry = backendEntry(this.backendFor, req.model, 'replicate');
    const input = mappedInput(req, entry.input, `Replicate model ${entry.provider_model_id}`, imageRefs);
    const body: Record<string, unknown> = entry.version ? { version: entry.version, input } : { input };
    if (opts.callback_url) Object.assign(body, { webhook: opts.callback_url, webhook_events_filter: ['completed'] });
    const [owner, name] = entry.provider_model_id.split('/');
    const url = entry.version
      ? `${this.apiUrl}/v1/predictions`
      : `${this.apiUrl}/v1/models/${encodeURIComponent(owner ?? '')}/${encodeURIComponent(name ?? '')}/predictions`;
    return { url, body };
  }

  // No idempotency key at Replicate: a submit retried after a lost answer may start a second
  // (unbilled to the customer) prediction, as with Vertex AI. An answer read in full is never lost to
  // its size: the prediction's id is kept however much input it echoes.
  async submit(req: VideoSubmission, opts: SubmitOptions = {}): Promise<{ operation_id: string }> {
    backendEntry(this.backendFor, req.model, 'replicate');
    // Uploaded before any prediction is created: a refused upload leaves nothing running.
    const imageRefs: ImageRefs = {
      image: req.image ? await this.uploadedUrl(req.image, req.request_id, 'image') : undefined,
      last_frame: req.last_frame ? await this.uploadedUrl(req.last_frame, req.request_id, 'last_frame') : undefined,
    };
    const { url, body } = this.buildRequest(req, opts, imageRefs);
    // The job's deadline is the prediction's: Replicate cancels it then (aborted if it never started, not billed).
    const headers: Record<string, string> =
      req.deadline_at_ms !== undefined ? { 'cancel-after': cancelAfterValue(req.deadline_at_ms - Date.now()) } : {};
    const ids = await submitEach(
      req.params.n,
      async () => {
        // The answer is the prediction with its input echoed, however large: only its id is kept.
        const { fields } = await requestJsonFields({
          method: 'POST',
          url,
          headers: { authorization: `Bearer ${this.#token}`, ...headers },
          json: body,
          what: 'Replicate create prediction',
          timeoutMs: this.requestTimeoutMs,
          bytesMax: CREATE_ANSWER_BYTES_MAX,
          describe: describeReplicateError,
          fields: ['id'],
        });
        const id = fields['id'];
        if (id === undefined || !PREDICTION_ID.test(id)) throw unreadable('Replicate create prediction', 'no prediction id');
        return id;
      },
      (id) => this.cancelOne(id).catch(() => {}),
    );
    return { operation_id: ids.join(',') };
  }

  async poll(operation_id: string): Promise<VideoOperationStatus> {
    return combineStatuses(await Promise.all(parseOperationId(operation_id).map((id) => this.pollOne(id))));
  }

  async fetchOutput(_operation_id: string, output: VideoOutputRef): Promise<Buffer> {
    return downloadOutput(output.ref, 'Replicate output download', this.downloadTimeoutMs, this.outputBytesMax);
  }

  /**
   * Cancels every prediction of the job (an ended one stays as it is: Replicate answers it unchanged).
   * Replicate bills the compute time a prediction used while it ran, not the setup before it
   * (replicate.com/docs/billing; statuses in replicate.com/docs/reference/http#predictions.get): one
   * cancelled while `starting` costs nothing, one that was `processing` is billed for the time it ran, one
   * that had ended is billed and the cancel changes nothing. The answer counts them per prediction (see
   * CancelAnswer): a job of n videos is n predictions, each one unit.
   */
  async cancel(operation_id: string): Promise<CancelAnswer> {
    const ids = parseOperationId(operation_id);
    const results = await Promise.allSettled(ids.map((id) => this.cancelOne(id)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const predictions = results.map((r) => (r as PromiseFulfilledResult<CancelledRequest>).value);
    return cancelAnswerOf('Replicate', predictions, { queued: 'starting', running: 'processing', ended: 'succeeded, failed or canceled' });
  }

  /**
   * The checks made on a Replicate callback's headers before its body is read (Standard Webhooks):
   * webhook-id, webhook-timestamp (Unix seconds, within 5 minutes of now) and webhook-signature
   * (space-separated `v1,<base64>`) present and well formed.
   */
  private callbackHeaders(given: IncomingHttpHeaders): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
      const v = given[name];
      if (typeof v !== 'string' || v.length === 0 || v.length > 4096)
        throw new CallbackRejected(`the Replicate webhook header ${name} is missing`);
      headers[name] = v;
    }
    if (headers['webhook-id']!.length > 256) throw new CallbackRejected('the Replicate webhook id is longer than 256 characters');
    if (!/^[0-9]{1,12}$/.test(headers['webhook-timestamp']!))
      throw new CallbackRejected('the Replicate webhook timestamp is not Unix seconds');
    // The library checks the timestamp against the real clock; a test clock is checked here first.
    if (Math.abs(this.now_ms() / 1000 - Number(headers['webhook-timestamp'])) > REPLICATE_CALLBACK_TOLERANCE_S) {
      throw new CallbackRejected(`the Replicate webhook timestamp is more than ${REPLICATE_CALLBACK_TOLERANCE_S} s away from now`);
    }
    if (!/^v1,[A-Za-z0-9+/=]+( |$)/.test(headers['webhook-signature']!))
      throw new CallbackRejected('the Replicate webhook signature is not a v1 signature');
    return headers;
  }

  /**
   * Replicate's documented verification (Standard Webhooks): the headers as callbackHeaders checks them,
   * and one of the signatures the base64 HMAC-SHA256 of "id.timestamp.body" under the signing secret.
   * Throws CallbackRejected when none matches; a secret that cannot be fetched (and none held) is a
   * ProviderError (the callback is answered 503 and Replicate delivers it again). The delivery is its
   * webhook-id, which Replicate keeps across its retries of one event.
   */
  async verifyCallback(callback: ProviderCallback): Promise<VerifiedCallback> {
    const headers = this.callbackHeaders(callback.headers);
    const verifies = (webhook: Webhook) => {
      try {
        webhook.verify(callback.raw_body, headers);
        return true;
      } catch (err) {
        if (err instanceof WebhookVerificationError) return false;
        throw err;
      }
    };
    if (!verifies(await this.signingSecret(false)) && !(this.#configuredSecret === undefined && verifies(await this.signingSecret(true)))) {
      throw new CallbackRejected('the Replicate webhook signature does not verify with the signing secret');
    }
    let id: unknown;
    try {
      id = (JSON.parse(callback.raw_body.toString('utf8')) as { id?: unknown } | null)?.id;
    } catch {
      id = undefined;
    }
    return { delivery_id: `replicate:${headers['webhook-id']}`, request_ref: typeof id === 'string' ? id : null };
  }

  /** A Replicate callback concerns a job only if its prediction is one of the job's. */
  callbackConcerns(operation_id: string, callback: VerifiedCallback): boolean {
    try {
      return callback.request_ref !== null && parseOperationId(operation_id).includes(callback.request_ref);
    } catch {
      return false;
    }
  }

  private async pollOne(id: string): Promise<VideoOperationStatus> {
    const { body } = await this.call('GET', `${this.apiUrl}/v1/predictions/${id}`, undefined, 'Replicate get prediction');
    const p = body as { status?: unknown; output?: unknown; error?: unknown; logs?: unknown; data_removed?: unknown } | null;
    const error =
      typeof p?.error === 'string' && p.error
        ? truncate(p.error)
        : typeof p?.error === 'object' && p.error
          ? truncate(JSON.stringify(p.error))
          : undefined;
    switch (p?.status) {
      case 'starting':
        return { state: 'running', progress: null, queue_position: null };
      case 'processing':
        return { state: 'running', progress: progressFromLogs(p.logs), queue_position: null };
      case 'succeeded': {
        const urls = (Array.isArray(p.output) ? p.output : [p.output]).filter(
          (u): u is string => typeof u === 'string' && isFetchableUrl(u),
        );
        if (urls.length === 0) {
          if (p.data_removed === true)
            return {
              state: 'failed',
              code: 'output_expired',
              message: 'Replicate deleted the outputs of this prediction (an hour after it ended)',
            };
          throw unreadable('Replicate get prediction', 'no video URL in the output');
        }
        return { state: 'succeeded', outputs: urls.map((ref) => ({ ref, content_type: 'video/mp4' })) };
      }
      case 'failed':
        return { state: 'failed', code: 'generation_failed', message: error ?? 'the prediction failed' };
      case 'canceled':
        return { state: 'failed', code: 'cancelled', message: 'the prediction was cancelled' };
      case 'aborted':
        return {
          state: 'failed',
          code: 'deadline_exceeded',
          message: 'the prediction was aborted before it started (its deadline passed)',
        };
      default:
        throw unreadable('Replicate get prediction', `an unknown status ${truncate(JSON.stringify(p?.status ?? null), 50)}`);
    }
  }

  /**
   * An image as the model's input names it: a data URL when it is small, else uploaded with Replicate's
   * files API (its metadata names the job) and given by the URL Replicate answers.
   */
  private async uploadedUrl(image: InputImage, request_id: string, which: 'image' | 'last_frame'): Promise<string | undefined> {
    if (image.bytes.length <= REPLICATE_DATA_URL_BYTES_MAX) return undefined;
    const form = new FormData();
    form.append(
      'content',
      new Blob([new Uint8Array(image.bytes)], { type: image.mime_type }),
      `${which}.${FILE_EXTENSIONS[image.mime_type]}`,
    );
    form.append('filename', `${which}.${FILE_EXTENSIONS[image.mime_type]}`);
    form.append('type', image.mime_type);
    form.append('metadata', JSON.stringify({ job_id: request_id, input: which }));
    const { body } = await requestJson({
      method: 'POST',
      url: `${this.apiUrl}/v1/files`,
      headers: { authorization: `Bearer ${this.#token}` },
      form,
      what: 'Replicate create file',
      timeoutMs: this.requestTimeoutMs,
      bytesMax: JSON_BYTES_MAX,
      describe: describeReplicateError,
    });
    const get = (body as { urls?: { get?: unknown } } | null)?.urls?.get;
    if (typeof get !== 'string' || !/^https?:\/\//.test(get)) throw unreadable('Replicate create file', 'no file URL');
    return get;
  }

  /**
   * Cancels one prediction; where it stood: its status just before the cancel, unless the cancel's answer
   * (the prediction) shows it had ended meanwhile. One that started processing between the two counts as
   * starting: its cost is then Replicate's to us, never more than the customer's.
   */
  private async cancelOne(id: string): Promise<CancelledRequest> {
    const { body } = await this.call('GET', `${this.apiUrl}/v1/predictions/${id}`, undefined, 'Replicate get prediction');
    const status = (body as { status?: unknown } | null)?.status;
    const { body: after } = await this.call('POST', `${this.apiUrl}/v1/predictions/${id}/cancel`, undefined, 'Replicate cancel prediction');
    const now = (after as { status?: unknown } | null)?.status;
    if (now === 'succeeded' || now === 'failed') return 'ended';
    return status === 'starting' ? 'queued' : status === 'processing' ? 'running' : 'ended';
  }

  private call(method: 'GET' | 'POST', url: string, json: unknown, what: string, headers: Record<string, string> = {}) {
    return requestJson({
      method,
      url,
      headers: { authorization: `Bearer ${this.#token}`, ...headers },
      json,
      what,
      timeoutMs: this.requestTimeoutMs,
      bytesMax: JSON_BYTES_MAX,
      describe: describeReplicateError,
    });
  }

  /** REPLICATE_WEBHOOK_SECRET, else the account's secret from Replicate, cached (`refresh`: the held one did not verify). */
  private async signingSecret(refresh: boolean): Promise<Webhook> {
    if (this.#configuredSecret !== undefined) return new Webhook(this.#configuredSecret);
    return this.#secret.get(refresh);
  }

  private async fetchSecret(): Promise<Webhook> {
    const { body } = await this.call('GET', `${this.apiUrl}/v1/webhooks/default/secret`, undefined, 'Replicate webhook secret');
    const key = (body as { key?: unknown } | null)?.key;
    try {
      if (typeof key !== 'string') throw new Error('no key');
      return new Webhook(key);
    } catch {
      throw unreadable('Replicate webhook secret', 'no usable signing key');
    }
  }
}

function parseOperationId(operation_id: string): string[] {
  const ids = operation_id.split(',');
  if (ids.length === 0 || ids.length > 16 || !ids.every((id) => PREDICTION_ID.test(id))) {
    throw new ProviderError(`"${truncate(operation_id, 200)}" is not a Replicate operation id`, { code: 'not_found', retryable: false });
  }
  return ids;
}

/** Replicate's settings: enabled by REPLICATE_API_TOKEN. */
export interface ReplicateConfig {
  /** REPLICATE_API_TOKEN. Not enumerable: never serialised or logged. */
  token: string;
  apiUrl: string;
  /** REPLICATE_WEBHOOK_SECRET; unset = fetched from Replicate. Not enumerable. */
  webhookSecret: string | undefined;
}

const REPLICATE_ENV = {
  REPLICATE_API_TOKEN: credential().optional(),
  REPLICATE_API_URL: z.string().url().default(REPLICATE_DEFAULT_API_URL),
  REPLICATE_WEBHOOK_SECRET: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/=]{16,200}$/, 'must be the signing secret Replicate gives (whsec_ then base64)')
    .optional(),
};

/** Replicate (predictions API) as a video backend; callbacks verified with REPLICATE_WEBHOOK_SECRET, else the account's secret fetched from Replicate. */
export const replicateDescriptor = videoProvider({
  kind: 'video',
  name: 'replicate',
  env: REPLICATE_ENV,
  settings(e): ReplicateConfig | null {
    if (!e.REPLICATE_API_TOKEN) return null;
    const config: ReplicateConfig = {
      token: '',
      apiUrl: secureEndpoint('REPLICATE_API_URL', e.REPLICATE_API_URL),
      webhookSecret: undefined,
    };
    hideSecret(config, 'token', e.REPLICATE_API_TOKEN);
    return hideSecret(config, 'webhookSecret', e.REPLICATE_WEBHOOK_SECRET);
  },
  build: ({ token, apiUrl, webhookSecret }, { catalog }) =>
    new ReplicateVideoProvider({
      token,
      apiUrl,
      ...(webhookSecret ? { webhookSecret } : {}),
      backendFor: (id) => catalog.backendFor(id, 'replicate'),
    }),
  capabilities: { callbacks: true, cancel_bills: 'started_requests', parameters: null, memory_held: [] },
});
