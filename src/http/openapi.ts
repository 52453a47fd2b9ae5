// The OpenAPI 3.1 document of the API, served at GET /v2/openapi.json and rendered by GET /docs.
// Every schema in it is generated from zod with zod's own z.toJSONSchema: request bodies from the
// very schemas the routes validate with (./schemas.ts, io 'input'), responses from the response
// schemas beside them (io 'output'), each a component named after its export. Only the operations
// around them (paths, statuses, headers, prose) are written here. Request bodies whose limits depend on
// the model are stated per model (./openapi-catalog.ts). Built once per app, from the catalog it runs with.
import fs from 'node:fs';
import { z } from 'zod';
import * as S from './schemas.js';
import { JSON_BODY_LIMIT_BYTES } from './json-body.js';
import { VoiceName, VOICE_UPLOAD_LIMITS } from './routes/voices.js';
import { VIDEO_CREATE_BODY_LIMIT_BYTES } from './routes/videos.js';
import { AUDIO_CONTENT_TYPES } from '../media/audio-sniff.js';
import { SimulateSchema } from '../providers/video/simulator.js';
import { apiKeyBodySchema, speechBodyExample, speechBodySchema, videoBodyExample, videoBodySchema, type ModelAvailability } from './openapi-catalog.js';
import { JSON_VALUE_COMPONENT, JSON_VALUE_SCHEMA, refuseNul } from './openapi-no-nul.js';
import { webhookUrlPattern } from '../webhooks/target-policy.js';
import { projectPath } from '../paths.js';

type JsonSchema = Record<string, unknown>;
type Obj = Record<string, unknown>;

const MiB = 1024 * 1024;
const bytesText = (n: number) => (n % MiB === 0 ? `${n / MiB} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`);

/**
 * The multipart form of POST /v2/audio/voices. Documentation only: multipart bodies are parsed by
 * ./multipart.ts, not zod, so this is built from the limits that parser enforces (VOICE_UPLOAD_LIMITS).
 */
export const CreateVoiceForm = z
  .strictObject({
    name: VoiceName,
    file: z
      .array(z.file().min(1).max(VOICE_UPLOAD_LIMITS.maxFileBytes))
      .min(1)
      .max(VOICE_UPLOAD_LIMITS.maxFiles)
      .describe(
        `Audio samples of the voice, one file per "file" part: 1 to ${VOICE_UPLOAD_LIMITS.maxFiles} files, each at most ` +
          `${bytesText(VOICE_UPLOAD_LIMITS.maxFileBytes)}, together at most ${bytesText(VOICE_UPLOAD_LIMITS.maxTotalFileBytes)}. ` +
          `Recognised by content (the part's Content-Type is not trusted): ${Object.values(AUDIO_CONTENT_TYPES).join(', ')}.`,
      ),
  })
  .describe('multipart/form-data: one "name" part and one or more "file" parts; no other parts.');

/** Request bodies: component name -> the zod schema the route validates with (io 'input'). */
export const REQUEST_SCHEMAS = {
  CreateVideoBody: S.CreateVideoBody,
  CreateSpeechBody: S.CreateSpeechBody,
  CreateVoiceForm,
  CreateWorkspaceBody: S.CreateWorkspaceBody,
  SetWorkspaceLimitsBody: S.SetWorkspaceLimitsBody,
  AddCreditsBody: S.AddCreditsBody,
  CreateApiKeyBody: S.CreateApiKeyBody,
  CreateWebhookBody: S.CreateWebhookBody,
} satisfies Record<string, z.ZodType>;

/** Responses: component name -> response schema of ./schemas.ts (io 'output'). */
export const RESPONSE_SCHEMAS = {
  ErrorResponse: S.ErrorResponse,
  VideoJob: S.VideoJob,
  VideoJobList: S.VideoJobList,
  VideoJobDeleted: S.VideoJobDeleted,
  Model: S.Model,
  VideoModel: S.VideoModel,
  SpeechModel: S.SpeechModel,
  ModelList: S.ModelList,
  Voice: S.Voice,
  VoiceList: S.VoiceList,
  VoiceDeleted: S.VoiceDeleted,
  Health: S.Health,
  Workspace: S.Workspace,
  WorkspaceCredits: S.WorkspaceCredits,
  ApiKey: S.ApiKey,
  LedgerAudit: S.LedgerAudit,
  ApiKeyRevoked: S.ApiKeyRevoked,
  Balance: S.Balance,
  LedgerEntry: S.LedgerEntry,
  LedgerEntryList: S.LedgerEntryList,
  WebhookEndpoint: S.WebhookEndpoint,
  WebhookEndpointCreated: S.WebhookEndpointCreated,
  WebhookEndpointList: S.WebhookEndpointList,
  WebhookEndpointDeleted: S.WebhookEndpointDeleted,
  WebhookDeliveryAttempt: S.WebhookDeliveryAttempt,
  WebhookDeliveryAttemptList: S.WebhookDeliveryAttemptList,
  WebhookEvent: S.WebhookEvent,
} satisfies Record<string, z.ZodType>;

