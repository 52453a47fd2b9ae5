// OpenAI's Videos API over this service's video jobs (client.videos.* of the openai SDKs):
//
//   POST   /v1/videos                 JSON or multipart: prompt, model, seconds, size, input_reference -> video
//   GET    /v1/videos                 cursor list (after, limit, order)        -> {object: "list", data, first_id, last_id, has_more}
//   GET    /v1/videos/{id}            -> video
//   DELETE /v1/videos/{id}            -> {id, object: "video.deleted", deleted: true}
//   GET    /v1/videos/{id}/content    variant=video (the MP4) | thumbnail (JPEG of the first frame)
//   remix, edits, extensions, characters, spritesheet: 400 unsupported_feature
//
// Only shapes are translated: a video is a job of /v2/videos/generations (same id, same charge and
// refunds), created, read, listed and deleted by the same services. Each operation's contract sits
// above its handlers (../http/openapi.ts); the routes that only answer 400 unsupported_feature are mounted
// without one, so the OpenAPI document lists only what is offered (its tag says what is not).
import { pipeline } from 'node:stream/promises';
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { defaultVideoModelId, findVideoModel } from '../models/catalog.js';
import type { AspectRatio, Resolution } from '../models/values.js';
import { ApiError, invalidParam, notFound } from '../errors.js';
import { foundWithKey, principalOf } from '../http/auth.js';
import { LIST_LIMIT_MAX } from '../http/schemas.js';
import { CreateVideoBody, IMAGE_BYTES_MAX, PROMPT_CHARS_MAX } from './schemas.js';
import { jsonBodyParser } from '../http/json-body.js';
import { ApiRouter, bytesText, header, json, type ContractHandler, type RouteContract } from '../http/openapi.js';
import { videoBodyExample } from '../models/openapi-bodies.js';
import { OpenAiVideo, OpenAiVideoDeleted, OpenAiVideoList } from './openai-schemas.js';
import { multipartForm, type MultipartForm, type UploadedFile } from '../http/multipart.js';
import { sniffImage } from '../media/image-sniff.js';
import { videoContentGone, type Thumbnails } from '../media/thumbnails.js';
import type { Storage } from '../storage/local.js';
import { isUuid } from '../ids.js';
import { text } from '../zod-text.js';
import type { VideoJobsService } from './service.js';
import type { VideoJobRecord } from './records.js';
import type { VideoJobLifecycle } from './lifecycle.js';
import { READS_BUSY } from '../http/read-gate.js';
import { CONDITIONAL_HEADERS, IF_NONE_MATCH_PARAMETER, NOT_MODIFIED_RESPONSE, sendJsonConditionally } from '../http/conditional.js';
import type { VideoJobState } from '../../workflows/messages.js';
import { VIDEO_CREATE_BODY_BYTES_MAX, VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX } from './routes.js';
import { INSUFFICIENT_CREDITS_402, notOffered, OPENAI_OPERATION } from '../http/openai/errors.js';
import { openAiPage } from '../http/openai/page.js';

/** OpenAI's `size` values and what they mean here. */
export const OPENAI_VIDEO_SIZES: Readonly<Record<string, { resolution: Resolution; aspectRatio: AspectRatio }>> = {
  '1280x720': { resolution: '720p', aspectRatio: '16:9' },
  '720x1280': { resolution: '720p', aspectRatio: '9:16' },
  '1920x1080': { resolution: '1080p', aspectRatio: '16:9' },
  '1080x1920': { resolution: '1080p', aspectRatio: '9:16' },
  '3840x2160': { resolution: '4k', aspectRatio: '16:9' },
  '2160x3840': { resolution: '4k', aspectRatio: '9:16' },
};

export function openAiSizeOf(resolution: string, aspectRatio: string): string {
  const hit = Object.entries(OPENAI_VIDEO_SIZES).find(([, v]) => v.resolution === resolution && v.aspectRatio === aspectRatio);
  return hit ? hit[0] : `${resolution}@${aspectRatio}`;
}

