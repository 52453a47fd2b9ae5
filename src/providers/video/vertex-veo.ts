// The Vertex AI Veo adapter (video provider interface), over Vertex AI's REST API:
//
//   submit       POST {endpoint}/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:predictLongRunning
//                  {"instances": [{"prompt", "image"?, "lastFrame"?: {"bytesBase64Encoded", "mimeType"}}],
//                   "parameters": {"sampleCount", "durationSeconds", "resolution", "aspectRatio", "generateAudio"?,
//                   "negativePrompt"?, "seed"?, "storageUri"?, ...passthrough}}  ->  {"name": "<operation name>"}
//   poll         POST {endpoint}/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:fetchPredictOperation
//                  {"operationName"}  ->  Operation {"name", "done"?, "error"?: Status, "response"?: {"videos": [
//                  {"bytesBase64Encoded" | "gcsUri", "mimeType"}], "raiMediaFilteredCount"?, "raiMediaFilteredReasons"?}}
//   fetchOutput  inline video: from the finished operation as poll decoded it (kept in a bounded cache, so an
//                operation is read once, not once per poll and again per output), else the operation again;
//                Cloud Storage video: GET {gcs}/storage/v1/b/{bucket}/o/{object}?alt=media, only under
//                VERTEX_OUTPUT_GCS_URI (a bucket the service owns).
//
// A finished operation with inline videos can be a 256 MiB answer: past LARGE_OPERATION_BYTES, only
// CONCURRENT_LARGE_OPERATION_READS_MAX of them are read at once per process.
//
// Every call is one HTTP request with a timeout; the adapter never loops: Temporal's activity retry policy
// does the backoff. Transient failures (408, 429, 5xx, timeouts, network errors) are retryable ProviderErrors
// (with the provider's Retry-After when it sent one); everything else fails fast. Videos filtered by
// Responsible AI are simply absent from the outputs: the workflow bills what is delivered and refunds the rest.
// Access tokens are never logged nor put in error messages. The request and answer shapes are
// ./vertex-veo-wire.ts; the token source and the cache of finished operations ./vertex-veo-cache.ts.
import { Semaphore } from '../../semaphore.js';
import {
  VIDEO_OUTPUT_BYTES_MAX,
  ProviderError,
  type CancelAnswer,
  type VideoOperationStatus,
  type VideoOutputRef,
  type VideoProvider,
  type VideoSubmission,
} from './types.js';
import { transportError, truncate } from './http.js';
import {
  failedStatus,
  httpError,
  INLINE_REF,
  mergeVertexParameters,
  OPERATION_NAME,
  parseGcsUri,
  parseOperationId,
  veoImage,
  type ParsedOperationId,
  type VeoInstance,
  type VeoOperation,
  type VeoVideo,
} from './vertex-veo-wire.js';
import {
  FinishedOperationCache,
  googleAuthTokenSource,
  INLINE_VIDEO_CACHE_BYTES_MAX,
  staticTokenSource,
  type AccessTokenSource,
  type FinishedOperation,
} from './vertex-veo-cache.js';
import { readCapped, type LargeRead } from '../http-body.js';
import { credential, hideSecret, secureEndpoint, videoProvider } from '../descriptor.js';
import { z } from 'zod';

export const VERTEX_DEFAULT_LOCATION = 'europe-west4';
export const GCS_DEFAULT_API_ENDPOINT = 'https://storage.googleapis.com';
/** Below the provider activities' 20 s start-to-close timeout, so a slow call ends as a clean retryable error. */
export const VERTEX_REQUEST_TIMEOUT_MS = 15_000;
/** Below the storage activity's 30 s heartbeat timeout (it heartbeats once per output). */
export const GCS_DOWNLOAD_TIMEOUT_MS = 25_000;
/** Largest JSON answer read (an operation carrying its videos inline, base64). */
const JSON_BYTES_MAX = 256 * 1024 * 1024;
/**
 * An operation answer longer than this is a finished one carrying its videos inline: reading more of it
 * takes one of CONCURRENT_LARGE_OPERATION_READS_MAX slots of this process (others wait, holding at most
 * this much each), so a batch of finished jobs, or re-polls during a Temporal outage, never hold dozens of
 * 256 MiB answers at once.
 */