/**
 * A JSON Schema as a component or inline schema, without its own $schema: the document's dialect is
 * OpenAPI 3.1's default (JSON Schema 2020-12 with the OAS vocabulary), which renderers expect.
 */
function bare(schema: JsonSchema): JsonSchema {
  const { $schema: _dialect, $id: _id, ...rest } = schema;
  return rest;
}

/** One z.toJSONSchema over a registry of named schemas: references between them become $refs. */
function components(named: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(named)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, { io, uri: (id) => `#/components/schemas/${id}` });
  return Object.fromEntries(Object.entries(schemas).map(([id, s]) => [id, bare(s as JsonSchema)]));
}

const ref = (name: keyof typeof REQUEST_SCHEMAS | keyof typeof RESPONSE_SCHEMAS) => ({ $ref: `#/components/schemas/${name}` });

// ---------------------------------------------------------------------------------------------
// Operations

type Status = 400 | 401 | 402 | 403 | 404 | 409 | 413 | 415 | 429 | 502 | 503;
type Security = 'apiKey' | 'admin' | 'none';

const ERROR_TEXT: Record<Status, string> = {
  400: 'Invalid request; `error.param` names the parameter, header or part at fault.',
  401: 'Missing or invalid bearer token.',
  402: 'Insufficient credits: the balance does not cover the cost. Nothing was charged.',
  403: 'This API key is not permitted to use the model (`param: model`).',
  404: 'Not found.',
  409: 'This Idempotency-Key was already used with a different request.',
  413: 'Request too large.',
  415: 'Wrong media type.',
  429: 'Rate limited (per API key); retry after `Retry-After` seconds.',
  502: 'The provider answered unusably. Nothing was charged.',
  503: 'The provider is not configured (`provider_not_configured`) or is unavailable.',
};

const header = (description: string, schema: JsonSchema = { type: 'string' }) => ({ description, schema });
const RETRY_AFTER = header('Seconds to wait before retrying.', { type: 'integer', minimum: 0 });

function errorResponse(status: Status, note: string | undefined): Obj {
  const headers: Obj = {};
  if (status === 401) headers['WWW-Authenticate'] = header('`Bearer`');
  if (status === 429) headers['Retry-After'] = RETRY_AFTER;
  if (status === 503) headers['Retry-After'] = { ...RETRY_AFTER, description: 'When retrying later may succeed: seconds to wait.' };
  return {
    description: note ?? ERROR_TEXT[status],
    ...(Object.keys(headers).length ? { headers } : {}),
    content: { 'application/json': { schema: ref('ErrorResponse') } },
  };
}

const json = (schema: Obj, description: string, headers?: Obj): Obj => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema } },
});

interface Op {
  method: 'get' | 'post' | 'delete';
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  security: Security;
  parameters?: Obj[];
  requestBody?: Obj;
  responses: Record<string, Obj>;
  /** Error statuses the route can answer, with an optional note replacing the generic text. */
  errors?: Partial<Record<Status, string | undefined>>;
  /** An example JSON body for the models served here (./openapi-catalog.ts). */
  example?: (avail: ModelAvailability) => Obj | undefined;
}

const pathParam = (name: string, description: string, schema: JsonSchema = { type: 'string' }) => ({ name, in: 'path', required: true, description, schema });
const IDEMPOTENCY = { $ref: '#/components/parameters/IdempotencyKey' };
const jsonBody = (schema: keyof typeof REQUEST_SCHEMAS, example?: Obj, limitBytes = JSON_BODY_LIMIT_BYTES) => ({
  required: true,
  description: `application/json, at most ${bytesText(limitBytes)}; unknown fields are refused (400).`,
  content: { 'application/json': { schema: ref(schema), ...(example ? { example } : {}) } },
});
/** `limit` and `after` of a paginated list, from the zod schema that validates them. */
/** Query parameters from the zod schema that validates them. */
function queryParams<Q extends z.ZodObject>(query: Q, names: readonly (keyof Q['shape'] & string)[]) {
  return names.map((name) => {
    const schema = bare(z.toJSONSchema(query.shape[name] as z.ZodType, { io: 'input' }) as JsonSchema);
    return { name, in: 'query', required: false, description: schema['description'], schema };
  });
}
/** `limit` and `after` of the paginated lists. */
const LEDGER_PAGE_PARAMS = queryParams(S.LedgerPageQuery, ['limit', 'after']);
const DELIVERY_PAGE_PARAMS = queryParams(S.DeliveryPageQuery, ['limit', 'after']);
const PAGE_400 = 'Invalid `limit` (1 to 100) or `after` (not an id of this list\'s form); `error.param` names it.';
const JSON_413 = `The JSON body exceeds ${bytesText(JSON_BODY_LIMIT_BYTES)} (request_too_large).`;
const JSON_415 = 'The body is not application/json (unsupported_media_type).';
const VOICE_503 =
  'No voice provider is configured (provider_not_configured), the provider could not be reached (provider_unavailable), or too many uploads are in progress (server_busy).';