const STATUS: Record<string, 'queued' | 'in_progress' | 'completed' | 'failed'> = {
  charging: 'queued',
  pending: 'in_progress',
  succeeded: 'completed',
  failed: 'failed',
};

/** A job as OpenAI's `video` object. */
export function presentOpenAiVideo(job: VideoJobState) {
  const status = STATUS[job.status] ?? 'failed';
  return {
    id: job.job_id,
    object: 'video' as const,
    model: job.model,
    status,
    // Queued 0, finished 100; running, the provider's progress as the job keeps it (it only moves
    // forward), 0 until the provider reports one, so the figure never goes back.
    progress: status === 'queued' ? 0 : status === 'in_progress' ? (job.progress ?? 0) : 100,
    created_at: Math.floor(job.created_at_ms / 1000),
    completed_at: job.completed_at_ms === null ? null : Math.floor(job.completed_at_ms / 1000),
    // Stored videos are kept until the video is deleted.
    expires_at: null,
    prompt: null,
    seconds: String(job.params.durationSeconds),
    size: openAiSizeOf(job.params.resolution, job.params.aspectRatio),
    error: status === 'failed' && job.error ? { code: job.error.code, message: job.error.message } : null,
    remixed_from_video_id: null,
  };
}

const SecondsText = z.string().regex(/^[1-9][0-9]{0,2}$/, 'must be a whole number of seconds, such as "8"');
const Seconds = z.union([SecondsText, z.number().int().min(1).max(999)]);
const SECONDS_TEXT = "Seconds of video: one of the model's durations (GET /v2/models).";
const Size = z.enum(Object.keys(OPENAI_VIDEO_SIZES) as [string, ...string[]], {
  error: `must be one of ${Object.keys(OPENAI_VIDEO_SIZES).join(', ')}`,
});
const SIZE_TEXT = 'Width x height: the resolution and aspect ratio (the model must offer both).';
const DATA_URL = /^data:(image\/[a-z+.-]+);base64,([A-Za-z0-9+/=\s]+)$/;
/** A first frame as a data: URL: the base64 of an image of at most IMAGE_BYTES_MAX, its prefix, and room for line breaks. */
export const IMAGE_DATA_URL_CHARS_MAX = 4 * Math.ceil(IMAGE_BYTES_MAX / 3) + 64 * 1024;

export const OpenAiCreateVideoBody = z
  .object({
    prompt: text({ chars_max: PROMPT_CHARS_MAX, notBlank: true }).describe(
      `What to generate: at most ${PROMPT_CHARS_MAX} characters, not blank (leading and trailing white space is removed).`,
    ),
    model: z.string().min(1).max(100).optional().describe("A video model id of GET /v1/models; absent: the service's default model."),
    seconds: Seconds.optional().describe(`${SECONDS_TEXT} A string ("4", "8") or a number.`),
    size: Size.optional().describe(SIZE_TEXT),
    input_reference: z
      .strictObject({ image_url: z.string().max(IMAGE_DATA_URL_CHARS_MAX).optional(), file_id: z.string().max(200).optional() })
      .optional()
      .describe('The first frame: {"image_url": "data:image/png;base64,..."} in JSON, or an image file in multipart (PNG, JPEG or WebP).'),
  })
  .strict();
type OpenAiCreateVideo = z.infer<typeof OpenAiCreateVideoBody>;

const MULTIPART_FIELDS = ['prompt', 'model', 'seconds', 'size', 'input_reference[image_url]', 'input_reference[file_id]'] as const;
const MULTIPART_LIMITS = {
  filesMax: 1,
  fileBytesMax: IMAGE_BYTES_MAX,
  totalFileBytesMax: IMAGE_BYTES_MAX,
  fieldsMax: MULTIPART_FIELDS.length,
  partsMax: MULTIPART_FIELDS.length + 1,
  fieldBytesMax: 4 * PROMPT_CHARS_MAX,
  partNameBytesMax: 100,
  concurrentRequestsMax: VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX,
};
const IMAGE_TYPES = 'image/png, image/jpeg, image/webp';

