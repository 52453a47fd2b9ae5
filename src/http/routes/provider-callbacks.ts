// POST /v2/provider-callbacks/{backend}/{job_id}: where fal and Replicate call back when a job's operation
// ends. No API key: the provider's signature is the authentication, checked over the raw body by the
// backend's adapter (verifyCallback). A verified callback is only a nudge: the job's operation is polled at
// once (nudgeJob), and that poll is the source of truth, so a repeated or replayed callback changes
// nothing twice and one for an unknown or finished job changes nothing at all.
//
//   200 {"received": true}   verified (whatever the job's state)
//   401 invalid_signature    verification failed: nothing changed
//   404 provider_not_found   no such backend here, or one that never calls back
//   413 request_too_large    body above PROVIDER_CALLBACK_MAX_BODY_BYTES
//   503                      the provider's keys (fal's JWKS, Replicate's secret) or the database are
//                            unreachable: the provider delivers the callback again later
import express, { Router } from 'express';
import { ApiError, notFound } from '../../errors.js';
import { IMAGE_MAX_BYTES } from '../schemas.js';
import { CallbackRejected, ProviderError, type VideoProvider } from '../../providers/video/types.js';

/**
 * Largest callback body read. Replicate's callback is the whole prediction, its `input` included, and a
 * job's first and last frames travel there as data: URIs (4/3 of their bytes); fal's carries the output
 * (URLs). Anything larger is refused before verification.
 */
export const PROVIDER_CALLBACK_MAX_BODY_BYTES = Math.ceil((2 * IMAGE_MAX_BYTES * 4) / 3) + 1024 * 1024;

/** A job id as the service makes them (a UUID): anything else cannot be one of ours. */
const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The URL a provider is given to call back for a job: PUBLIC_BASE_URL (in development the API's own address). */
export function providerCallbackUrl(base_url: string, backend: string, job_id: string): string {
  return `${base_url.replace(/\/+$/, '')}/v2/provider-callbacks/${encodeURIComponent(backend)}/${encodeURIComponent(job_id)}`;
}

export interface ProviderCallbackDeps {
  /** The adapter of a backend configured here (undefined: not configured). */
  providerFor: (backend: string) => VideoProvider | undefined;
  /** Has the job's operation polled at once (the poll decides what, if anything, changes). */
  nudgeJob: (job_id: string, backend: string) => Promise<void>;
}

export function providerCallbackRoutes(deps: ProviderCallbackDeps): Router {
  const r = Router();
  const rawBody = express.raw({ type: () => true, limit: PROVIDER_CALLBACK_MAX_BODY_BYTES });
  r.post('/v2/provider-callbacks/:backend/:job_id', rawBody, async (req, res) => {
    const backend = String(req.params['backend']);
    const job_id = String(req.params['job_id']);
    const provider = deps.providerFor(backend);
    if (!provider?.verifyCallback) throw notFound('provider_not_found', `no provider "${backend}" calls back here`, 'backend');
    const raw_body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    try {
      await provider.verifyCallback({ headers: req.headers, raw_body });
    } catch (err) {
      if (err instanceof CallbackRejected) throw new ApiError(401, 'authentication_error', 'invalid_signature', `the callback failed verification: ${err.message}`);
      if (err instanceof ProviderError) {
        throw new ApiError(503, 'api_error', 'service_unavailable', `the callback cannot be verified right now (${err.message}); deliver it again later`, null, { 'Retry-After': '30' });
      }
      throw err;
    }
    res.locals['jobId'] = job_id; // for the request log
    // Not one of our ids: acknowledged, nothing to nudge (a verified callback is never refused, or the
    // provider would keep delivering it).
    if (JOB_ID.test(job_id)) await deps.nudgeJob(job_id, backend);
    res.json({ received: true });
  });
  return r;
}