const OPERATIONS: Op[] = [
  // Videos
  {
    method: 'post',
    path: '/v2/videos/generations',
    operationId: 'createVideoGeneration',
    tag: 'Videos',
    summary: 'Create a video generation job',
    description:
      'Validates the request against the model (GET /v2/models), charges the estimated cost (n videos at the model price for the resolution and audio setting) and starts the job. ' +
      'Image to video: `image` (the first frame) and, with it, `lastFrame`, each `{"bytesBase64Encoded", "mimeType"}`, for models with supports_image / supports_last_frame. ' +
      'A field the model does not support is a 400 naming it. ' +
      'Poll the job at the `Location` URL. With an `Idempotency-Key`, a retry from the same workspace returns the same job and charges once.',
    security: 'apiKey',
    parameters: [IDEMPOTENCY],
    requestBody: jsonBody('CreateVideoBody', undefined, VIDEO_CREATE_BODY_LIMIT_BYTES),
    example: videoBodyExample,
    responses: {
      '202': json(ref('VideoJob'), 'Accepted: the job, pending.', { Location: header('The job-status URL, /v2/videos/generations/{id}.') }),
    },
    errors: {
      400: undefined,
      401: undefined,
      402: undefined,
      403: undefined,
      404: 'Unknown model (model_not_found, `param: model`).',
      409: undefined,
      413: `The JSON body exceeds ${bytesText(VIDEO_CREATE_BODY_LIMIT_BYTES)} (request_too_large), or an image exceeds ${bytesText(S.IMAGE_MAX_BYTES)} decoded (image_too_large, \`param\` naming it).`,
      415: JSON_415,
      429: 'Rate limited (per API key; rate_limited), this key already has 2 requests with images in progress (too_many_concurrent_uploads), or the workspace already has its limit of pending jobs (too_many_pending_jobs; nothing charged).',
      503: 'No video provider is configured for the model (provider_not_configured), or too many requests with images are in progress (server_busy).',
    },
  },
  {
    method: 'get',
    path: '/v2/videos/generations/{id}',
    operationId: 'getVideoGeneration',
    tag: 'Videos',
    summary: 'Get a video generation job',
    description: 'The job, with signed video URLs once succeeded. A job of another workspace is a 404.',
    security: 'apiKey',
    parameters: [pathParam('id', 'The job id.')],
    responses: { '200': json(ref('VideoJob'), 'The job.') },
    errors: { 401: undefined, 404: 'No such job in this workspace (job_not_found).' },
  },
  {
    method: 'get',
    path: '/v2/videos/generations',
    operationId: 'listVideoGenerations',
    tag: 'Videos',
    summary: "List this workspace's video generation jobs",
    description: 'Newest first, a page at a time: ask again with `after` = the `id` of the last job of a page while `has_more`. Deleted jobs are not listed.',
    security: 'apiKey',
    parameters: queryParams(S.ListVideoJobsQuery, ['limit', 'after', 'status', 'model']),
    responses: { '200': json(ref('VideoJobList'), 'A page of jobs.') },
    errors: { 400: 'Invalid `limit` (1 to 100), `status` or `after` (not a job id); `error.param` names it.', 401: undefined, 404: '`after` names no job of this workspace (job_not_found, `param: after`).' },
  },
  {
    method: 'post',
    path: '/v2/videos/generations/{id}/cancel',
    operationId: 'cancelVideoGeneration',
    tag: 'Videos',
    summary: 'Cancel a pending video generation job',
    description:
      "Stops the job: the provider's operation is cancelled where the provider allows it, and the job is refunded in full and ends `failed` with `error.code` `cancelled`. " +
      'A job that has finished, or is settling (its videos are being delivered), cannot be cancelled: it is either charged for what it delivered or cancelled and refunded, never both.',
    security: 'apiKey',
    parameters: [pathParam('id', 'The job id.')],
    responses: { '200': json(ref('VideoJob'), 'The job, now failed (cancelled) and refunded.') },
    errors: {
      401: undefined,
      404: 'No such job in this workspace (job_not_found).',
      409: 'The job has finished or is settling (job_not_cancellable).',
      429: undefined,
      503: 'The job could not be reached in time (the cancel may still take effect: look at the job).',
    },
  },
  {
    method: 'delete',
    path: '/v2/videos/generations/{id}',
    operationId: 'deleteVideoGeneration',
    tag: 'Videos',
    summary: 'Delete a finished video generation job',
    description: 'Deletes the stored videos (their URLs stop working) and the job, which is a 404 from then on. The ledger keeps its entries.',
    security: 'apiKey',
    parameters: [pathParam('id', 'The job id.')],
    responses: { '200': json(ref('VideoJobDeleted'), 'Deleted.') },
    errors: { 401: undefined, 404: 'No such job in this workspace (job_not_found).', 409: 'The job is pending: cancel it first (job_pending).', 429: undefined },
  },
  // Models
  {
    method: 'get',
    path: '/v2/models',
    operationId: 'listModels',
    tag: 'Models',
    summary: 'List the models this key may use',
    description: 'The models this API key is permitted to use and that are available here.',
    security: 'apiKey',
    responses: { '200': json(ref('ModelList'), 'The models.') },
    errors: { 401: undefined },
  },
  {
    method: 'get',
    path: '/v2/models/all',
    operationId: 'listAllModels',
    tag: 'Models',
    summary: 'List every model of the catalog',
    description: 'The whole catalog, each model saying which backend serves it (null: not available here).',
    security: 'apiKey',
    responses: { '200': json(ref('ModelList'), 'The models.') },
    errors: { 401: undefined },
  },
  {
    method: 'get',
    path: '/v2/models/{id}',
    operationId: 'getModel',
    tag: 'Models',
    summary: 'Get a model',
    security: 'apiKey',
    parameters: [pathParam('id', 'The model id, e.g. sim-video-1.')],
    responses: { '200': json(ref('Model'), 'The model.') },
    errors: { 401: undefined, 404: 'Unknown model (model_not_found).' },
  },
  // Voices
  {
    method: 'post',
    path: '/v2/audio/voices',
    operationId: 'createVoice',
    tag: 'Voices',
    summary: 'Clone a voice',
    description: 'Clones a voice from audio samples. The voice is visible and usable only from this workspace.',
    security: 'apiKey',
    requestBody: {
      required: true,
      description: `multipart/form-data with a boundary; at most ${VOICE_UPLOAD_LIMITS.maxParts} parts.`,
      content: {
        'multipart/form-data': {
          schema: ref('CreateVoiceForm'),
          encoding: { file: { contentType: Object.values(AUDIO_CONTENT_TYPES).join(', ') } },
        },
      },
    },
    responses: { '200': json(ref('Voice'), 'The new voice.') },
    errors: {
      400: 'Invalid form: a missing, repeated or unknown part, a blank name, an empty file, too many files, a malformed or truncated body, or the workspace already holds its maximum of voices.',
      401: undefined,
      413: `A file above ${bytesText(VOICE_UPLOAD_LIMITS.maxFileBytes)} (file_too_large), the files together above ${bytesText(VOICE_UPLOAD_LIMITS.maxTotalFileBytes)} (upload_too_large), or the declared body too large (request_too_large).`,
      415: 'Not multipart/form-data (unsupported_media_type), or a file that is not recognised as audio (unsupported_file_type, `param: file`).',
      429: undefined,
      503: VOICE_503,
    },
  },
  {
    method: 'get',
    path: '/v2/audio/voices',
    operationId: 'listVoices',
    tag: 'Voices',
    summary: "List this workspace's voices",
    security: 'apiKey',
    responses: { '200': json(ref('VoiceList'), 'The voices, newest first.') },
    errors: { 401: undefined, 503: VOICE_503 },
  },
  {
    method: 'get',
    path: '/v2/audio/voices/{id}',
    operationId: 'getVoice',
    tag: 'Voices',
    summary: 'Get a voice',
    security: 'apiKey',
    parameters: [pathParam('id', 'The voice registry id (`id` of the voice, not its `voice_id`).')],
    responses: { '200': json(ref('Voice'), 'The voice.') },
    errors: { 401: undefined, 404: 'No such voice in this workspace (voice_not_found).', 503: VOICE_503 },
  },
  {
    method: 'delete',
    path: '/v2/audio/voices/{id}',
    operationId: 'deleteVoice',
    tag: 'Voices',
    summary: 'Delete a voice',
    description: 'Removes the voice from the registry now and from the provider durably.',
    security: 'apiKey',
    parameters: [pathParam('id', 'The voice registry id.')],
    responses: { '200': json(ref('VoiceDeleted'), 'Deleted.') },
    errors: {
      401: undefined,
      404: 'No such voice in this workspace (voice_not_found).',
      429: undefined,
      503: 'No voice provider is configured, or the deletion could not be started (temporarily_unavailable); nothing changed.',
    },
  },
  // Speech
  {
    method: 'post',
    path: '/v2/audio/speech',
    operationId: 'createSpeech',
    tag: 'Speech',
    summary: 'Text to speech',
    description:
      'Speaks `input` with `voice` and answers the audio. Charged per character, once the audio is produced; a provider failure charges nothing. ' +
      'With an `Idempotency-Key`, a retry with the same body answers again without a second charge.',
    security: 'apiKey',
    parameters: [IDEMPOTENCY],
    requestBody: jsonBody('CreateSpeechBody'),
    example: speechBodyExample,
    responses: {
      '200': {
        description:
          'The audio. response_format wav: `audio/wav`. pcm: `audio/pcm` with its parameters, e.g. `audio/pcm;rate=24000;channels=1;encoding=s16le`.',
        headers: {
          'Content-Disposition': header('`inline; filename="speech.wav"` (or .pcm).'),
          'X-Speech-Request-Id': header('The speech request id (derived from the Idempotency-Key when given).', { type: 'string', format: 'uuid' }),
          'X-Model': header('The model that spoke.'),
          'X-Characters': header('Characters billed (Unicode code points).', { type: 'integer', minimum: 1 }),
          'X-Cost-In-Euro': header('The charge, in euros.', { type: 'number' }),
          'Idempotent-Replayed': header('`true` when this answers an Idempotency-Key retry (not charged again).', { type: 'string', const: 'true' }),
        },
        content: {
          'audio/wav': { schema: { type: 'string', format: 'binary', contentMediaType: 'audio/wav' } },
          'audio/pcm': { schema: { type: 'string', format: 'binary', contentMediaType: 'audio/pcm' } },
        },
      },
    },
    errors: {
      400: 'Invalid request, e.g. blank or too long `input`, or a response_format the model does not offer.',
      401: undefined,
      402: undefined,
      403: undefined,
      404: 'Unknown model (model_not_found, `param: model`) or voice (voice_not_found, `param: voice`).',
      409: undefined,
      413: JSON_413,
      415: JSON_415,
      429: undefined,
      502: undefined,
      503: 'No voice provider is configured, or it could not be reached.',
    },
  },
  // Webhooks
  {
    method: 'post',
    path: '/v2/webhooks',
    operationId: 'createWebhookEndpoint',
    tag: 'Webhooks',
    summary: 'Register a webhook endpoint',
    description:
      'Events of this workspace (`events`, default all) are POSTed to `url`, signed with the `secret` of this answer, which is shown only here. ' +
      'The URL must be a public https URL (loopback http too, in development); its host is resolved and every address checked, now and before each delivery.',
    security: 'apiKey',
    requestBody: jsonBody('CreateWebhookBody', { url: 'http://127.0.0.1:9000/hooks/video', events: ['video.generation.succeeded', 'video.generation.failed'] }),
    responses: { '201': json(ref('WebhookEndpointCreated'), 'The new endpoint, with its signing secret.') },
    errors: {
      400: 'Invalid request: `url` not allowed (url_not_allowed), unresolvable (url_unresolvable) or malformed (invalid_url), an unknown event type, or the workspace already has its maximum of 20 endpoints (webhook_endpoint_limit_reached).',
      401: undefined,
      413: JSON_413,
      415: JSON_415,
      429: undefined,
      503: "The URL's host could not be resolved right now (temporarily_unavailable); nothing was registered.",
    },
  },
  {
    method: 'get',
    path: '/v2/webhooks',
    operationId: 'listWebhookEndpoints',
    tag: 'Webhooks',
    summary: "List this workspace's webhook endpoints",
    description: 'At most 20, newest first; secrets are never shown again.',
    security: 'apiKey',
    responses: { '200': json(ref('WebhookEndpointList'), 'The endpoints.') },
    errors: { 401: undefined },
  },
  {
    method: 'get',
    path: '/v2/webhooks/{id}',
    operationId: 'getWebhookEndpoint',
    tag: 'Webhooks',
    summary: 'Get a webhook endpoint',
    security: 'apiKey',
    parameters: [pathParam('id', 'The endpoint id.')],
    responses: { '200': json(ref('WebhookEndpoint'), 'The endpoint.') },
    errors: { 401: undefined, 404: 'No such endpoint in this workspace (webhook_endpoint_not_found).' },
  },
  {
    method: 'delete',
    path: '/v2/webhooks/{id}',
    operationId: 'deleteWebhookEndpoint',
    tag: 'Webhooks',
    summary: 'Delete a webhook endpoint',
    description: 'Nothing more is sent to it; deliveries still being retried stop at their next attempt.',
    security: 'apiKey',
    parameters: [pathParam('id', 'The endpoint id.')],
    responses: { '200': json(ref('WebhookEndpointDeleted'), 'Deleted.') },
    errors: { 401: undefined, 404: 'No such endpoint in this workspace (webhook_endpoint_not_found).', 429: undefined },
  },
  {
    method: 'get',
    path: '/v2/webhooks/{id}/deliveries',
    operationId: 'listWebhookDeliveries',
    tag: 'Webhooks',
    summary: "List an endpoint's delivery attempts",
    description: 'Every HTTP attempt to deliver an event to this endpoint, newest first: its time, attempt number, HTTP status or error, and the state of its delivery.',
    security: 'apiKey',
    parameters: [pathParam('id', 'The endpoint id.'), ...DELIVERY_PAGE_PARAMS],
    responses: { '200': json(ref('WebhookDeliveryAttemptList'), 'A page of attempts.') },
    errors: { 400: PAGE_400, 401: undefined, 404: 'No such endpoint in this workspace (webhook_endpoint_not_found).' },
  },
  // Billing
  {
    method: 'get',
    path: '/v2/balance',
    operationId: 'getBalance',
    tag: 'Billing',
    summary: "This workspace's balance",
    security: 'apiKey',
    responses: { '200': json(ref('Balance'), 'The balance.') },
    errors: { 401: undefined },
  },
  {
    method: 'get',
    path: '/v2/ledger',
    operationId: 'listLedgerEntries',
    tag: 'Billing',
    summary: "This workspace's ledger statement",
    description: 'Every credit, charge and refund of the workspace, newest first, each with the balance it left.',
    security: 'apiKey',
    parameters: LEDGER_PAGE_PARAMS,
    responses: { '200': json(ref('LedgerEntryList'), 'A page of entries.') },
    errors: { 400: PAGE_400, 401: undefined },
  },
  // Files
  {
    method: 'get',
    path: '/v2/files/{key}',
    operationId: 'getFile',
    tag: 'Files',
    summary: 'Download a generated file (signed URL)',
    description:
      'The `url` of a job video: no bearer token, the signature is the credential. URLs expire; GET the job again for a fresh one. ' +
      'Served with local storage (STORAGE_BACKEND=local, the default); with S3 the video URLs are presigned bucket URLs and this route answers 404.',
    security: 'none',
    parameters: [
      pathParam('key', 'The storage key, e.g. videos/{job id}/0.mp4 (contains slashes; take the URL as given).'),
      { name: 'expires', in: 'query', required: true, description: 'Expiry, Unix seconds.', schema: { type: 'string', pattern: '^\\d{1,12}$' } },
      { name: 'signature', in: 'query', required: true, description: 'HMAC signature of key and expiry.', schema: { type: 'string', maxLength: 100 } },
    ],
    responses: {
      '200': {
        description: 'The file.',
        headers: { 'Cache-Control': header('`private, max-age=300`'), 'Content-Length': header('Bytes.', { type: 'integer' }) },
        content: {
          'video/mp4': { schema: { type: 'string', format: 'binary', contentMediaType: 'video/mp4' } },
          'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
        },
      },
    },
    errors: { 403: 'The URL has expired (url_expired) or is not validly signed (invalid_signature).', 404: 'No such file (file_not_found).' },
  },
  // Admin
  {
    method: 'post',
    path: '/admin/v1/workspaces',
    operationId: 'adminCreateWorkspace',
    tag: 'Admin',
    summary: 'Create a workspace',
    security: 'admin',
    requestBody: jsonBody('CreateWorkspaceBody', { name: 'demo', credits_in_euro: 10 }),
    responses: { '201': json(ref('Workspace'), 'The new workspace.') },
    errors: { 400: undefined, 401: undefined, 413: JSON_413, 415: JSON_415 },
  },
  {
    method: 'get',
    path: '/admin/v1/workspaces/{id}',
    operationId: 'adminGetWorkspace',
    tag: 'Admin',
    summary: 'Get a workspace and its balance',
    security: 'admin',
    parameters: [pathParam('id', 'The workspace id.')],
    responses: { '200': json(ref('Workspace'), 'The workspace.') },
    errors: { 401: undefined, 404: 'No such workspace.' },
  },
  {
    method: 'post',
    path: '/admin/v1/workspaces/{id}/credits',
    operationId: 'adminAddCredits',
    tag: 'Admin',
    summary: 'Add credits to a workspace',
    description: 'With an `Idempotency-Key`, a retry adds the credits once and answers the same top-up.',
    security: 'admin',
    parameters: [pathParam('id', 'The workspace id.'), IDEMPOTENCY],
    requestBody: jsonBody('AddCreditsBody', { amount_in_euro: 25 }),
    responses: { '200': json(ref('WorkspaceCredits'), 'Added.') },
    errors: { 400: 'Invalid request, e.g. an amount below 0.000001 or above 1000000.', 401: undefined, 404: 'No such workspace.', 413: JSON_413, 415: JSON_415 },
  },
  {
    method: 'post',
    path: '/admin/v1/workspaces/{id}/limits',
    operationId: 'adminSetWorkspaceLimits',
    tag: 'Admin',
    summary: "Set a workspace's limits",
    description: 'Applies to the next create: jobs already pending are never cancelled.',
    security: 'admin',
    parameters: [pathParam('id', 'The workspace id.')],
    requestBody: jsonBody('SetWorkspaceLimitsBody', { max_pending_jobs: 200 }),
    responses: { '200': json(ref('Workspace'), 'The workspace with its limits.') },
    errors: { 400: undefined, 401: undefined, 404: 'No such workspace.', 413: JSON_413, 415: JSON_415 },
  },
  {
    method: 'post',
    path: '/admin/v1/workspaces/{id}/api-keys',
    operationId: 'adminCreateApiKey',
    tag: 'Admin',
    summary: 'Create an API key',
    description: 'The key is shown once, in this answer. Without `models` it may use every model.',
    security: 'admin',
    parameters: [pathParam('id', 'The workspace id.')],
    requestBody: jsonBody('CreateApiKeyBody', { models: ['sim-video-1'] }),
    responses: { '201': json(ref('ApiKey'), 'The new key.') },
    errors: { 400: 'Invalid request, e.g. an unknown model (`param: models.{i}`).', 401: undefined, 404: 'No such workspace.', 413: JSON_413, 415: JSON_415 },
  },
  {
    method: 'delete',
    path: '/admin/v1/api-keys/{id}',
    operationId: 'adminRevokeApiKey',
    tag: 'Admin',
    summary: 'Revoke an API key',
    description: 'The key is refused (401) from the next request on, by every API process. Revoking a revoked key answers the same.',
    security: 'admin',
    parameters: [pathParam('id', 'The API key id (`id` of the key, not the key itself).')],
    responses: { '200': json(ref('ApiKeyRevoked'), 'Revoked.') },
    errors: { 401: undefined, 404: 'No such API key (api_key_not_found).' },
  },
  {
    method: 'get',
    path: '/admin/v1/ledger/audit',
    operationId: 'adminLedgerAudit',
    tag: 'Admin',
    summary: 'Audit the ledger',
    security: 'admin',
    responses: { '200': json(ref('LedgerAudit'), 'The audit (ok or not).') },
    errors: { 401: undefined },
  },
  // Service
  {
    method: 'get',
    path: '/healthz',
    operationId: 'healthz',
    tag: 'Service',
    summary: 'Liveness',
    security: 'none',
    responses: { '200': json(ref('Health'), 'The process is up.') },
  },
  {
    method: 'get',
    path: '/readyz',
    operationId: 'readyz',
    tag: 'Service',
    summary: 'Readiness',
    description: 'Whether PostgreSQL and Temporal are reachable.',
    security: 'none',
    responses: { '200': json(ref('Health'), 'Ready (`ok: true`).'), '503': json(ref('Health'), 'Not ready (`ok: false`).') },
  },
  {
    method: 'get',
    path: '/v2/openapi.json',
    operationId: 'getOpenApiDocument',
    tag: 'Service',
    summary: 'This OpenAPI document',
    security: 'none',
    responses: { '200': json({ type: 'object' }, 'The OpenAPI 3.1 document.') },
  },
  {
    method: 'get',
    path: '/docs',
    operationId: 'getDocsPage',
    tag: 'Service',
    summary: 'API documentation page',
    description: 'This document rendered by Swagger UI, with "Try it out"; everything served from this origin.',
    security: 'none',
    responses: { '200': { description: 'The page.', content: { 'text/html': { schema: { type: 'string' } } } } },
  },
];

