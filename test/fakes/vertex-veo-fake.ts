// A local fake of the two Google services the Vertex AI Veo adapter talks to, reproducing their documented
// wire format (not their behaviour beyond it):
//
//   POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:predictLongRunning
//        {"instances": [{"prompt"}], "parameters": {...}} -> {"name": "projects/.../operations/{id}"}
//   POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:fetchPredictOperation
//        {"operationName"} -> google.longrunning.Operation: {"name"} while running, then {"name", "done": true,
//        "response": {"@type", "videos": [{"bytesBase64Encoded" | "gcsUri", "mimeType"}], "raiMediaFilteredCount"?,
//        "raiMediaFilteredReasons"?}} or {"name", "done": true, "error": {"code", "message"}} (google.rpc.Status)
//   POST /v1/{operation name}:cancel -> {} (google.longrunning CancelOperation: best effort; an operation
//        still running then ends with {"code": 1} CANCELLED, a finished one stays as it was)
//   GET  /storage/v1/b/{bucket}/o/{object}?alt=media -> the object's bytes (Cloud Storage JSON API)
//
// Errors use the Google API error body {"error": {"code", "message", "status"}}. Videos come back inline
// unless the request named a `storageUri`, in which case they are written there (into the fake bucket)
// and returned as gcsUri. Every request is recorded; faults can be scripted per route (fake-http.ts).
//
// Like Vertex AI today, it serves only the models of VERTEX_MODELS: any other id, including the retired
// Veo 3.0 ids, is 404 NOT_FOUND; and it refuses (400 INVALID_ARGUMENT) what Google's Veo API reference
// documents as invalid: durations, resolutions, aspect ratios and sampleCount outside the model's ranges,
// generateAudio missing (required for Veo 3 models) or not a boolean, an image or last frame that is not
// {bytesBase64Encoded | gcsUri, mimeType} with mimeType image/jpeg or image/png and valid base64, and a
// lastFrame without an image. Sources: cloud.google.com/vertex-ai/generative-ai/docs/model-reference/veo-video-generation,
// .../docs/reference/rest/Shared.Types/VideoGenerationModelInstance, .../docs/models/veo/3-1-generate.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { FakeHttpServer, type FakeRequest } from './fake-http.js';

export type FakeRoute = 'predictLongRunning' | 'fetchPredictOperation' | 'cancel' | 'download';

/** What Vertex documents for a model it serves. */
export interface VertexModelSpec {
  durationsSeconds: readonly number[];
  resolutions: readonly string[];
  aspectRatios: readonly string[];
  maxSampleCount: number;
  generateAudioRequired: boolean;
  imageMimeTypes: readonly string[];
}

const VEO_3_1: VertexModelSpec = {
  durationsSeconds: [4, 6, 8],
  resolutions: ['720p', '1080p', '4k'],
  aspectRatios: ['16:9', '9:16'],
  maxSampleCount: 4,
  generateAudioRequired: true,
  imageMimeTypes: ['image/jpeg', 'image/png'],
};

/** The Veo models Vertex AI serves today; the Veo 3.0 ids were retired on 2026-06-30 (404 since). */
export const VERTEX_MODELS: Readonly<Record<string, VertexModelSpec>> = {
  'veo-3.1-generate-001': VEO_3_1,
  'veo-3.1-fast-generate-001': VEO_3_1,
};

/** How the next operations behave (set before the submit they apply to). */
export interface OperationScenario {
  /** fetchPredictOperation calls answered "running" before the operation is done. Default 1. */
  pollsUntilDone?: number;
  /** Videos returned; default the request's sampleCount minus `filtered`. */
  videos?: number;
  /** raiMediaFilteredCount (and that many videos fewer by default). */
  filtered?: number;
  filteredReasons?: string[];
  /** The operation ends with this google.rpc.Status instead of videos. */
  error?: { code: number; message: string };
  /** Bytes of video i (cycled); default a few fake bytes. */
  payloads?: Buffer[];
  mimeType?: string;
  /** Return this gcsUri for every video instead of writing under the request's storageUri. */
  gcsUriOverride?: string;
  /**
   * A slow network: the finished operation's answer is sent as all but its last KiB, then, this many ms
   * later, the rest (so that answers read at the same time are being read at the same time).
   */
  answerPauseMs?: number;
}

