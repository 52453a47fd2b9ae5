// Batches and their files under /v2. Each operation's contract, then its handler: parse, call the service, present.
import type { Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import type { ZodError } from 'zod';
import { ApiRouter, bytesText, json, type RouteContract } from '../http/openapi.js';
import { jsonBodyParser } from '../http/json-body.js';
import { multipartForm, type MultipartForm, type MultipartLimits, type UploadedFile } from '../http/multipart.js';
import { principalOf } from '../http/auth.js';
import { baseUrlOf } from '../http/base-url.js';
import { ApiError, invalidParam } from '../errors.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import { presentVideoJob } from '../video-jobs/present.js';
import {
  Batch,
  BatchList,
  BATCH_CREATE_BODY_BYTES_MAX,
  BATCH_REQUESTS_MAX,
  CreateBatchBody,
  FileObject,
  ListBatchesQuery,
} from './schemas.js';
import { presentBatch, presentFile, type FileRecord } from './records.js';
import { presentBatchSpeech, type FilesService, type ResultPresenters } from './files.js';
import type { BatchesService } from './service.js';

const MiB = 1024 * 1024;

/** An uploaded batch file: one JSONL file, bounded before it is read (10,000 lines of up to 64 KiB fit well within). */
export const BATCH_FILE_LIMITS: MultipartLimits = {
  filesMax: 1,
  fileBytesMax: 100 * MiB,
  totalFileBytesMax: 100 * MiB,
  fieldsMax: 2,
  partsMax: 3,
  fieldBytesMax: 64,
  partNameBytesMax: 32,
  // at most 2 x 100 MiB of uploads held in memory by one API process
  concurrentRequestsMax: 2,
};

/** A JSONL file's head: text whose first non-blank character opens a JSON object. */
async function detectJsonl(head: Uint8Array): Promise<string | null> {
  for (const byte of head) {
    if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) continue;
    return byte === 0x7b ? 'application/jsonl' : null;
  }
  return null;
}
export const JSONL_FILE_TYPE = { headBytes: 4096, detect: detectJsonl, expected: 'a JSONL file (one JSON object per line)' };

export const CreateFileForm = z
  .strictObject({
    file: z
      .file()
      .max(BATCH_FILE_LIMITS.fileBytesMax)
      .describe(`The JSONL file, at most ${bytesText(BATCH_FILE_LIMITS.fileBytesMax)} and ${BATCH_REQUESTS_MAX} lines.`),
    purpose: z.literal('batch').describe('Only "batch".'),
  })
  .describe('multipart/form-data: one "file" part and a "purpose" part.');

const missingPart = (part: string) =>
  new ApiError(400, 'invalid_request_error', 'missing_parameter', `missing required part: ${part}`, part);

export const CreateFileParts = {
  schema: z.object({ file: z.array(z.custom<UploadedFile>()).length(1), purpose: z.literal('batch') }),
  input: (form: MultipartForm) => ({ file: form.files, purpose: form.fields.get('purpose') }),
  invalid: (_err: ZodError, input: Record<string, unknown>) => {
    if (Array.isArray(input['file']) && input['file'].length === 0) return missingPart('file');
    if (input['purpose'] === undefined) return missingPart('purpose');
    return invalidParam('purpose', 'purpose must be "batch"');
  },
};

export const ID = z.object({ id: z.string().describe('The id.') });
export const NO_FILE = 'No such file in this workspace (file_not_found).';
export const NO_BATCH = 'No such batch in this workspace (batch_not_found).';

/** The multipart body of a batch file's upload (/v2/files and /v1/files). */
export const CREATE_FILE_BODY = {
  component: 'CreateFileForm',
  schema: CreateFileForm,
  mediaType: 'multipart/form-data',
  parts: CreateFileParts,
  description: `multipart/form-data with a boundary; at most ${BATCH_FILE_LIMITS.partsMax} parts.`,
  encoding: { file: { contentType: 'application/jsonl' } },
} as const;

/**
 * The handlers of a batch file's upload, read and content, with the surface's presenter of a file and of
 * an output line's results (an output or error file's size is that of its content as rendered now).
 */