/** A JSON request body with its example, when there is one. */
function withExample(requestBody: Obj, example: Obj | undefined): Obj {
  const content = requestBody['content'] as Record<string, Obj>;
  const jsonMedia = content['application/json'];
  if (!example || !jsonMedia) return requestBody;
  return { ...requestBody, content: { ...content, 'application/json': { ...jsonMedia, example } } };
}

const SECURITY: Record<Security, Obj[]> = { apiKey: [{ ApiKeyAuth: [] }], admin: [{ AdminToken: [] }], none: [] };

function operationObject(op: Op, avail: ModelAvailability): Obj {
  const responses: Obj = { ...op.responses };
  // Every read with an API key is rate limited per key (RATE_LIMIT_READS_PER_MINUTE).
  const errors = op.security === 'apiKey' && op.method === 'get' ? { 429: 'Too many reads (per API key); retry after `Retry-After` seconds.', ...op.errors } : op.errors;
  for (const [status, note] of Object.entries(errors ?? {}) as [string, string | undefined][]) {
    responses[status] = errorResponse(Number(status) as Status, note);
  }
  responses['default'] = {
    description: 'An unexpected server error (500 internal_error); the same error shape.',
    content: { 'application/json': { schema: ref('ErrorResponse') } },
  };
  return {
    operationId: op.operationId,
    tags: [op.tag],
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    security: SECURITY[op.security],
    ...(op.parameters ? { parameters: op.parameters } : {}),
    ...(op.requestBody ? { requestBody: withExample(op.requestBody, op.example?.(avail)) } : {}),
    responses,
  };
}