/**
 * The multipart form of POST /v1/videos, as the openai SDKs send it. Documentation only: multipart
 * bodies are parsed by ../http/multipart.ts, and the contract validates the parsed parts as the JSON
 * body they stand for (OpenAiCreateVideoParts).
 */
export const OpenAiCreateVideoForm = z
  .strictObject({
    prompt: OpenAiCreateVideoBody.shape.prompt,
    model: OpenAiCreateVideoBody.shape.model,
    seconds: SecondsText.optional().describe(`${SECONDS_TEXT} E.g. "4".`),
    size: Size.optional().describe(SIZE_TEXT),
    input_reference: z
      .file()
      .min(1)
      .max(IMAGE_BYTES_MAX)
      .optional()
      .describe(
        `The first frame: a PNG, JPEG or WebP file of at most ${bytesText(IMAGE_BYTES_MAX)}, recognised by ` +
          `its content (the part's Content-Type is not trusted).`,
      ),
    'input_reference[image_url]': z
      .string()
      .max(IMAGE_DATA_URL_CHARS_MAX)
      .optional()
      .describe(
        `Or the first frame as a data: URL (data:image/png;base64,...; what the openai SDKs send for ` +
          `input_reference: {image_url}), an image of at most ${bytesText(IMAGE_BYTES_MAX)} once decoded; other ` +
          `URLs are not fetched.`,
      ),
  })
  .describe(
    'multipart/form-data: text parts prompt, model, seconds and size, and the first frame as the file ' +
      'part input_reference or the text part input_reference[image_url]; no other parts.',
  );

export const OpenAiListVideosQuery = z.strictObject({
  after: z.string().max(100).optional(),
  limit: z.coerce.number().int().min(1).max(LIST_LIMIT_MAX).default(20),
  order: z.enum(['asc', 'desc']).default('desc'),
});

/** Renames the /v2 parameter an error names to the /v1 one the client sent. */
const V1_PARAMS: Record<string, string> = {
  durationSeconds: 'seconds',
  resolution: 'size',
  aspectRatio: 'size',
  image: 'input_reference',
  'image.bytesBase64Encoded': 'input_reference',
  'image.mimeType': 'input_reference',
};
function asV1Param(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.param === null || !(err.param in V1_PARAMS)) return err;
  const param = V1_PARAMS[err.param]!;
  return new ApiError(err.status, err.type, err.code, err.message.replaceAll(err.param, param), param, err.headers);
}

function imageFromDataUrl(url: string): NonNullable<CreateVideoBody['image']> {
  const m = DATA_URL.exec(url);
  if (!m)
    throw invalidParam(
      'input_reference',
      'input_reference.image_url must be a data: URL of a base64 image (data:image/png;base64,...); other URLs are not fetched',
    );
  const bytes = Buffer.from(m[2]!.replace(/\s+/g, ''), 'base64');
  if (bytes.length > IMAGE_BYTES_MAX)
    throw new ApiError(
      413,
      'invalid_request_error',
      'image_too_large',
      `input_reference exceeds ${IMAGE_BYTES_MAX} bytes`,
      'input_reference',
    );
  const type = sniffImage(bytes);
  if (!type) throw invalidParam('input_reference', 'input_reference must be a PNG, JPEG or WebP image');
  return { bytesBase64Encoded: bytes.toString('base64'), mimeType: type };
}

/**
 * The /v2 create body of a /v1 request, validated as /v2 validates its own (the model's limits are
 * checked by the create itself).
 */
