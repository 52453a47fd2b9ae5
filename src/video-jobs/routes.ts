// Video jobs: create, status, list, cancel, delete. Each operation's contract, then its handler:
// parse, call the service, present.
import type { RequestHandler } from 'express';
import { z } from 'zod';
import {
  CreateVideoBody,
  IMAGE_BYTES_MAX,
  ListVideoJobsQuery,
  VideoJob,
  VideoJobDeleted,
  VideoJobList,
  VIDEO_CREATE_BODY_BYTES_MAX,
  VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX,
} from './schemas.js';
import { ApiRouter, bareJsonSchema, bytesText, header, json, type RouteContract } from '../http/openapi.js';
import { videoBodyExample, videoBodySchema } from '../models/openapi-bodies.js';
import { videoDescriptorOf } from '../providers/registry.js';
import type { VideoJobLifecycle } from './lifecycle.js';
import { jsonBodyParser } from '../http/json-body.js';
import { foundWithKey, principalOf } from '../http/auth.js';
import { presentVideoJob } from './present.js';
import type { VideoJobsService } from './service.js';
import type { VideoJobRecord } from './records.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import { baseUrlOf } from '../http/base-url.js';
import { READS_BUSY } from '../http/read-gate.js';
import { CONDITIONAL_HEADERS, IF_NONE_MATCH_PARAMETER, NOT_MODIFIED_RESPONSE, sendJsonConditionally } from '../http/conditional.js';

const JOB_ID = z.object({ id: z.string().describe('The job id.') });
/** The simulator's `parameters.simulate` (its descriptor's), stated in the variants of the models it serves. */
const SIMULATE_JSON_SCHEMA = bareJsonSchema(videoDescriptorOf('simulator').capabilities.parameters!.schema, 'input') as Parameters<
  typeof videoBodySchema
>[2];

const createVideoGeneration = {
  method: 'post',
  path: '/v2/videos/generations',
  operationId: 'createVideoGeneration',
  tag: 'Videos',
  summary: 'Create a video generation job',
  description:
    'Validates the request against the model (GET /v2/models), charges the estimated cost (n videos at ' +
    'the model price for the resolution and audio setting) and starts the job. ' +
    'Image to video: `image` (the first frame) and, with it, `lastFrame`, each `{"bytesBase64Encoded", ' +
    '"mimeType"}`, for models with supports_image / supports_last_frame. ' +
    'A field the model does not support is a 400 naming it. ' +
    'Poll the job at the `Location` URL. With an `Idempotency-Key`, a retry from the same workspace returns the same job and charges once.',
  security: 'apiKey',
  idempotent: true,
  body: {
    component: 'CreateVideoBody',
    schema: CreateVideoBody,
    bytes_max: VIDEO_CREATE_BODY_BYTES_MAX,
    example: videoBodyExample,
    // One variant per model served here, with its limits and inputs.
    override: (generated, ctx) => videoBodySchema(generated, ctx, SIMULATE_JSON_SCHEMA),
  },
  responses: {
    '202': json(VideoJob, 'Accepted: the job, pending.', { Location: header('The job-status URL, /v2/videos/generations/{id}.') }),
  },
  errors: {
    400: undefined,
    402: undefined,
    403: undefined,
    404: 'Unknown model (model_not_found, `param: model`).',
    409: undefined,
    413:
      `The JSON body exceeds ${bytesText(VIDEO_CREATE_BODY_BYTES_MAX)} (request_too_large), or an image ` +
      `exceeds ${bytesText(IMAGE_BYTES_MAX)} decoded (image_too_large, \`param\` naming it).`,
    429:
      'Rate limited (per API key; rate_limited), this key already has 2 requests with images in progress ' +
      '(too_many_concurrent_uploads), or the workspace already has its limit of pending jobs ' +
      '(too_many_pending_jobs; nothing charged).',
    503:
      'No video provider is configured for the model (provider_not_configured), too many requests with images are in ' +
      'progress (server_busy), or the job could not be accepted in time, e.g. while the workflow service is unreachable ' +
      '(service_unavailable, temporarily_unavailable; nothing charged). With Retry-After.',
  },
} satisfies RouteContract;

const listVideoGenerations = {
  method: 'get',
  path: '/v2/videos/generations',
  operationId: 'listVideoGenerations',
  tag: 'Videos',
  summary: "List this workspace's video generation jobs",
  description:
    'Newest first, a page at a time: ask again with `after` = the `id` of the last job of a page while `has_more`. Deleted jobs are not listed. ' +
    'One read answers up to 100 jobs: to follow many jobs, list `status=pending` rather than reading each job (better still, subscribe to webhooks). ' +
    'With `If-None-Match`, an unchanged page is a 304.',
  security: 'apiKey',
  requestParams: { query: ListVideoJobsQuery },
  parameters: [IF_NONE_MATCH_PARAMETER],
  responses: { '200': json(VideoJobList, 'A page of jobs.', CONDITIONAL_HEADERS), '304': NOT_MODIFIED_RESPONSE },
  errors: {
    400: 'Invalid `limit` (1 to 100), `status` or `after` (not a job id); `error.param` names it.',
    404: '`after` names no job of this workspace (job_not_found, `param: after`).',
    503: READS_BUSY,
  },
} satisfies RouteContract;