/** What this service POSTs to a webhook endpoint for an event type (the document's `webhooks`). */
function webhookOperation(type: string): Obj {
  const h = (name: string, description: string) => ({ name, in: 'header', required: true, description, schema: { type: 'string' } });
  return {
    operationId: type === 'video.generation.succeeded' ? 'videoGenerationSucceededEvent' : 'videoGenerationFailedEvent',
    tags: ['Webhooks'],
    summary: type === 'video.generation.succeeded' ? 'A video generation job succeeded' : 'A video generation job failed (or was cancelled)',
    parameters: [
      h('webhook-id', 'The event id (`evt_...`), the same on every attempt: process each event once.'),
      h('webhook-timestamp', 'Unix seconds of this attempt; refuse one too far from now (e.g. 5 minutes).'),
      h('webhook-signature', '`v1,<base64 HMAC-SHA256>` over "<webhook-id>.<webhook-timestamp>.<raw body>" with the endpoint secret.'),
    ],
    requestBody: { required: true, content: { 'application/json': { schema: ref('WebhookEvent') } } },
    responses: { '200': { description: 'Any 2xx within 10 s accepts the event; anything else is retried.' } },
  };
}

function packageVersion(): string {
  try {
    return String((JSON.parse(fs.readFileSync(projectPath('package.json'), 'utf8')) as { version?: unknown }).version ?? '0.0.0');
  } catch {
    return '0.0.0';
  }
}