interface Operation {
  name: string;
  request: { instances?: Array<Record<string, unknown>>; parameters?: Record<string, unknown> };
  scenario: OperationScenario;
  polls: number;
  result?: Record<string, unknown>;
}

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Google's documented refusals of a predictLongRunning request; null when it is valid. */
function invalidRequest(spec: VertexModelSpec, body: NonNullable<Operation['request']>): string | null {
  const instance = body.instances![0]!;
  const p = body.parameters ?? {};
  if (typeof instance['prompt'] !== 'string' || !instance['prompt']) return 'Invalid value at instances[0].prompt: a prompt is required';
  for (const field of ['image', 'lastFrame'] as const) {
    const image = instance[field];
    if (image === undefined) continue;
    const problem = invalidImage(spec, image);
    if (problem) return `Invalid value at instances[0].${field}: ${problem}`;
  }
  if (instance['lastFrame'] !== undefined && instance['image'] === undefined)
    return 'instances[0].lastFrame can only be used together with instances[0].image';
  const oneOf = (key: string, allowed: readonly unknown[]) =>
    p[key] !== undefined && !allowed.includes(p[key])
      ? `Invalid value at parameters.${key}: ${JSON.stringify(p[key])}; supported values: ${allowed.join(', ')}`
      : null;
  const range =
    oneOf('durationSeconds', spec.durationsSeconds) ??
    oneOf('resolution', spec.resolutions) ??
    oneOf('aspectRatio', spec.aspectRatios) ??
    oneOf(
      'sampleCount',
      Array.from({ length: spec.maxSampleCount }, (_, i) => i + 1),
    );
  if (range) return range;
  if (spec.generateAudioRequired && p['generateAudio'] === undefined) return 'parameters.generateAudio is required for this model';
  if (p['generateAudio'] !== undefined && typeof p['generateAudio'] !== 'boolean')
    return 'Invalid value at parameters.generateAudio: must be a boolean';
  if (p['negativePrompt'] !== undefined && typeof p['negativePrompt'] !== 'string')
    return 'Invalid value at parameters.negativePrompt: must be a string';
  const seed = p['seed'];
  if (seed !== undefined && !(Number.isInteger(seed) && (seed as number) >= 0 && (seed as number) <= 4_294_967_295))
    return 'Invalid value at parameters.seed';
  const storageUri = p['storageUri'];
  if (storageUri !== undefined && !(typeof storageUri === 'string' && storageUri.startsWith('gs://')))
    return 'storageUri must start with gs://';
  return null;
}

function invalidImage(spec: VertexModelSpec, image: unknown): string | null {
  if (typeof image !== 'object' || image === null) return 'must be an Image object';
  const { bytesBase64Encoded: bytes, gcsUri, mimeType } = image as Record<string, unknown>;
  if ((bytes === undefined) === (gcsUri === undefined)) return 'exactly one of bytesBase64Encoded and gcsUri';
  if (bytes !== undefined && !(typeof bytes === 'string' && bytes.length > 0 && BASE64.test(bytes)))
    return 'bytesBase64Encoded is not valid base64';
  if (typeof mimeType !== 'string' || !spec.imageMimeTypes.includes(mimeType))
    return `mimeType must be one of ${spec.imageMimeTypes.join(', ')}`;
  return null;
}

export function googleError(status: number, message: string) {
  return { error: { code: status, message, status: STATUS_NAMES[status] ?? 'UNKNOWN' } };
}

const MODEL_PATH =
  /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/google\/models\/([^/:]+):(predictLongRunning|fetchPredictOperation)$/;
const GCS_MEDIA = /^\/storage\/v1\/b\/([^/]+)\/o\/([^/?]+)$/;
const CANCEL_PATH = /^\/v1\/(projects\/[^/]+\/locations\/[^/]+\/publishers\/google\/models\/[^/:]+\/operations\/[^/:]+):cancel$/;

export class VertexVeoFake extends FakeHttpServer<FakeRoute> {
  /** gs://bucket/object -> bytes, as written by operations with a storageUri (or put by tests). */
  readonly objects = new Map<string, { bytes: Buffer; contentType: string }>();
  readonly operations = new Map<string, Operation>();
  /** The bearer token every request must carry. */
  expectedToken = 'test-token';
  scenario: OperationScenario = {};
  protected override jsonContentType = 'application/json; charset=UTF-8';

  protected override fakeFailed(res: http.ServerResponse, err: Error): void {
    this.json(res, 500, googleError(500, `fake failed: ${err.message}`));
  }

  reset(): void {
    this.resetHttp();
    this.scenario = {};
  }

  protected routeOf(method: string, url: URL): FakeRoute | 'unknown' {
    const model = MODEL_PATH.exec(url.pathname);
    const media = GCS_MEDIA.exec(url.pathname);
    if (method === 'POST' && CANCEL_PATH.test(url.pathname)) return 'cancel';
    return method === 'POST' && model
      ? (model[4] as FakeRoute)
      : method === 'GET' && media && url.searchParams.get('alt') === 'media'
        ? 'download'
        : 'unknown';
  }

  protected notFound({ req, res, url }: FakeRequest<FakeRoute>): void {
    this.json(res, 404, googleError(404, `no route for ${req.method} ${url.pathname}`));
  }