const cancelVideoGeneration = {
  method: 'post',
  path: '/v2/videos/generations/{id}/cancel',
  operationId: 'cancelVideoGeneration',
  tag: 'Videos',
  summary: 'Cancel a pending video generation job',
  description:
    "Stops the job: the provider's operation is cancelled where the provider allows it, and the job is " +
    'refunded in full and ends `failed` with `error.code` `cancelled`. ' +
    'A job that has finished, or is settling (its videos are being delivered), cannot be cancelled: it is ' +
    'either charged for what it delivered or cancelled and refunded, never both.',
  security: 'apiKey',
  requestParams: { path: JOB_ID },
  responses: { '200': json(VideoJob, 'The job, now failed (cancelled) and refunded.') },
  errors: {
    404: 'No such job in this workspace (job_not_found).',
    409: 'The job has finished or is settling (job_not_cancellable).',
    429: undefined,
    503: 'The job could not be reached in time (the cancel may still take effect: look at the job).',
  },
} satisfies RouteContract;

const deleteVideoGeneration = {
  method: 'delete',
  path: '/v2/videos/generations/{id}',
  operationId: 'deleteVideoGeneration',
  tag: 'Videos',
  summary: 'Delete a finished video generation job',
  description:
    'Deletes the stored videos (their URLs stop working) and the job, which is a 404 from then on. The ledger keeps its entries.',
  security: 'apiKey',
  requestParams: { path: JOB_ID },
  responses: { '200': json(VideoJobDeleted, 'Deleted.') },
  errors: {
    404: 'No such job in this workspace (job_not_found).',
    409: 'The job is pending: cancel it first (job_pending).',
    429: undefined,
  },
} satisfies RouteContract;

const getVideoGeneration = {
  method: 'get',
  path: '/v2/videos/generations/{id}',
  operationId: 'getVideoGeneration',
  tag: 'Videos',
  summary: 'Get a video generation job',
  description:
    "The job, with signed video URLs once succeeded. A job of another workspace is a 404. Answered from the job's record, which its workflow keeps current. " +
    'With `If-None-Match` (the `ETag` of an earlier answer), a job in which nothing changed is a 304 with no body. ' +
    'Prefer webhooks, then the list (`status=pending`), to reading each job in turn.',
  security: 'apiKey',
  requestParams: { path: JOB_ID },
  parameters: [IF_NONE_MATCH_PARAMETER],
  responses: { '200': json(VideoJob, 'The job.', CONDITIONAL_HEADERS), '304': NOT_MODIFIED_RESPONSE },
  errors: { 404: 'No such job in this workspace (job_not_found).', 503: READS_BUSY },
} satisfies RouteContract;

export function videoRoutes(deps: {
  auth: RequestHandler;
  /** Lists of jobs: `auth` behind the process's gate of job reads (../http/read-gate.ts). */
  readAuth: RequestHandler;
  /** A job's status read: the gate, then the API key and the job in one query (foundWithKey). */
  jobReadAuth: RequestHandler;
  limit: RequestHandler;
  jobs: VideoJobsService;
  lifecycle: VideoJobLifecycle;
  downloadUrls: DownloadUrlSigner;
  publicBaseUrl: string | undefined;
}): ApiRouter {
  const api = new ApiRouter();
  const createBody = jsonBodyParser({
    bytes_max: VIDEO_CREATE_BODY_BYTES_MAX,
    concurrent_large_bodies_max: VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX,
  });

  api.route(createVideoGeneration, deps.auth, deps.limit, createBody, async ({ body, idempotencyKey }, req, res) => {
    const job = await deps.jobs.create(principalOf(res), body, idempotencyKey);
    res.locals['jobId'] = job.job_id; // for the request log
    const location = `/v2/videos/generations/${job.job_id}`;
    res
      .status(202)
      .location(location)
      .json(await presentVideoJob(job, deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  });

  api.route(listVideoGenerations, deps.readAuth, async ({ query }, req, res) => {
    const page = await deps.lifecycle.list(principalOf(res), query);
    const baseUrl = baseUrlOf(req, deps.publicBaseUrl);
    sendJsonConditionally(req, res, {
      object: 'list',
      data: await Promise.all(page.jobs.map((job) => presentVideoJob(job, deps.downloadUrls, baseUrl))),
      has_more: page.has_more,
    });
  });

  api.route(cancelVideoGeneration, deps.auth, deps.limit, async ({ params }, req, res) => {
    const job = await deps.lifecycle.cancel(principalOf(res), params.id);
    res.locals['jobId'] = job.job_id;
    res.json(await presentVideoJob(job, deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  });

  api.route(deleteVideoGeneration, deps.auth, deps.limit, async ({ params }, _req, res) => {
    res.locals['jobId'] = params.id;
    res.json(await deps.lifecycle.delete(principalOf(res), params.id));
  });

  api.route(getVideoGeneration, deps.jobReadAuth, async ({ params }, req, res) => {
    const job = deps.jobs.found(principalOf(res), params.id, foundWithKey<VideoJobRecord>(res));
    res.locals['jobId'] = job.job_id; // for the request log
    sendJsonConditionally(req, res, await presentVideoJob(job, deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  });

  return api;
}