export type OpenApiDocument = {
  openapi: '3.1.0';
  info: Obj;
  tags: Obj[];
  paths: Record<string, Record<string, Obj>>;
  webhooks: Record<string, { post: Obj }>;
  components: { schemas: Record<string, JsonSchema>; parameters: Obj; securitySchemes: Obj };
};

/**
 * The request body components: the zod-generated schemas, with per-model constraints from the
 * catalog and what serves each model here (./openapi-catalog.ts).
 */
/** What the document depends on in this process: which models are served, and production mode (webhook targets). */
export type DocumentContext = ModelAvailability & { production?: boolean };

function requestComponents(avail: DocumentContext): Record<string, JsonSchema> {
  const generated = components(REQUEST_SCHEMAS, 'input') as Record<keyof typeof REQUEST_SCHEMAS, JsonSchema & { properties: Record<string, JsonSchema> }>;
  const simulate = bare(z.toJSONSchema(SimulateSchema, { io: 'input' }) as JsonSchema) as JsonSchema & { properties: Record<string, JsonSchema> };
  const perModel: Record<keyof typeof REQUEST_SCHEMAS, JsonSchema> = {
    ...generated,
    CreateVideoBody: videoBodySchema(generated.CreateVideoBody, avail, simulate),
    CreateSpeechBody: speechBodySchema(generated.CreateSpeechBody, avail),
    CreateApiKeyBody: apiKeyBodySchema(generated.CreateApiKeyBody),
    CreateWebhookBody: {
      ...generated.CreateWebhookBody,
      properties: {
        ...generated.CreateWebhookBody.properties,
        url: { ...generated.CreateWebhookBody.properties['url'], pattern: webhookUrlPattern({ production: avail.production ?? false }) },
      },
    },
  };
  // JSON bodies refuse NUL in any string or key (./json-body.ts); the multipart form states its own rules.
  const json = Object.entries(perModel).map(([name, s]) => [name, name === 'CreateVoiceForm' ? s : refuseNul(s)]);
  return { ...Object.fromEntries(json), [JSON_VALUE_COMPONENT]: JSON_VALUE_SCHEMA };
}

