// /v1/files and /v1/batches in OpenAI's shapes (https://platform.openai.com/docs/api-reference/batch), so the
// openai SDK's files.create({purpose: "batch"}), batches.create({input_file_id, endpoint: "/v1/videos"}),
// batches.retrieve, batches.cancel and files.content work with its base URL set to <service>/v1. The same
// services as /v2: a /v1 line ({"custom_id", "method", "url": "/v1/videos" | "/v1/audio/speech", "body"}) is
// mapped to its /v2 request, then validated and run exactly as a /v2 batch's.
import type { RequestHandler } from 'express';
import { ZodError } from 'zod';
import { ApiRouter, json, type RouteContract } from '../http/openapi.js';
import { jsonBodyParser } from '../http/json-body.js';
import { principalOf } from '../http/auth.js';
import { baseUrlOf } from '../http/base-url.js';
import { INSUFFICIENT_CREDITS_402, OPENAI_OPERATION } from '../http/openai/errors.js';
import { fromZodError, invalidParam } from '../errors.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import { OpenAiCreateVideoBody, presentOpenAiVideo, toCreateBody } from '../video-jobs/openai-create.js';
import { OpenAiSpeechBody } from '../voices/openai-speech-routes.js';
import { CREATE_FILE_BODY, fileHandlers, ID, NO_BATCH, NO_FILE } from './routes.js';
import { completionWindowOf, type BatchRecord, type FileRecord } from './records.js';
import { presentBatchSpeech, type FilesService, type ResultPresenters } from './files.js';
import type { BatchesService } from './service.js';
import { BATCH_CREATE_BODY_BYTES_MAX, type BatchEndpoint } from './schemas.js';
import { OpenAiBatch, OpenAiCreateBatchBody, OpenAiFile } from './openai-schemas.js';

const V2_ENDPOINT: Record<string, BatchEndpoint> = { '/v1/videos': '/v2/videos/generations', '/v1/audio/speech': '/v2/audio/speech' };
const V1_ENDPOINT: Record<string, string> = { '/v2/videos/generations': '/v1/videos', '/v2/audio/speech': '/v1/audio/speech' };

const seconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));

/** A batch as OpenAI's `batch` object. */
export function presentOpenAiBatch(b: BatchRecord) {
  const ended = seconds(b.completed_at_ms);
  const at = (status: BatchRecord['status']) => (b.status === status ? ended : null);
  return {
    id: b.id,
    object: 'batch' as const,
    endpoint: b.endpoint === null ? '' : (V1_ENDPOINT[b.endpoint] ?? b.endpoint),
    errors: null,
    input_file_id: b.input_file_id ?? '',
    completion_window: completionWindowOf(b),
    status: b.status,
    output_file_id: b.output_file_id,
    error_file_id: b.error_file_id,
    created_at: seconds(b.created_at_ms)!,
    in_progress_at: seconds(b.created_at_ms),
    expires_at: seconds(b.expires_at_ms)!,
    finalizing_at: null,
    completed_at: at('completed'),
    failed_at: at('failed'),
    expired_at: at('expired'),
    cancelling_at: seconds(b.cancelling_at_ms),
    cancelled_at: at('cancelled'),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
  };
}

export function presentOpenAiFile(f: FileRecord, bytes: number = f.bytes) {
  return {
    id: f.id,
    object: 'file' as const,
    bytes,
    created_at: Math.floor(f.created_at_ms / 1000),
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed' as const,
    expires_at: null,
    status_details: null,
  };
}

/** A /v1 request line as the /v2 line it stands for (its url and body mapped as the /v1 routes map theirs). */
function fromV1Line(line: unknown): unknown {
  if (line === null || typeof line !== 'object' || Array.isArray(line)) return line;
  const { url, body, ...rest } = line as { url?: unknown; body?: unknown };
  try {
    if (url === '/v1/videos') {
      const parsed = OpenAiCreateVideoBody.safeParse(body);
      if (!parsed.success) throw fromZodError(parsed.error, 'body.');
      if (parsed.data.input_reference !== undefined)
        throw invalidParam('body.input_reference', 'images are not taken in batches: create image-to-video videos alone');
      return { ...rest, url: V2_ENDPOINT[url], body: toCreateBody(parsed.data, undefined) };
    }
    if (url === '/v1/audio/speech') {
      const parsed = OpenAiSpeechBody.safeParse(body);
      if (!parsed.success) throw fromZodError(parsed.error, 'body.');
      const { voice, instructions: _instructions, ...speech } = parsed.data;
      return {
        ...rest,
        url: V2_ENDPOINT[url],
        body: { response_format: 'mp3', ...speech, voice: typeof voice === 'string' ? voice : voice.id },
      };
    }
  } catch (err) {
    if (err instanceof ZodError) throw fromZodError(err, 'body.');
    throw err;
  }
  return line;
}

const openaiCreateFile = {
  method: 'post',
  path: '/v1/files',
  operationId: 'openaiCreateFile',
  summary: 'Upload a batch input file (client.files.create)',
  description: 'A JSONL file of /v1/videos or /v1/audio/speech requests, one per line, with purpose "batch".',
  ...OPENAI_OPERATION,
  body: CREATE_FILE_BODY,
  responses: { '200': json(OpenAiFile, 'The file.') },
  errors: { 400: undefined, 413: undefined, 415: undefined, 429: undefined, 503: 'Too many uploads in progress (server_busy).' },
} satisfies RouteContract;

