// POST /v2/provider-callbacks/{backend}/{job_id}: where fal and Replicate call back when a job's operation
// ends. No API key: the provider's signature is the authentication, checked over the raw body by the
// backend's adapter (verifyCallback). A verified callback is only a nudge: the job's operation is polled
// (nudgeJob) as soon as the backend's pacing allows, and that poll is the source of truth; a callback
// about a request that is not one of the job's changes nothing, nor does a repeated delivery.
//
// Anyone can send to this route, so everything is checked that can be before the body is read, in this
// order: the sender's rate (per source address), the backend, the body's encoding (compressed bodies are
// refused, never inflated), the signature headers (present, well formed, recent, our account), the
// declared length against the backend's own body limit; then a slot among the callback reads in
// progress (per process, and per source address) is taken, and the body is read within a time limit.
// A refusal before the body is read closes the connection, so what was not read is never received.
//
//   200 {"received": true}    verified (a repeated delivery, or one for a settled or unknown job, too)
//   401 invalid_signature     verification failed, or not about one of this job's requests: nothing changed
//   404 provider_not_found    no such backend here, or one that never calls back
//   408 request_timeout       the body did not arrive within PROVIDER_CALLBACK_LIMITS.read_timeout_ms
//   413 request_too_large     body above the backend's limit (its adapter's callbackReception.body_bytes_max)
//   415 unsupported_encoding  a Content-Encoding other than identity
//   429 rate_limited          more than per_source_per_minute callbacks from one address (Retry-After), or
//                             too_many_concurrent_uploads: more than reads_per_source_max bodies being read
//   503                       too many callback bodies being read at once (server_busy), or the provider's
//                             keys (fal's JWKS, Replicate's secret) or the database are unreachable: the
//                             provider delivers the callback again later (Retry-After)
import type { IncomingHttpHeaders } from 'node:http';
import express, { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { ApiError, fromZodError, notFound } from '../errors.js';
import { CallbackRejected, ProviderError, type VerifiedCallback, type VideoProvider } from '../providers/video/types.js';
import { inFlightLimit } from '../http/in-flight.js';
import { rateLimit } from '../http/rate-limit.js';
import { isUuid } from '../ids.js';
import { PROVIDER_CALLBACK_LIMITS, type ProviderCallbackLimits } from './callbacks.js';

/** What a verified callback did to its job. */
export type CallbackNudge = 'nudged' | 'unchanged' | 'not_this_job';

export interface CallbackForJob {
  job_id: string;
  backend: string;
  delivery: VerifiedCallback;
  /** Whether the callback is about one of the requests of the job's recorded operation. */
  concerns: (operation_id: string) => boolean;
}

export interface ProviderCallbackDeps {
  /** The adapter of a backend configured here (undefined: not configured). */
  providerFor: (backend: string) => VideoProvider | undefined;
  /**
   * Has the job's operation polled as soon as its pacing allows, once per delivery ('unchanged': a
   * repeated delivery, or no job waiting on that backend), unless the callback is not about it.
   */
  nudgeJob: (callback: CallbackForJob) => Promise<CallbackNudge>;
  limits?: Partial<ProviderCallbackLimits>;
}

/**
 * What a callback's source is counted as, from the connection's peer address (behind a proxy, the
 * proxy's): an IPv4 address itself (also when IPv4-mapped), an IPv6 address by its /64, since one host
 * is given a whole /64 and could otherwise send from a new address each time.
 */
export function callbackSourceOf(address: string | undefined): string {
  if (!address) return 'unknown';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (!address.includes(':')) return address;
  const [head = '', tail] = address.replace(/%.*$/, '').split('::');
  const groupsOf = (part: string) => (part ? part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])) : []);
  const first = groupsOf(head);
  const groups =
    tail === undefined
      ? first
      : [...first, ...Array<string>(Math.max(0, 8 - first.length - groupsOf(tail).length)).fill('0'), ...groupsOf(tail)];
  return `${groups
    .slice(0, 4)
    .map((g) => (parseInt(g, 16) || 0).toString(16))
    .join(':')}::/64`;
}

const sourceOf = (req: Request): string => callbackSourceOf(req.socket.remoteAddress);

/** What of a callback's request is read before its body: its path and the headers the route checks itself. */
const CallbackHead = z
  .object({
    params: z.object({ backend: z.string(), job_id: z.string() }),
    headers: z.object({
      // Absent: identity; named in any case, with blanks around it.
      'content-encoding': z
        .string()
        .default('identity')
        .transform((encoding) => encoding.trim().toLowerCase()),
      // What is no number declares no length (Node refuses such a request before it gets here).
      'content-length': z
        .string()
        .optional()
        .transform((declared) => (declared === undefined ? undefined : Number(declared))),
    }),
  })
  .transform(({ params, headers }) => ({
    ...params,
    encoding: headers['content-encoding'],
    declared_bytes: headers['content-length'],
  }));
type CallbackHead = z.output<typeof CallbackHead>;