export const LARGE_OPERATION_BYTES = 1024 * 1024;
export const CONCURRENT_LARGE_OPERATION_READS_MAX = 2;

export function vertexDefaultApiEndpoint(location: string): string {
  return `https://${location}-aiplatform.googleapis.com`;
}

export interface VertexVeoOptions {
  projectId: string;
  /** Our model id -> the Vertex AI publisher model id (the catalog's provider_model_id); undefined = not a Vertex model. */
  modelIdFor: (model: string) => string | undefined;
  /** Default europe-west4. */
  location?: string;
  /** Default https://{location}-aiplatform.googleapis.com. */
  apiEndpoint?: string;
  /** gs:// prefix the service owns: sent as `storageUri` (one folder per job); unset = videos come back inline. */
  outputGcsUri?: string;
  /** Default https://storage.googleapis.com. */
  gcsApiEndpoint?: string;
  tokenSource: AccessTokenSource;
  requestTimeoutMs?: number;
  downloadTimeoutMs?: number;
  /** Default VIDEO_OUTPUT_BYTES_MAX. */
  outputBytesMax?: number;
}

/** A slot taken while reading: `release` gives it back (a no-op until one was taken). */
interface ReadLease {
  release: () => void;
}

export class VertexVeoProvider implements VideoProvider {
  readonly name = 'vertex';
  private readonly projectId: string;
  private readonly modelIdFor: (model: string) => string | undefined;
  private readonly location: string;
  private readonly apiEndpoint: string;
  private readonly gcsApiEndpoint: string;
  /** Normalised to end with `/`, so `gs://b/videos` never admits `gs://b/videos-other/...`. */
  private readonly outputPrefix: string | undefined;
  private readonly tokenSource: AccessTokenSource;
  private readonly requestTimeoutMs: number;
  private readonly downloadTimeoutMs: number;
  private readonly outputBytesMax: number;
  private readonly largeReads = new Semaphore(CONCURRENT_LARGE_OPERATION_READS_MAX, 10_000);
  private readonly finished = new FinishedOperationCache();
  /** Large operation answers being read at once now, and the most ever (observability, tests). */
  readonly largeReadStats = { in_flight: 0, in_flight_max: 0 };

  constructor(opts: VertexVeoOptions) {
    this.projectId = opts.projectId;
    this.modelIdFor = opts.modelIdFor;
    this.location = opts.location ?? VERTEX_DEFAULT_LOCATION;
    this.apiEndpoint = (opts.apiEndpoint ?? vertexDefaultApiEndpoint(this.location)).replace(/\/+$/, '');
    this.gcsApiEndpoint = (opts.gcsApiEndpoint ?? GCS_DEFAULT_API_ENDPOINT).replace(/\/+$/, '');
    if (opts.outputGcsUri !== undefined) {
      if (!parseGcsUri(opts.outputGcsUri))
        throw new Error(`VERTEX_OUTPUT_GCS_URI must be gs://<bucket>[/<folder>], not ${opts.outputGcsUri}`);
      this.outputPrefix = opts.outputGcsUri.endsWith('/') ? opts.outputGcsUri : `${opts.outputGcsUri}/`;
    }
    this.tokenSource = opts.tokenSource;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? VERTEX_REQUEST_TIMEOUT_MS;
    this.downloadTimeoutMs = opts.downloadTimeoutMs ?? GCS_DOWNLOAD_TIMEOUT_MS;
    this.outputBytesMax = opts.outputBytesMax ?? VIDEO_OUTPUT_BYTES_MAX;
  }

