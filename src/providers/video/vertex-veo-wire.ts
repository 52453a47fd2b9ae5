// Vertex AI Veo's REST shapes, as the adapter (./vertex-veo.ts) sends and reads them: the request's
// instance and `parameters` (with the passthrough policy), operation ids and names, an operation and its
// videos, google.rpc codes, Cloud Storage URIs, and a non-2xx answer as a ProviderError.
import { ProviderError, type InputImage, type VideoOperationStatus } from './types.js';
import { isPassingStatus, passingRefusal, readErrorDetail, truncate } from './http.js';

/**
 * `parameters` keys the service sets itself (from the job's validated fields and its config), or that
 * would send outputs or notifications somewhere the service does not own. Compared case-insensitively
 * and ignoring `_`, because Vertex also accepts the proto field names (`sample_count`, `storage_uri`).
 */
export const VERTEX_CONTROLLED_PARAMETERS: readonly string[] = [
  'sampleCount',
  'durationSeconds',
  'resolution',
  'aspectRatio',
  'seed',
  // generateAudio changes the price: only the job's own (priced) setting is sent.
  'generateAudio',
  'negativePrompt',
  'storageUri',
  'pubsubTopic',
];
const CONTROLLED = new Set(VERTEX_CONTROLLED_PARAMETERS.map(normalizeKey));
/** Any other key naming a destination (an output URI, a bucket, a topic, a callback) is dropped too. */
const DESTINATION_KEY = /uri|url|bucket|storage|topic|output|destination|sink|callback|webhook|notif/i;
const UNSAFE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

function normalizeKey(key: string): string {
  return key.toLowerCase().replace(/_/g, '');
}

/**
 * The request `parameters`: the passthrough first, then the fields the service controls on top.
 * Policy: a passthrough key the service controls (VERTEX_CONTROLLED_PARAMETERS) or naming a destination is
 * dropped silently (returned in `dropped`), never sent; the job's own fields always win.
 */
export function mergeVertexParameters(
  passthrough: Record<string, unknown> | undefined,
  controlled: Record<string, unknown>,
): { parameters: Record<string, unknown>; dropped: string[] } {
  const parameters: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const [key, value] of Object.entries(passthrough ?? {})) {
    if (value === undefined) continue;
    if (UNSAFE_KEYS.has(key) || CONTROLLED.has(normalizeKey(key)) || DESTINATION_KEY.test(key)) {
      dropped.push(key);
      continue;
    }
    parameters[key] = value;
  }
  for (const [key, value] of Object.entries(controlled)) if (value !== undefined) parameters[key] = value;
  return { parameters, dropped };
}

// Operation ids are `<Vertex operation name>#n=<sampleCount>`: the name alone is what Vertex knows; the
// suffix lets poll cap the outputs at n without keeping anything between activities.
export const OPERATION_NAME = /^projects\/[^/#]+\/locations\/[^/#]+\/publishers\/[^/#]+\/models\/([A-Za-z0-9._-]+)\/operations\/[^/#]+$/;

export interface ParsedOperationId {
  name: string;
  model: string;
  n: number | undefined;
}

export function parseOperationId(operation_id: string): ParsedOperationId {
  const hash = operation_id.lastIndexOf('#n=');
  const name = hash >= 0 ? operation_id.slice(0, hash) : operation_id;
  const nText = hash >= 0 ? operation_id.slice(hash + 3) : undefined;
  const m = OPERATION_NAME.exec(name);
  const n = nText !== undefined && /^[1-9][0-9]{0,2}$/.test(nText) ? Number(nText) : undefined;
  if (!m || (nText !== undefined && n === undefined)) {
    throw new ProviderError(`"${truncate(operation_id, 200)}" is not a Vertex AI operation id`, { code: 'not_found', retryable: false });
  }
  return { name, model: m[1]!, n };
}

export interface VeoImage {
  bytesBase64Encoded: string;
  mimeType: string;
}

export interface VeoInstance {
  prompt: string;
  image?: VeoImage;
  lastFrame?: VeoImage;
}

export const veoImage = (image: InputImage): VeoImage => ({
  bytesBase64Encoded: image.bytes.toString('base64'),
  mimeType: image.mime_type,
});

export interface VeoVideo {
  bytesBase64Encoded?: unknown;
  gcsUri?: unknown;
  mimeType?: unknown;
}

export interface VeoOperation {
  name?: unknown;
  done?: unknown;
  error?: { code?: unknown; message?: unknown } | null;
  response?: { videos?: unknown; raiMediaFilteredCount?: unknown; raiMediaFilteredReasons?: unknown } | null;
}

/** google.rpc.Code -> the code a failed job reports. */
const RPC_CODES: Record<number, string> = {
  1: 'cancelled',
  2: 'unknown',
  3: 'invalid_argument',
  4: 'deadline_exceeded',
  5: 'not_found',
  6: 'already_exists',
  7: 'permission_denied',
  8: 'resource_exhausted',
  9: 'failed_precondition',
  10: 'aborted',
  11: 'out_of_range',
  12: 'unimplemented',
  13: 'internal',
  14: 'unavailable',
  15: 'data_loss',
  16: 'unauthenticated',
};

export const INLINE_REF = /^inline:(0|[1-9][0-9]{0,3})$/;

export function failedStatus(error: { code?: unknown; message?: unknown }): VideoOperationStatus {
  const code = typeof error.code === 'number' ? (RPC_CODES[error.code] ?? 'generation_failed') : 'generation_failed';
  const message = typeof error.message === 'string' && error.message.trim() ? error.message : 'the video generation failed';
  return { state: 'failed', code, message: truncate(message) };
}

export function parseGcsUri(uri: string): { bucket: string; object: string } | null {
  const m = /^gs:\/\/([a-z0-9][a-z0-9._-]{1,221}[a-z0-9])(?:\/(.*))?$/.exec(uri);
  return m ? { bucket: m[1]!, object: m[2] ?? '' } : null;
}

/** A non-2xx answer: 408, 429 and 5xx are transient; every other status fails fast with the provider's message. */
export async function httpError(res: Response, what: string): Promise<ProviderError> {
  const detail = await readErrorDetail(res, what, (body) => {
    const error = (body as { error?: { message?: unknown; status?: unknown } } | null)?.error;
    return [typeof error?.status === 'string' ? error.status : '', typeof error?.message === 'string' ? error.message : '']
      .filter(Boolean)
      .join(': ');
  });
  const s = res.status;
  const described = `${what} answered HTTP ${s}${detail ? ` (${detail})` : ''}`;
  if (isPassingStatus(s)) return passingRefusal(s, described, res.headers.get('retry-after'));
  const code =
    s === 400
      ? 'invalid_request'
      : s === 401
        ? 'provider_unauthenticated'
        : s === 403
          ? 'provider_permission_denied'
          : s === 404
            ? 'not_found'
            : 'provider_rejected';
  return new ProviderError(truncate(described), { code, retryable: false });
}