function toCreateBody(body: OpenAiCreateVideo, uploaded: { buffer: Buffer; type: string } | undefined): CreateVideoBody {
  const out: CreateVideoBody = { prompt: body.prompt, n: 1 };
  if (body.model !== undefined) out.model = body.model;
  if (body.seconds !== undefined) out.durationSeconds = Number(body.seconds);
  if (body.size !== undefined) {
    const { resolution, aspectRatio } = OPENAI_VIDEO_SIZES[body.size]!;
    const model = findVideoModel(body.model ?? defaultVideoModelId());
    if (model && (!model.resolutions.includes(resolution) || !model.aspect_ratios.includes(aspectRatio))) {
      const offered = Object.entries(OPENAI_VIDEO_SIZES)
        .filter(([, v]) => model.resolutions.includes(v.resolution) && model.aspect_ratios.includes(v.aspectRatio))
        .map(([k]) => k);
      throw invalidParam(
        'size',
        `model ${model.id} does not offer size ${body.size}; it offers ${offered.join(', ')}`,
        'unsupported_parameter',
      );
    }
    out.resolution = resolution;
    out.aspectRatio = aspectRatio;
  }
  if (uploaded && body.input_reference !== undefined)
    throw invalidParam('input_reference', 'give the first frame once: a file part input_reference, or input_reference[image_url]');
  if (uploaded)
    out.image = {
      bytesBase64Encoded: uploaded.buffer.toString('base64'),
      mimeType: uploaded.type as NonNullable<CreateVideoBody['image']>['mimeType'],
    };
  else if (body.input_reference?.file_id !== undefined)
    throw invalidParam(
      'input_reference',
      'input_reference.file_id is not offered: send the image itself (a file part, or image_url as a data: URL)',
      'unsupported_parameter',
    );
  else if (body.input_reference?.image_url !== undefined) out.image = imageFromDataUrl(body.input_reference.image_url);
  return CreateVideoBody.parse(out);
}

/** The multipart form, validated as the JSON body it stands for, with the uploaded first frame beside it. */
const OpenAiCreateVideoParts = OpenAiCreateVideoBody.extend({ uploaded: z.custom<UploadedFile>().optional() });
function openAiCreateVideoInput(form: MultipartForm): Record<string, unknown> {
  const f = form.fields;
  const raw: Record<string, unknown> = {};
  for (const k of ['prompt', 'model', 'seconds', 'size'] as const) if (f.has(k)) raw[k] = f.get(k);
  const ref: Record<string, string> = {};
  if (f.has('input_reference[image_url]')) ref['image_url'] = f.get('input_reference[image_url]')!;
  if (f.has('input_reference[file_id]')) ref['file_id'] = f.get('input_reference[file_id]')!;
  if (Object.keys(ref).length > 0) raw['input_reference'] = ref;
  if (form.files[0]) raw['uploaded'] = form.files[0];
  return raw;
}

const VIDEO_ID = z.object({ id: z.string().describe('The video id (the id of its /v2 job).') });
const NO_VIDEO = 'No such video in this workspace (job_not_found).';

const openaiCreateVideo = {
  method: 'post',
  path: '/v1/videos',
  operationId: 'openaiCreateVideo',
  summary: 'Create a video (client.videos.create)',
  description:
    'Starts a video generation job, exactly as POST /v2/videos/generations with n = 1: validated against ' +
    'the model, charged its estimate when accepted, refunded if it fails. ' +
    '`size` and `seconds` become the resolution, aspect ratio and duration; a size the model does not offer is a 400 with `param: "size"`. ' +
    'Poll GET /v1/videos/{id} until `completed` or `failed`. With an `Idempotency-Key` (the SDKs send one), a retry returns the same video and charges once.',
  ...OPENAI_OPERATION,
  idempotent: true,
  body: [
    {
      component: 'OpenAiCreateVideoBody',
      schema: OpenAiCreateVideoBody,
      bytes_max: VIDEO_CREATE_BODY_BYTES_MAX,
      example: (ctx) => {
        const example = videoBodyExample(ctx);
        return example && { prompt: example['prompt'], model: example['model'], seconds: String(example['durationSeconds']) };
      },
    },
    {
      component: 'OpenAiCreateVideoForm',
      schema: OpenAiCreateVideoForm,
      mediaType: 'multipart/form-data',
      parts: { schema: OpenAiCreateVideoParts, input: openAiCreateVideoInput },
      description: `multipart/form-data with a boundary (what the openai SDKs send); at most ${MULTIPART_LIMITS.partsMax} parts.`,
      encoding: { input_reference: { contentType: IMAGE_TYPES } },
    },
  ],
  responses: { '200': json(OpenAiVideo, 'The video, queued or in progress.') },
  errors: {
    400: 'Invalid request, e.g. a size or seconds the model does not offer, or an input_reference that is not a data: URL of an image; `error.param` names it.',
    402: INSUFFICIENT_CREDITS_402,
    403: undefined,
    404: 'Unknown model (model_not_found, `param: model`).',
    409: undefined,
    413:
      `The JSON body exceeds ${bytesText(VIDEO_CREATE_BODY_BYTES_MAX)} (request_too_large), or the first ` +
      `frame exceeds ${bytesText(IMAGE_BYTES_MAX)} (image_too_large, file_too_large; \`param: ` +
      `input_reference\`).`,
    415:
      'The body is neither application/json nor multipart/form-data (unsupported_media_type), or the ' +
      'input_reference file is not a PNG, JPEG or WebP image (unsupported_file_type).',
    429: 'Rate limited (per API key; rate_limited), or the workspace already has its limit of pending jobs (too_many_pending_jobs; nothing charged).',
    503:
      'No video provider is configured for the model (provider_not_configured), too many requests with images are in ' +
      'progress (server_busy), or the video could not be accepted in time, e.g. while the workflow service is unreachable ' +
      '(service_unavailable, temporarily_unavailable; nothing charged). With Retry-After.',
  },
} satisfies RouteContract;

