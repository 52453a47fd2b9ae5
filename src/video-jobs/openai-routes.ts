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
import { ApiError, invalidParam, notFound } from '../errors.js';
import { foundWithKey, principalOf } from '../http/auth.js';
import { IMAGE_BYTES_MAX } from './schemas.js';
import { jsonBodyParser } from '../http/json-body.js';
import { ApiRouter, bytesText, header, json, type ContractHandler, type RouteContract } from '../http/openapi.js';
import { videoBodyExample } from '../models/openapi-bodies.js';
import { OpenAiVideo, OpenAiVideoDeleted, OpenAiVideoList } from './openai-schemas.js';
import { multipartForm } from '../http/multipart.js';
import { sniffImage } from '../media/image-sniff.js';
import { videoContentGone, type Thumbnails } from '../media/thumbnails.js';
import type { Storage } from '../storage/local.js';
import { isUuid } from '../ids.js';
import type { VideoJobsService } from './service.js';
import type { VideoJobRecord } from './records.js';
import type { VideoJobLifecycle } from './lifecycle.js';
import { READS_BUSY } from '../http/read-gate.js';
import { CONDITIONAL_HEADERS, IF_NONE_MATCH_PARAMETER, NOT_MODIFIED_RESPONSE, sendJsonConditionally } from '../http/conditional.js';
import type { VideoJobState } from '../../workflows/messages.js';
import { VIDEO_CREATE_BODY_BYTES_MAX, VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX } from './schemas.js';
import { INSUFFICIENT_CREDITS_402, notOffered, OPENAI_OPERATION } from '../http/openai/errors.js';
import { openAiPage } from '../http/openai/page.js';
import {
  IMAGE_DATA_URL_CHARS_MAX,
  IMAGE_TYPES,
  MULTIPART_FIELDS,
  MULTIPART_LIMITS,
  OpenAiCreateVideoBody,
  OpenAiCreateVideoForm,
  OpenAiCreateVideoParts,
  OpenAiListVideosQuery,
  STATUS,
  asV1Param,
  openAiCreateVideoInput,
  presentOpenAiVideo,
  toCreateBody,
} from './openai-create.js';

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