export function fileHandlers<F>(
  files: FilesService,
  present: (f: FileRecord, bytes?: number) => F,
  presenters: (req: Request) => ResultPresenters,
) {
  return {
    upload: multipartForm({ limits: BATCH_FILE_LIMITS, fileParts: ['file'], fieldParts: ['purpose'], fileType: JSONL_FILE_TYPE }),
    async create({ body }: { body: { file: UploadedFile[] } }, _req: Request, res: Response) {
      const file = body.file[0]!;
      res.json(present(await files.upload(principalOf(res), { buffer: file.buffer, filename: file.filename })));
    },
    async get({ params }: { params: { id: string } }, req: Request, res: Response) {
      const f = await files.get(principalOf(res), params.id);
      if (f.purpose === 'batch') return res.json(present(f));
      const { body } = await files.content(principalOf(res), params.id, presenters(req));
      return res.json(present(f, body.length));
    },
    async content({ params }: { params: { id: string } }, req: Request, res: Response) {
      const { body } = await files.content(principalOf(res), params.id, presenters(req));
      res.type('application/jsonl').send(body);
    },
  };
}

const createFile = {
  method: 'post',
  path: '/v2/files',
  operationId: 'createBatchFile',
  tag: 'Batches',
  summary: 'Upload a batch input file',
  description:
    `A JSONL file of requests for POST /v2/batches, one per line (at most ${BATCH_REQUESTS_MAX}), ` +
    'each {"custom_id", "method": "POST", "url", "body"}.',
  security: 'apiKey',
  body: CREATE_FILE_BODY,
  responses: { '200': json(FileObject, 'The file.') },
  errors: {
    400: 'A missing part, purpose not "batch", or a file that is not JSONL of objects (invalid_file, naming its line).',
    413: `The file above ${bytesText(BATCH_FILE_LIMITS.fileBytesMax)} (file_too_large) or the body too large (request_too_large).`,
    415: 'Not multipart/form-data, or a file that is not JSONL (unsupported_file_type).',
    429: undefined,
    503: 'Too many uploads in progress (server_busy).',
  },
} satisfies RouteContract;

const getFile = {
  method: 'get',
  path: '/v2/files/{id}',
  operationId: 'getBatchFile',
  tag: 'Batches',
  summary: 'Get a file',
  security: 'apiKey',
  requestParams: { path: ID },
  responses: { '200': json(FileObject, 'The file.') },
  errors: { 404: NO_FILE },
} satisfies RouteContract;

const getFileContent = {
  method: 'get',
  path: '/v2/files/{id}/content',
  operationId: 'getBatchFileContent',
  tag: 'Batches',
  summary: "A file's content (JSONL)",
  description:
    'An input file as uploaded; a batch\'s output file: one line {"id", "custom_id", "response": {"status_code": 200, "body"}, ' +
    '"error": null} per request that succeeded (the body is what GET of its job answers, or the speech\'s record with its ' +
    'audio\'s signed URL); its error file: {"id", "custom_id", "response": null, "error": {"code", "message"}} per other request.',
  security: 'apiKey',
  requestParams: { path: ID },
  responses: { '200': { description: 'JSONL.', content: { 'application/jsonl': { schema: { type: 'string' } } } } },
  errors: { 404: NO_FILE },
} satisfies RouteContract;