const openaiListVideos = {
  method: 'get',
  path: '/v1/videos',
  operationId: 'openaiListVideos',
  summary: "List this workspace's videos (client.videos.list)",
  description: "A page at a time (the SDKs' auto-paging iterator follows `last_id` while `has_more`). Deleted videos are not listed.",
  ...OPENAI_OPERATION,
  requestParams: { query: OpenAiListVideosQuery },
  parameters: [IF_NONE_MATCH_PARAMETER],
  responses: { '200': json(OpenAiVideoList, 'A page of videos.', CONDITIONAL_HEADERS), '304': NOT_MODIFIED_RESPONSE },
  errors: {
    400: 'Invalid `limit` (1 to 100) or `order`, or an unknown parameter; `error.param` names it.',
    404: '`after` names no video of this workspace (job_not_found, `param: after`).',
    503: READS_BUSY,
  },
} satisfies RouteContract;

const openaiRetrieveVideo = {
  method: 'get',
  path: '/v1/videos/{id}',
  operationId: 'openaiRetrieveVideo',
  summary: 'Retrieve a video (client.videos.retrieve)',
  ...OPENAI_OPERATION,
  description:
    "Answered from the job's record, which its workflow keeps current. With `If-None-Match` (the `ETag` " +
    'of an earlier answer), a video in which nothing changed is a 304 with no body.',
  requestParams: { path: VIDEO_ID },
  parameters: [IF_NONE_MATCH_PARAMETER],
  responses: { '200': json(OpenAiVideo, 'The video.', CONDITIONAL_HEADERS), '304': NOT_MODIFIED_RESPONSE },
  errors: { 404: NO_VIDEO, 503: READS_BUSY },
} satisfies RouteContract;

const openaiDeleteVideo = {
  method: 'delete',
  path: '/v1/videos/{id}',
  operationId: 'openaiDeleteVideo',
  summary: 'Delete a finished video (client.videos.delete)',
  description:
    'Deletes the stored video and its job (as DELETE /v2/videos/generations/{id}); it is a 404 from then on. The ledger keeps its entries.',
  ...OPENAI_OPERATION,
  requestParams: { path: VIDEO_ID },
  responses: { '200': json(OpenAiVideoDeleted, 'Deleted.') },
  errors: {
    400: 'The video is still being generated (video_not_finished, `param: video_id`).',
    404: NO_VIDEO,
    429: undefined,
  },
} satisfies RouteContract;