  protected serve({ req, res, url, recorded }: FakeRequest<FakeRoute>): void {
    if (req.headers['authorization'] !== `Bearer ${this.expectedToken}`) {
      return this.json(res, 401, googleError(401, 'Request had invalid authentication credentials. Expected OAuth 2 access token.'));
    }

    if (recorded.route === 'download') {
      const media = GCS_MEDIA.exec(url.pathname)!;
      return this.download(res, decodeURIComponent(media[1]!), decodeURIComponent(media[2]!));
    }
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
      return this.json(res, 400, googleError(400, 'Invalid JSON payload: expected application/json'));
    }
    if (recorded.route === 'cancel') return this.cancel(res, CANCEL_PATH.exec(url.pathname)![1]!);
    const [, project, location, modelId] = MODEL_PATH.exec(url.pathname)!;
    const spec = VERTEX_MODELS[modelId!];
    if (!spec) {
      return this.json(
        res,
        404,
        googleError(
          404,
          `Publisher Model \`projects/${project}/locations/${location}/publishers/google/models/${modelId}\` was not found or your project does not have access to it.`,
        ),
      );
    }
    if (recorded.route === 'predictLongRunning') return this.predict(res, project!, location!, modelId!, spec, recorded.json);
    return this.fetchOperation(res, recorded.json);
  }

  private predict(res: http.ServerResponse, project: string, location: string, model: string, spec: VertexModelSpec, body: unknown): void {
    const b = body as Operation['request'] | undefined;
    if (!b || !Array.isArray(b.instances) || b.instances.length !== 1)
      return this.json(res, 400, googleError(400, 'instances must hold exactly one instance'));
    const invalid = invalidRequest(spec, b);
    if (invalid) return this.json(res, 400, googleError(400, invalid));
    const name = `projects/${project}/locations/${location}/publishers/google/models/${model}/operations/${randomUUID()}`;
    this.operations.set(name, { name, request: b, scenario: { ...this.scenario }, polls: 0 });
    this.json(res, 200, { name });
  }

  /** The decoded image of the instance an operation was created with (what Vertex received). */
  receivedImage(operation_name: string, field: 'image' | 'lastFrame'): Buffer | undefined {
    const image = this.operations.get(operation_name)?.request.instances?.[0]?.[field] as { bytesBase64Encoded?: string } | undefined;
    return image?.bytesBase64Encoded !== undefined ? Buffer.from(image.bytesBase64Encoded, 'base64') : undefined;
  }

  private fetchOperation(res: http.ServerResponse, body: unknown): void {
    const name = (body as { operationName?: unknown } | undefined)?.operationName;
    if (typeof name !== 'string') return this.json(res, 400, googleError(400, 'operationName is required'));
    const op = this.operations.get(name);
    if (!op) return this.json(res, 404, googleError(404, `Operation ${name} not found.`));
    op.polls++;
    if (op.polls <= (op.scenario.pollsUntilDone ?? 1)) return this.json(res, 200, { name });
    op.result ??= this.complete(op);
    const pause_ms = op.scenario.answerPauseMs;
    if (pause_ms === undefined) return this.json(res, 200, { name, done: true, ...op.result });
    const answer = Buffer.from(JSON.stringify({ name, done: true, ...op.result }));
    const split = Math.max(0, answer.length - 1024);
    res.writeHead(200, { 'content-type': this.jsonContentType, 'content-length': String(answer.length) });
    res.write(answer.subarray(0, split));
    setTimeout(() => res.end(answer.subarray(split)), pause_ms);
  }

  /** CancelOperation: a running operation ends cancelled; a finished one is left as it was. */
  private cancel(res: http.ServerResponse, name: string): void {
    const op = this.operations.get(name);
    if (!op) return this.json(res, 404, googleError(404, `Operation ${name} not found.`));
    op.result ??= { error: { code: 1, message: 'CANCELLED' } };
    op.polls = Math.max(op.polls, op.scenario.pollsUntilDone ?? 1);
    this.json(res, 200, {});
  }

  private complete(op: Operation): Record<string, unknown> {
    const s = op.scenario;
    if (s.error) return { error: s.error };
    const sampleCount = Number(op.request.parameters?.['sampleCount'] ?? 1);
    const filtered = s.filtered ?? 0;
    const count = s.videos ?? Math.max(0, sampleCount - filtered);
    const mimeType = s.mimeType ?? 'video/mp4';
    const storageUri = op.request.parameters?.['storageUri'] as string | undefined;
    const videos = Array.from({ length: count }, (_, i) => {
      const bytes = s.payloads?.length ? s.payloads[i % s.payloads.length]! : Buffer.from(`fake video ${i} of ${op.name}`);
      if (s.gcsUriOverride) return { gcsUri: s.gcsUriOverride, mimeType };
      if (storageUri) {
        const uri = `${storageUri.endsWith('/') ? storageUri : `${storageUri}/`}${op.name.split('/').pop()}/sample_${i}.mp4`;
        this.objects.set(uri, { bytes, contentType: mimeType });
        return { gcsUri: uri, mimeType };
      }
      return { bytesBase64Encoded: bytes.toString('base64'), mimeType };
    });
    return {
      response: {
        '@type': 'type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse',
        ...(filtered ? { raiMediaFilteredCount: filtered } : {}),
        ...(s.filteredReasons ? { raiMediaFilteredReasons: s.filteredReasons } : {}),
        videos,
      },
    };
  }

  private download(res: http.ServerResponse, bucket: string, object: string): void {
    const obj = this.objects.get(`gs://${bucket}/${object}`);
    if (!obj) return this.json(res, 404, googleError(404, `No such object: ${bucket}/${object}`));
    res.writeHead(200, { 'content-type': obj.contentType, 'content-length': String(obj.bytes.length) });
    res.end(obj.bytes);
  }
}