  /** The predictLongRunning body for a request (exported for the contract tests). */
  buildRequestBody(req: VideoSubmission): { instances: [VeoInstance]; parameters: Record<string, unknown> } {
    const { parameters } = mergeVertexParameters(req.parameters, {
      sampleCount: req.params.n,
      durationSeconds: req.params.durationSeconds,
      resolution: req.params.resolution,
      aspectRatio: req.params.aspectRatio,
      generateAudio: req.generate_audio,
      negativePrompt: req.negative_prompt,
      seed: req.seed,
      // One folder per job under the prefix the service owns.
      storageUri: this.outputPrefix ? `${this.outputPrefix}${encodeURIComponent(req.request_id)}/` : undefined,
    });
    const instance: VeoInstance = { prompt: req.prompt };
    if (req.image) instance.image = veoImage(req.image);
    if (req.last_frame) instance.lastFrame = veoImage(req.last_frame);
    return { instances: [instance], parameters };
  }

  // Not idempotent at Vertex (predictLongRunning has no request id): the activity resubmits only when a
  // submit never returned, which may start a second (unbilled to the customer) generation.
  async submit(req: VideoSubmission): Promise<{ operation_id: string }> {
    const model = this.modelIdFor(req.model);
    if (!model) throw new ProviderError(`model ${req.model} is not served by Vertex AI`, { code: 'model_not_supported', retryable: false });
    const body = await this.postJson(this.modelUrl(model, 'predictLongRunning'), this.buildRequestBody(req), 'predictLongRunning');
    const name = (body as { name?: unknown } | null)?.name;
    if (typeof name !== 'string' || !OPERATION_NAME.test(name)) {
      throw new ProviderError('Vertex AI predictLongRunning answered without a valid operation name', {
        code: 'invalid_response',
        retryable: false,
      });
    }
    return { operation_id: `${name}#n=${req.params.n}` };
  }

  async poll(operation_id: string): Promise<VideoOperationStatus> {
    const op = parseOperationId(operation_id);
    const known = this.finished.get(op.name);
    if (known) return known.status;
    return this.withOperation(op, (operation) => {
      if (operation.done !== true) return { state: 'running' } as const;
      if (operation.error) return failedStatus(operation.error);
      return this.remember(op, operation).status;
    });
  }

  /** A finished, successful operation: its status (outputs capped at n) and its inline videos decoded, kept in the cache. */
  private remember(op: ParsedOperationId, operation: VeoOperation): FinishedOperation {
    const response = operation.response ?? {};
    const videos: unknown[] = Array.isArray(response.videos) ? response.videos : [];
    const outputs: VideoOutputRef[] = [];
    const decoded: (Buffer | ProviderError | null)[] = [];
    for (const [i, v] of videos.entries()) {
      const video = (v ?? {}) as VeoVideo;
      const content_type = typeof video.mimeType === 'string' && video.mimeType.startsWith('video/') ? video.mimeType : 'video/mp4';
      const inline = typeof video.bytesBase64Encoded === 'string' && video.bytesBase64Encoded.length > 0;
      if (inline) outputs.push({ ref: `inline:${i}`, content_type });
      else if (typeof video.gcsUri === 'string' && video.gcsUri.length > 0) outputs.push({ ref: video.gcsUri, content_type });
      // an entry with neither is not a video: it is not delivered (a shortfall, refunded)
      decoded.push(inline ? this.decodeInline(video.bytesBase64Encoded as string, i) : null);
    }
    const filtered = typeof response.raiMediaFilteredCount === 'number' ? response.raiMediaFilteredCount : 0;
    let status: VideoOperationStatus;
    if (outputs.length === 0 && filtered > 0) {
      const reasons = Array.isArray(response.raiMediaFilteredReasons)
        ? response.raiMediaFilteredReasons.filter((r): r is string => typeof r === 'string')
        : [];
      status = {
        state: 'failed',
        code: 'content_filtered',
        message: truncate(
          `all ${filtered} videos were filtered by the provider's Responsible AI policies${reasons.length ? `: ${reasons.join('; ')}` : ''}`,
        ),
      };
    } else {
      status = { state: 'succeeded', outputs: op.n !== undefined ? outputs.slice(0, op.n) : outputs };
    }
    const entry: FinishedOperation = {
      status,
      videos: decoded,
      bytes: decoded.reduce((n, b) => n + (b instanceof Buffer ? b.length : 0), 0),
    };
    this.finished.put(op.name, entry);
    return entry;
  }

