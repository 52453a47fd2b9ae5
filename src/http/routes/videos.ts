// Video jobs: create, status, list, cancel, delete (contract.md 4, 7). Parse, call the service, present.
import { Router, type RequestHandler } from 'express';
import { CreateVideoBody, IMAGE_MAX_BYTES, idempotencyKeyOf, ListVideoJobsQuery } from '../schemas.js';
import { fromZodError } from '../errors.js';
import type { VideoJobLifecycle } from '../../services/video-job-lifecycle.js';
import { JSON_BODY_LIMIT_BYTES, jsonBodyParser } from '../json-body.js';
import { principalOf } from '../auth.js';
import { presentVideoJob } from '../presenters.js';
import type { VideoJobsService } from '../../services/video-jobs.js';
import type { DownloadUrlSigner } from '../../storage/signed-urls.js';
import { baseUrlOf } from '../base-url.js';

/** Room for two images (image, lastFrame) at IMAGE_MAX_BYTES in base64, plus the rest of a request. */
export const VIDEO_CREATE_BODY_LIMIT_BYTES = 2 * 4 * Math.ceil(IMAGE_MAX_BYTES / 3) + JSON_BODY_LIMIT_BYTES;
/** Creates with a body over JSON_BODY_LIMIT_BYTES (images) in progress at once, per API process. */
export const VIDEO_CREATE_MAX_CONCURRENT_LARGE_BODIES = 8;

export function videoRoutes(deps: {
  auth: RequestHandler;
  limit: RequestHandler;
  jobs: VideoJobsService;
  lifecycle: VideoJobLifecycle;
  downloadUrls: DownloadUrlSigner;
  publicBaseUrl: string | undefined;
}): Router {
  const r = Router();
  const createBody = jsonBodyParser({ limit_bytes: VIDEO_CREATE_BODY_LIMIT_BYTES, max_concurrent_large_bodies: VIDEO_CREATE_MAX_CONCURRENT_LARGE_BODIES });

  r.post('/v2/videos/generations', deps.auth, deps.limit, createBody, async (req, res) => {
    const body = CreateVideoBody.parse(req.body);
    const idempotencyKey = idempotencyKeyOf(req);
    const job = await deps.jobs.create(principalOf(res), body, idempotencyKey);
    res.locals['jobId'] = job.job_id; // for the request log
    const location = `/v2/videos/generations/${job.job_id}`;
    res.status(202).location(location).json(await presentVideoJob(job, deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  });

  r.get('/v2/videos/generations', deps.auth, async (req, res) => {
    const q = ListVideoJobsQuery.safeParse(req.query);
    if (!q.success) throw fromZodError(q.error);
    const page = await deps.lifecycle.list(principalOf(res), q.data);
    const baseUrl = baseUrlOf(req, deps.publicBaseUrl);
    res.json({ object: 'list', data: await Promise.all(page.jobs.map((job) => presentVideoJob(job, deps.downloadUrls, baseUrl))), has_more: page.has_more });
  });

  r.post('/v2/videos/generations/:id/cancel', deps.auth, deps.limit, async (req, res) => {
    const job = await deps.lifecycle.cancel(principalOf(res), String(req.params['id']));
    res.locals['jobId'] = job.job_id;
    res.json(await presentVideoJob(job, deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  });

  r.delete('/v2/videos/generations/:id', deps.auth, deps.limit, async (req, res) => {
    res.locals['jobId'] = String(req.params['id']);
    res.json(await deps.lifecycle.delete(principalOf(res), String(req.params['id'])));
  });

  r.get('/v2/videos/generations/:id', deps.auth, async (req, res) => {
    const job = await deps.jobs.get(principalOf(res), String(req.params['id']));
    res.locals['jobId'] = job.job_id; // for the request log
    res.json(await presentVideoJob(job, deps.downloadUrls, baseUrlOf(req, deps.publicBaseUrl)));
  });

  return r;
}