const createBatch = {
  method: 'post',
  path: '/v2/batches',
  operationId: 'createBatch',
  tag: 'Batches',
  summary: 'Create a batch',
  description:
    `Up to ${BATCH_REQUESTS_MAX} video and speech requests, inline (\`requests\`) or as an uploaded file (\`input_file_id\` with \`endpoint\`). ` +
    'Every request is validated first as it would be alone; then the sum of their estimates is reserved as one ledger charge. Each request runs and is ' +
    'settled as it would be alone, inside the reservation; what was not used is refunded when the batch ends.',
  security: 'apiKey',
  body: {
    component: 'CreateBatchBody',
    schema: CreateBatchBody,
    bytes_max: BATCH_CREATE_BODY_BYTES_MAX,
    example: {
      requests: [
        {
          custom_id: 'clip-1',
          method: 'POST',
          url: '/v2/videos/generations',
          body: { model: 'sim-video-1', prompt: 'a lighthouse at dusk', durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
        },
        {
          custom_id: 'line-1',
          method: 'POST',
          url: '/v2/audio/speech',
          body: { model: 'sim-speech-1', voice: 'sim-narrator', input: 'Hello.' },
        },
      ],
      completion_window: '24h',
      metadata: { project: 'launch' },
    },
  },
  responses: { '200': json(Batch, 'The batch, in progress.') },
  errors: {
    400: 'A bad request line (invalid_batch_request: the message names its 1-based line, `param` its index, e.g. `requests[6]`), or a bad parameter.',
    402: "The balance (insufficient_credits) or the key's spend limit (key_spend_limit_exceeded) does not cover the reservation; nothing was charged.",
    404: 'input_file_id names no file of this workspace (file_not_found).',
    429: undefined,
    503: 'The batch could not be started (its reservation released in full).',
  },
} satisfies RouteContract;

const listBatchesContract = {
  method: 'get',
  path: '/v2/batches',
  operationId: 'listBatches',
  tag: 'Batches',
  summary: "List this workspace's batches",
  security: 'apiKey',
  requestParams: { query: ListBatchesQuery },
  responses: { '200': json(BatchList, 'Newest first.') },
  errors: { 400: undefined, 404: '`after` names no batch of this workspace.' },
} satisfies RouteContract;

const getBatch = {
  method: 'get',
  path: '/v2/batches/{id}',
  operationId: 'getBatch',
  tag: 'Batches',
  summary: 'Get a batch',
  security: 'apiKey',
  requestParams: { path: ID },
  responses: { '200': json(Batch, 'The batch.') },
  errors: { 404: NO_BATCH },
} satisfies RouteContract;

const cancelBatch = {
  method: 'post',
  path: '/v2/batches/{id}/cancel',
  operationId: 'cancelBatch',
  tag: 'Batches',
  summary: 'Cancel a batch',
  description:
    'Nothing more starts: requests not started fail (`batch_cancelled`), costing nothing; requests running finish. ' +
    'The batch is `cancelling` until they end, then `cancelled`, when what was not used (their share included) is refunded as one refund.',
  security: 'apiKey',
  requestParams: { path: ID },
  responses: { '200': json(Batch, 'The batch, cancelling (or cancelled).') },
  errors: { 404: NO_BATCH, 409: 'The batch has ended (batch_not_cancellable).', 429: undefined },
} satisfies RouteContract;

/** Output lines as /v2 presents them: the job as GET /v2/videos/generations/{id}, the speech's record. */
export function v2Presenters(urls: DownloadUrlSigner, baseUrl: string): ResultPresenters {
  return { video: (job) => presentVideoJob(job, urls, baseUrl), speech: (s) => presentBatchSpeech(s, urls, baseUrl) };
}

export function batchRoutes(deps: {
  auth: RequestHandler;
  limit: RequestHandler;
  batches: BatchesService;
  files: FilesService;
  downloadUrls: DownloadUrlSigner;
  publicBaseUrl: string | undefined;
}): ApiRouter {
  const api = new ApiRouter();
  const createBody = jsonBodyParser({ bytes_max: BATCH_CREATE_BODY_BYTES_MAX, concurrent_large_bodies_max: 2 });
  const files = fileHandlers(deps.files, presentFile, (req) => v2Presenters(deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  api.route(createFile, deps.auth, deps.limit, files.upload, files.create);
  api.route(getFile, deps.auth, files.get);
  api.route(getFileContent, deps.auth, files.content);

  api.route(createBatch, deps.auth, deps.limit, createBody, async ({ body }, _req, res) => {
    const batch = await deps.batches.create(principalOf(res), body);
    res.json(presentBatch(batch));
  });

  api.route(listBatchesContract, deps.auth, async ({ query }, _req, res) => {
    const page = await deps.batches.list(principalOf(res), query);
    res.json({ object: 'list', data: page.batches.map(presentBatch), has_more: page.has_more });
  });

  api.route(getBatch, deps.auth, async ({ params }, _req, res) => {
    res.json(presentBatch(await deps.batches.get(principalOf(res), params.id)));
  });

  api.route(cancelBatch, deps.auth, deps.limit, async ({ params }, _req, res) => {
    res.json(presentBatch(await deps.batches.cancel(principalOf(res), params.id)));
  });

  return api;
}