  private decodeInline(b64: string, index: number): Buffer | ProviderError {
    if (Math.floor((b64.length * 3) / 4) > this.outputBytesMax + 2) {
      return new ProviderError(`inline video ${index} is larger than the ${this.outputBytesMax} bytes accepted`, {
        code: 'output_too_large',
        retryable: false,
      });
    }
    const bytes = Buffer.from(b64, 'base64');
    if (bytes.length === 0 || bytes.length > this.outputBytesMax) {
      return new ProviderError(`inline video ${index} has ${bytes.length} bytes`, { code: 'invalid_output', retryable: false });
    }
    return bytes;
  }

  /**
   * google.longrunning CancelOperation (`POST {endpoint}/v1/{operation name}:cancel`, Vertex AI
   * "Long-running operations"): best effort; on success the operation ends with code 1 (CANCELLED). Veo is
   * priced per second of video generated, so an operation cancelled before it finished is not billed; one
   * that had finished (its cancel has no effect) is billed for the videos it made, which a cancelled job
   * neither delivers nor charges (see CancelAnswer): the customer never pays for a Vertex AI cancel.
   */
  async cancel(operation_id: string): Promise<CancelAnswer> {
    const op = parseOperationId(operation_id);
    await this.request(
      'POST',
      `${this.apiEndpoint}/v1/${op.name}:cancel`,
      {},
      'Vertex AI cancel',
      this.requestTimeoutMs,
      JSON_BYTES_MAX,
      'invalid_response',
    );
    const made = await this.withOperation(op, (after) => {
      if (after.done !== true || after.error) return null;
      const videos = Array.isArray(after.response?.videos) ? after.response.videos.length : 0;
      return op.n !== undefined ? Math.min(videos, op.n) : videos;
    });
    if (made !== null)
      return {
        billed: false,
        billed_units: made,
        ended_units: made,
        answer: `Vertex AI: the operation had already finished with ${made} video(s), billed; none delivered or charged on a cancel`,
      };
    return {
      billed: false,
      billed_units: 0,
      ended_units: 0,
      answer: 'Vertex AI: cancellation accepted before the operation finished; not billed',
    };
  }

  async fetchOutput(operation_id: string, output: VideoOutputRef): Promise<Buffer> {
    const inline = INLINE_REF.exec(output.ref);
    if (inline) return this.fetchInline(parseOperationId(operation_id), Number(inline[1]));
    if (output.ref.startsWith('gs://')) return this.download(output.ref);
    throw new ProviderError(`unknown output reference ${truncate(output.ref, 200)}`, { code: 'not_found', retryable: false });
  }

  private async fetchInline(op: ParsedOperationId, index: number): Promise<Buffer> {
    const entry =
      this.finished.get(op.name) ??
      (await this.withOperation(op, (operation) => {
        if (operation.done !== true || operation.error) {
          throw new ProviderError(`operation ${op.name} has no result to read output ${index} from`, {
            code: 'invalid_response',
            retryable: false,
          });
        }
        return this.remember(op, operation);
      }));
    const video = entry.videos[index];
    if (video instanceof ProviderError) throw video;
    if (!video) throw new ProviderError(`operation ${op.name} has no inline video ${index}`, { code: 'not_found', retryable: false });
    return video;
  }