const openaiDownloadVideoContent = {
  method: 'get',
  path: '/v1/videos/{id}/content',
  operationId: 'openaiDownloadVideoContent',
  summary: 'Download a video or its thumbnail (client.videos.downloadContent)',
  description:
    'The MP4 of a completed video, or a JPEG of its first frame. `variant=spritesheet` is not offered (400 unsupported_feature).',
  ...OPENAI_OPERATION,
  requestParams: {
    path: VIDEO_ID,
    query: z.object({
      variant: z.enum(['video', 'thumbnail']).optional().describe('video (default): the MP4; thumbnail: a JPEG of the first frame.'),
    }),
  },
  // spritesheet is OpenAI's too, but not offered here.
  invalid: (_err, _where, query) =>
    typeof query === 'object' && query !== null && 'variant' in query && query.variant === 'spritesheet'
      ? new ApiError(
          400,
          'invalid_request_error',
          'unsupported_feature',
          'variant=spritesheet is not offered by this service; use video or thumbnail',
          'variant',
        )
      : invalidParam('variant', 'variant must be one of video, thumbnail, spritesheet'),
  responses: {
    '200': {
      description: 'The MP4 (variant video, with its Content-Length) or the JPEG (variant thumbnail).',
      headers: { 'Content-Disposition': header('`attachment; filename="<id>.mp4"` or `inline; filename="<id>.jpg"`.') },
      content: {
        'video/mp4': { schema: { type: 'string', format: 'binary', contentMediaType: 'video/mp4' } },
        'image/jpeg': { schema: { type: 'string', format: 'binary', contentMediaType: 'image/jpeg' } },
      },
    },
  },
  errors: {
    400: 'The video is not completed (video_not_ready, `param: video_id`), or `variant` is not video or thumbnail (spritesheet: unsupported_feature).',
    404: 'No such video in this workspace (job_not_found), or its content is no longer stored (video_content_gone).',
    422: 'The thumbnail cannot be made: the video is too large (video_too_large) or its first frame cannot be decoded (video_not_decodable).',
    503: 'Too many thumbnails are being made right now (media_worker_unavailable, with Retry-After). A thumbnail is made once per video and kept.',
  },
} satisfies RouteContract;

export interface OpenAiVideoRoutesDeps {
  auth: RequestHandler;
  /** Lists of jobs: `auth` behind the process's gate of job reads (../http/read-gate.ts). */
  readAuth: RequestHandler;
  /** A job's status read: the gate, then the API key and the job in one query (foundWithKey). */
  jobReadAuth: RequestHandler;
  limit: RequestHandler;
  jobs: VideoJobsService;
  lifecycle: VideoJobLifecycle;
  storage: Storage;
  thumbnails: Thumbnails;
}

/** The body parser of a create: the openai SDKs always send multipart; JSON is accepted too. */
function createBodyParser(): RequestHandler {
  const jsonParser = jsonBodyParser({
    bytes_max: VIDEO_CREATE_BODY_BYTES_MAX,
    concurrent_large_bodies_max: VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX,
  });
  const upload = multipartForm({
    limits: MULTIPART_LIMITS,
    fileParts: ['input_reference'],
    fieldParts: MULTIPART_FIELDS,
    nestedFieldParts: true,
    largeFields: { 'input_reference[image_url]': IMAGE_DATA_URL_CHARS_MAX },
    fileType: { headBytes: 16, detect: async (head) => sniffImage(head), expected: 'a PNG, JPEG or WebP image' },
  });
  return (req, res, next) => (req.is('multipart/form-data') ? upload(req, res, next) : jsonParser(req, res, next));
}

function createVideoHandler(deps: OpenAiVideoRoutesDeps): ContractHandler<typeof openaiCreateVideo> {
  return async ({ body, idempotencyKey }, _req, res) => {
    let created: VideoJobState;
    try {
      created = await deps.jobs.create(
        principalOf(res),
        toCreateBody(body, 'uploaded' in body ? body.uploaded : undefined),
        idempotencyKey,
      );
    } catch (err) {
      throw asV1Param(err);
    }
    res.locals['jobId'] = created.job_id;
    res.json(presentOpenAiVideo(created));
  };
}