const openaiGetFile = {
  method: 'get',
  path: '/v1/files/{id}',
  operationId: 'openaiGetFile',
  summary: 'Get a file (client.files.retrieve)',
  ...OPENAI_OPERATION,
  requestParams: { path: ID },
  responses: { '200': json(OpenAiFile, 'The file.') },
  errors: { 404: NO_FILE },
} satisfies RouteContract;

const openaiFileContent = {
  method: 'get',
  path: '/v1/files/{id}/content',
  operationId: 'openaiFileContent',
  summary: "A file's content (client.files.content)",
  description:
    "JSONL: an input file as uploaded; a batch's output lines carry the OpenAI `video` object (or the speech's record) in `response.body`.",
  ...OPENAI_OPERATION,
  requestParams: { path: ID },
  responses: { '200': { description: 'JSONL.', content: { 'application/jsonl': { schema: { type: 'string' } } } } },
  errors: { 404: NO_FILE },
} satisfies RouteContract;

const openaiCreateBatch = {
  method: 'post',
  path: '/v1/batches',
  operationId: 'openaiCreateBatch',
  summary: 'Create a batch (client.batches.create)',
  description:
    'Runs the requests of an uploaded file as POST /v2/batches does: every line validated first (a bad one is a 400 naming its line), ' +
    'one reservation of their estimates, each request settled as it would be alone, the rest refunded when the batch ends.',
  ...OPENAI_OPERATION,
  body: {
    component: 'OpenAiCreateBatchBody',
    schema: OpenAiCreateBatchBody,
    example: { input_file_id: '00000000-0000-4000-8000-000000000000', endpoint: '/v1/videos', completion_window: '24h' },
  },
  responses: { '200': json(OpenAiBatch, 'The batch, in progress.') },
  errors: {
    400: undefined,
    402: INSUFFICIENT_CREDITS_402,
    404: 'input_file_id names no file of this workspace.',
    429: undefined,
    503: undefined,
  },
} satisfies RouteContract;

const openaiGetBatch = {
  method: 'get',
  path: '/v1/batches/{id}',
  operationId: 'openaiGetBatch',
  summary: 'Get a batch (client.batches.retrieve)',
  ...OPENAI_OPERATION,
  requestParams: { path: ID },
  responses: { '200': json(OpenAiBatch, 'The batch.') },
  errors: { 404: NO_BATCH },
} satisfies RouteContract;

const openaiCancelBatch = {
  method: 'post',
  path: '/v1/batches/{id}/cancel',
  operationId: 'openaiCancelBatch',
  summary: 'Cancel a batch (client.batches.cancel)',
  description:
    'Requests not started fail, costing nothing; those running finish; `cancelling`, then `cancelled`, when what was not used is refunded.',
  ...OPENAI_OPERATION,
  requestParams: { path: ID },
  responses: { '200': json(OpenAiBatch, 'The batch, cancelling (or cancelled).') },
  errors: { 404: NO_BATCH, 409: 'The batch has ended.', 429: undefined },
} satisfies RouteContract;

function v1Presenters(urls: DownloadUrlSigner, baseUrl: string): ResultPresenters {
  return { video: async (job) => presentOpenAiVideo(job), speech: (s) => presentBatchSpeech(s, urls, baseUrl) };
}

export function openAiBatchRoutes(deps: {
  auth: RequestHandler;
  limit: RequestHandler;
  batches: BatchesService;
  files: FilesService;
  downloadUrls: DownloadUrlSigner;
  publicBaseUrl: string | undefined;
}): ApiRouter {
  const api = new ApiRouter();
  const createBody = jsonBodyParser({ bytes_max: BATCH_CREATE_BODY_BYTES_MAX });
  const files = fileHandlers(deps.files, presentOpenAiFile, (req) => v1Presenters(deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  api.route(openaiCreateFile, deps.auth, deps.limit, files.upload, files.create);
  api.route(openaiGetFile, deps.auth, files.get);
  api.route(openaiFileContent, deps.auth, files.content);

  api.route(openaiCreateBatch, deps.auth, deps.limit, createBody, async ({ body }, _req, res) => {
    const batch = await deps.batches.create(
      principalOf(res),
      {
        input_file_id: body.input_file_id,
        endpoint: V2_ENDPOINT[body.endpoint],
        completion_window: body.completion_window,
        metadata: body.metadata,
      },
      fromV1Line,
    );
    res.json(presentOpenAiBatch(batch));
  });

  api.route(openaiGetBatch, deps.auth, async ({ params }, _req, res) => {
    res.json(presentOpenAiBatch(await deps.batches.get(principalOf(res), params.id)));
  });

  api.route(openaiCancelBatch, deps.auth, deps.limit, async ({ params }, _req, res) => {
    res.json(presentOpenAiBatch(await deps.batches.cancel(principalOf(res), params.id)));
  });

  return api;
}