  private async download(uri: string): Promise<Buffer> {
    if (!this.outputPrefix || !uri.startsWith(this.outputPrefix)) {
      throw new ProviderError(`refusing to read ${truncate(uri, 200)}: not under the service's output location (VERTEX_OUTPUT_GCS_URI)`, {
        code: 'untrusted_output_location',
        retryable: false,
      });
    }
    const gcs = parseGcsUri(uri);
    if (!gcs || !gcs.object)
      throw new ProviderError(`invalid Cloud Storage URI ${truncate(uri, 200)}`, { code: 'invalid_response', retryable: false });
    const url = `${this.gcsApiEndpoint}/storage/v1/b/${encodeURIComponent(gcs.bucket)}/o/${encodeURIComponent(gcs.object)}?alt=media`;
    return this.request('GET', url, undefined, 'Cloud Storage download', this.downloadTimeoutMs, this.outputBytesMax, 'output_too_large');
  }

  /**
   * Reads the operation and runs `use` on it; a large answer (videos inline) holds one of the process's
   * large-read slots from the moment it grows past LARGE_OPERATION_BYTES until `use` has finished.
   */
  private async withOperation<T>(op: ParsedOperationId, use: (operation: VeoOperation) => T): Promise<T> {
    const lease: ReadLease = { release: () => {} };
    try {
      const body = await this.postJson(
        this.modelUrl(op.model, 'fetchPredictOperation'),
        { operationName: op.name },
        'fetchPredictOperation',
        lease,
      );
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        throw new ProviderError('Vertex AI fetchPredictOperation answered with something other than an operation', {
          code: 'invalid_response',
          retryable: false,
        });
      }
      return use(body as VeoOperation);
    } finally {
      lease.release();
    }
  }

  /** Takes a large-read slot for `lease` (waiting for one), counted in largeReadStats. */
  private async takeLargeRead(lease: ReadLease): Promise<void> {
    const release = await new Promise<() => void>((held, refused) => {
      this.largeReads.with(() => new Promise<void>((done) => held(done))).catch(refused);
    });
    this.largeReadStats.in_flight++;
    this.largeReadStats.in_flight_max = Math.max(this.largeReadStats.in_flight_max, this.largeReadStats.in_flight);
    let released = false;
    lease.release = () => {
      if (released) return;
      released = true;
      this.largeReadStats.in_flight--;
      release();
    };
  }

  private modelUrl(model: string, method: 'predictLongRunning' | 'fetchPredictOperation'): string {
    const p = encodeURIComponent(this.projectId);
    const l = encodeURIComponent(this.location);
    return `${this.apiEndpoint}/v1/projects/${p}/locations/${l}/publishers/google/models/${encodeURIComponent(model)}:${method}`;
  }

  private async postJson(url: string, json: unknown, what: string, lease?: ReadLease): Promise<unknown> {
    const large = lease ? { threshold_bytes: LARGE_OPERATION_BYTES, take: () => this.takeLargeRead(lease) } : undefined;
    const raw = await this.request(
      'POST',
      url,
      json,
      `Vertex AI ${what}`,
      this.requestTimeoutMs,
      JSON_BYTES_MAX,
      'invalid_response',
      large,
    );
    try {
      return JSON.parse(raw.toString('utf8'));
    } catch {
      // A 2xx whose body is not JSON is not transient: retrying the same call would not fix it.
      throw new ProviderError(`Vertex AI ${what} answered with malformed JSON`, { code: 'invalid_response', retryable: false });
    }
  }

  /** One HTTP request; the whole body is read within the timeout and at most bytesMax of it. */
  private async request(
    method: 'GET' | 'POST',
    url: string,
    json: unknown,
    what: string,
    timeoutMs: number,
    bytesMax: number,
    tooLargeCode: string,
    large?: LargeRead,
  ): Promise<Buffer> {
    const token = await this.accessToken();
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (json !== undefined) headers['content-type'] = 'application/json; charset=utf-8';
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const res = await fetch(url, { method, headers, body: json !== undefined ? JSON.stringify(json) : undefined, signal });
      if (!res.ok) throw await httpError(res, what);
      return await readCapped(res, bytesMax, what, tooLargeCode, large);
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw transportError(err, what, timeoutMs);
    }
  }

  private async accessToken(): Promise<string> {
    try {
      const token = await this.tokenSource.getAccessToken();
      if (!token) throw new Error('empty access token');
      return token;
    } catch (err) {
      const message = (err as Error)?.message ?? String(err);
      // No credentials at all is configuration, not a transient fault; anything else (metadata server,
      // token endpoint) may be. The message comes from the auth library and never holds a token.
      const permanent = /could not load the default credentials|no access token|empty access token/i.test(message);
      throw new ProviderError(`could not get Google credentials: ${truncate(message, 300)}`, {
        code: 'provider_auth_failed',
        retryable: !permanent,
      });
    }
  }
}