/** The document for a process whose models are served as `avail` says. */
export function buildOpenApiDocument(avail: DocumentContext): OpenApiDocument {
  const paths: Record<string, Record<string, Obj>> = {};
  for (const op of OPERATIONS) (paths[op.path] ??= {})[op.method] = operationObject(op, avail);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Video and voice API',
      version: packageVersion(),
      description:
        'Paid video generation and voice cloning. Authenticate with `Authorization: Bearer <API key>`. ' +
        'Money is in euros, as JSON numbers. Every error answers `{"error": {"type", "code", "message", "param"}}`, ' +
        'and every response carries an `X-Request-Id` header. Schemas are generated from the zod schemas the API validates with.',
    },
    tags: [
      { name: 'Videos', description: 'Video generation jobs.' },
      { name: 'Models', description: 'The model catalog: limits and prices.' },
      { name: 'Voices', description: 'Cloned voices, per workspace.' },
      { name: 'Speech', description: 'Text to speech.' },
      {
        name: 'Webhooks',
        description:
          'Events `video.generation.succeeded` and `video.generation.failed` (cancelled jobs too) are POSTed to every endpoint of the workspace subscribed to them, ' +
          'with body WebhookEvent and the Standard Webhooks headers `webhook-id` (the event id), `webhook-timestamp` (Unix seconds of the attempt) and ' +
          '`webhook-signature` = `v1,` + base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), key = the base64-decoded part of the secret after `whsec_`. ' +
          'Answer 2xx within 10 s; anything else (redirects included) is retried with the same webhook-id, backing off from 5 s (WEBHOOK_RETRY_INITIAL_MS) up to an hour between attempts, for 24 hours.',
      },
      { name: 'Billing', description: "The workspace's balance and ledger statement." },
      { name: 'Files', description: 'Generated files behind signed, expiring URLs.' },
      { name: 'Admin', description: 'Operators only: workspaces, credits, API keys, ledger audit. Bearer ADMIN_TOKEN.' },
      { name: 'Service', description: 'Health, readiness and this documentation.' },
    ],
    paths,
    webhooks: Object.fromEntries(S.WebhookEventType.options.map((type) => [type, { post: webhookOperation(type) }])),
    components: {
      schemas: { ...requestComponents(avail), ...components(RESPONSE_SCHEMAS, 'output') },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description: 'Makes the request safe to retry: the same key from the same workspace is the same request, charged once.',
          schema: bare(z.toJSONSchema(S.IdempotencyKey, { io: 'input' }) as JsonSchema),
        },
      },
      securitySchemes: {
        ApiKeyAuth: { type: 'http', scheme: 'bearer', description: 'A workspace API key (vva_sk_...), created by an operator.' },
        AdminToken: { type: 'http', scheme: 'bearer', description: 'The operator token (ADMIN_TOKEN). Admin API only.' },
      },
    },
  };
}