function deleteVideoHandler(deps: OpenAiVideoRoutesDeps): ContractHandler<typeof openaiDeleteVideo> {
  return async ({ params: { id } }, _req, res) => {
    res.locals['jobId'] = id;
    try {
      await deps.lifecycle.delete(principalOf(res), id);
    } catch (err) {
      // OpenAI answers a video still being made with a 400; the SDKs would retry a 409.
      if (err instanceof ApiError && err.code === 'job_pending') {
        throw new ApiError(
          400,
          'invalid_request_error',
          'video_not_finished',
          'the video is still being generated; it can be deleted once completed or failed',
          'video_id',
        );
      }
      throw err;
    }
    res.json({ id, object: 'video.deleted', deleted: true });
  };
}

function downloadContentHandler(deps: OpenAiVideoRoutesDeps): ContractHandler<typeof openaiDownloadVideoContent> {
  return async ({ params, query }, _req, res) => {
    const variant = query.variant ?? 'video';
    const job = await deps.jobs.get(principalOf(res), params.id);
    res.locals['jobId'] = job.job_id;
    const video = job.status === 'succeeded' ? job.videos[0] : undefined;
    if (!video) {
      throw new ApiError(
        400,
        'invalid_request_error',
        'video_not_ready',
        `the video is ${STATUS[job.status] ?? job.status}; its content can be downloaded once completed`,
        'video_id',
      );
    }
    if (variant === 'video') {
      const stored = await deps.storage.open(video.storage_key);
      if (!stored) throw videoContentGone();
      res.status(200).set({
        'Content-Type': 'video/mp4',
        'Content-Length': String(stored.bytes),
        'Content-Disposition': `attachment; filename="${job.job_id}.mp4"`,
      });
      // pipeline, not pipe: a client that leaves mid-download closes the file too (and is no error of ours).
      await pipeline(stored.stream, res).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ERR_STREAM_PREMATURE_CLOSE') throw err;
      });
      return;
    }
    const jpeg = await deps.thumbnails.of(job.job_id, video.storage_key);
    res
      .status(200)
      .set({ 'Content-Type': 'image/jpeg', 'Content-Disposition': `inline; filename="${job.job_id}.jpg"` })
      .send(jpeg);
  };
}

export function openAiVideoRoutes(deps: OpenAiVideoRoutesDeps): ApiRouter {
  const api = new ApiRouter();

  api.route(openaiCreateVideo, deps.auth, deps.limit, createBodyParser(), createVideoHandler(deps));

  // Not offered, and so not operations of the document: answered before /v1/videos/{id} can take
  // "characters" or "edits" for an id.
  api.router.post('/v1/videos/edits', deps.auth, notOffered('Editing videos (POST /v1/videos/edits)'));
  api.router.post('/v1/videos/extensions', deps.auth, notOffered('Extending videos (POST /v1/videos/extensions)'));
  api.router.post('/v1/videos/characters', deps.auth, notOffered('Characters (POST /v1/videos/characters)'));
  api.router.get('/v1/videos/characters/:id', deps.auth, notOffered('Characters (GET /v1/videos/characters/{id})'));
  api.router.post('/v1/videos/:id/remix', deps.auth, notOffered('Remixing videos (POST /v1/videos/{id}/remix)'));

  api.route(openaiListVideos, deps.readAuth, async ({ query: q }, req, res) => {
    // Any string is a valid `after` (as the document says); one that names no video of this list is a 404.
    if (q.after !== undefined && !isUuid(q.after)) {
      throw notFound(
        'job_not_found',
        'after names no video of this workspace (give the id of the last video of the previous page)',
        'after',
      );
    }
    const page = await deps.lifecycle.list(principalOf(res), { limit: q.limit, after: q.after, order: q.order });
    const data = page.jobs.map(presentOpenAiVideo);
    sendJsonConditionally(req, res, openAiPage(data, page.has_more));
  });

  api.route(openaiRetrieveVideo, deps.jobReadAuth, async ({ params }, req, res) => {
    const job = deps.jobs.found(principalOf(res), params.id, foundWithKey<VideoJobRecord>(res));
    res.locals['jobId'] = job.job_id;
    sendJsonConditionally(req, res, presentOpenAiVideo(job));
  });

  api.route(openaiDeleteVideo, deps.auth, deps.limit, deleteVideoHandler(deps));
  api.route(openaiDownloadVideoContent, deps.auth, downloadContentHandler(deps));

  return api;
}