/** Vertex AI Veo's settings: enabled by VERTEX_PROJECT_ID; credentials from Application Default Credentials. */
export interface VertexConfig {
  projectId: string;
  location: string;
  apiEndpoint: string;
  /** gs:// prefix the service owns, sent as `storageUri`; unset = videos come back inline. */
  outputGcsUri: string | undefined;
  gcsApiEndpoint: string;
  /** VERTEX_ACCESS_TOKEN (tests, local use) instead of Application Default Credentials. Not enumerable: never serialised or logged. */
  accessToken: string | undefined;
}

const VERTEX_ENV = {
  VERTEX_PROJECT_ID: z
    .string()
    .regex(/^(?:[a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$/, 'not a Google Cloud project id')
    .optional(),
  VERTEX_LOCATION: z
    .string()
    .regex(/^[a-z][a-z0-9-]{1,40}$/, 'not a Google Cloud region')
    .default(VERTEX_DEFAULT_LOCATION),
  VERTEX_API_ENDPOINT: z.string().url().optional(),
  VERTEX_OUTPUT_GCS_URI: z
    .string()
    .refine((v) => parseGcsUri(v) !== null, 'must be gs://<bucket>[/<folder>/]')
    .optional(),
  GCS_API_ENDPOINT: z.string().url().default(GCS_DEFAULT_API_ENDPOINT),
  VERTEX_ACCESS_TOKEN: credential().optional(),
};

/** Vertex AI Veo as a video backend: it serves the reference (Veo) family when VERTEX_PROJECT_ID is set. */
export const vertexVeoDescriptor = videoProvider({
  kind: 'video',
  name: 'vertex',
  env: VERTEX_ENV,
  settings(e): VertexConfig | null {
    if (!e.VERTEX_PROJECT_ID) return null;
    const config: VertexConfig = {
      projectId: e.VERTEX_PROJECT_ID,
      location: e.VERTEX_LOCATION,
      apiEndpoint: secureEndpoint('VERTEX_API_ENDPOINT', e.VERTEX_API_ENDPOINT ?? vertexDefaultApiEndpoint(e.VERTEX_LOCATION)),
      outputGcsUri: e.VERTEX_OUTPUT_GCS_URI,
      gcsApiEndpoint: secureEndpoint('GCS_API_ENDPOINT', e.GCS_API_ENDPOINT),
      accessToken: undefined,
    };
    return hideSecret(config, 'accessToken', e.VERTEX_ACCESS_TOKEN);
  },
  build: (v, { catalog }) =>
    new VertexVeoProvider({
      projectId: v.projectId,
      // A retired id resolves to its replacement: Vertex never sees it (it answers 404 for those).
      modelIdFor: (id) => catalog.backendFor(id, 'vertex')?.provider_model_id,
      location: v.location,
      apiEndpoint: v.apiEndpoint,
      gcsApiEndpoint: v.gcsApiEndpoint,
      ...(v.outputGcsUri !== undefined ? { outputGcsUri: v.outputGcsUri } : {}),
      tokenSource: v.accessToken ? staticTokenSource(v.accessToken) : googleAuthTokenSource(),
    }),
  capabilities: {
    callbacks: false,
    cancel_bills: 'nothing',
    parameters: null,
    memory_held: [{ what: "Vertex AI's inline videos of finished operations, kept for their copies", bytes: INLINE_VIDEO_CACHE_BYTES_MAX }],
  },
});