function callbackHead(req: Request): CallbackHead {
  const parsed = CallbackHead.safeParse({ params: req.params, headers: req.headers });
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/** The adapter that takes the callback, once the headers allow its body to be read: else the 404, 415, 401 or 413. */
function receiverOf(deps: ProviderCallbackDeps, head: CallbackHead, headers: IncomingHttpHeaders) {
  const provider = deps.providerFor(head.backend);
  const reception = provider?.callbackReception;
  if (!provider?.verifyCallback || !reception)
    throw notFound('provider_not_found', `no provider "${head.backend}" calls back here`, 'backend');
  if (head.encoding !== 'identity')
    throw new ApiError(
      415,
      'invalid_request_error',
      'unsupported_encoding',
      `a provider callback is sent without Content-Encoding, not "${head.encoding.slice(0, 40)}"`,
    );
  try {
    reception.checkHeaders(headers);
  } catch (err) {
    throw rejected(err);
  }
  if (head.declared_bytes !== undefined && head.declared_bytes > reception.body_bytes_max) {
    throw new ApiError(413, 'invalid_request_error', 'request_too_large', `request body exceeds ${reception.body_bytes_max} bytes`);
  }
  return { provider, body_bytes_max: reception.body_bytes_max };
}

/**
 * Reads a callback's raw body (never inflated, at most `body_bytes_max`), then calls `done`; a body
 * still arriving after `timeout_ms` is answered 408 and the connection goes (its slot with it).
 */
function bodyReader(timeout_ms: number) {
  const parsers = new Map<number, RequestHandler>();
  return (body_bytes_max: number, req: Request, res: Response, done: (err?: unknown) => void) => {
    let parser = parsers.get(body_bytes_max);
    if (!parser) parsers.set(body_bytes_max, (parser = express.raw({ type: () => true, limit: body_bytes_max, inflate: false })));
    const timer = setTimeout(() => {
      if (!res.headersSent)
        res.status(408).json({
          error: {
            type: 'invalid_request_error',
            code: 'request_timeout',
            message: 'the callback body did not arrive in time',
            param: null,
          },
        });
      req.destroy();
    }, timeout_ms);
    res.once('close', () => clearTimeout(timer));
    void parser(req, res, (err?: unknown) => {
      clearTimeout(timer);
      if (!err && !res.headersSent) res.removeHeader('Connection');
      done(err);
    });
  };
}

/** The delivery, verified by the adapter over the raw body: else the 401, or the 503 while its keys are unreachable. */
async function verified(provider: VideoProvider, headers: IncomingHttpHeaders, raw_body: Buffer): Promise<VerifiedCallback> {
  try {
    return await provider.verifyCallback!({ headers, raw_body });
  } catch (err) {
    if (err instanceof ProviderError) {
      throw new ApiError(
        503,
        'api_error',
        'service_unavailable',
        `the callback cannot be verified right now (${err.message}); deliver it again later`,
        null,
        { 'Retry-After': '30' },
      );
    }
    throw rejected(err);
  }
}

export function providerCallbackRoutes(deps: ProviderCallbackDeps): Router {
  const limits = { ...PROVIDER_CALLBACK_LIMITS, ...deps.limits };
  const perSource = rateLimit(limits.per_source_per_minute, (req) => sourceOf(req));
  const reads = inFlightLimit(limits.reads_max, 'provider callbacks being read', limits.reads_per_source_max, 'this address');
  const readBody = bodyReader(limits.read_timeout_ms);

  /** Verifies the body read and nudges the job it names. */
  const received = async (head: CallbackHead, provider: VideoProvider, req: Request, res: Response) => {
    const { job_id, backend } = head;
    const delivery = await verified(provider, req.headers, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0));
    res.locals['jobId'] = job_id; // for the request log
    // Not one of our ids (a job id is a UUID): acknowledged, nothing to nudge (a verified callback is never refused, or the
    // provider would keep delivering it).
    if (isUuid(job_id)) {
      const concerns = (operation_id: string) => provider.callbackConcerns?.(operation_id, delivery) ?? false;
      if ((await deps.nudgeJob({ job_id, backend, delivery, concerns })) === 'not_this_job') {
        throw new ApiError(401, 'authentication_error', 'invalid_signature', "the callback is not about one of this job's requests");
      }
    }
    res.json({ received: true });
  };

  const r = Router();
  r.post(
    '/v2/provider-callbacks/:backend/:job_id',
    // Until its body has been read, any refusal closes the connection.
    (_req, res, next) => {
      res.set('Connection', 'close');
      next();
    },
    perSource,
    (req, res, next) => {
      const head = callbackHead(req);
      const { provider, body_bytes_max } = receiverOf(deps, head, req.headers);
      reads.acquire(res, sourceOf(req));
      readBody(body_bytes_max, req, res, (err) => {
        if (err) return next(err);
        if (!res.headersSent) received(head, provider, req, res).catch(next);
      });
    },
  );
  return r;
}

function rejected(err: unknown): unknown {
  if (err instanceof CallbackRejected)
    return new ApiError(401, 'authentication_error', 'invalid_signature', `the callback failed verification: ${err.message}`);
  return err;
}
