// One HTTP attempt of a webhook delivery. The target is resolved and checked (./target-policy.ts),
// then the socket connects to that checked address only: the agent's `lookup` answers it instead of
// asking DNS again, while the URL's host name still goes in the Host header and, for https, in SNI
// and the certificate check. Limits: one overall timeout, redirects never followed (a 3xx is a
// failed attempt), at most a few KiB of the answer read, no connection reuse.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { withoutTracePropagation } from '../telemetry/index.js';
import {
  hostOf,
  parseWebhookUrl,
  resolveWebhookTarget,
  systemResolver,
  WebhookTargetError,
  type Resolver,
  type ResolvedAddress,
  type TargetPolicy,
} from './target-policy.js';

export const WEBHOOK_ATTEMPT_TIMEOUT_MS = 10_000;
export const WEBHOOK_RESPONSE_BYTES_MAX = 4 * 1024;
const USER_AGENT = 'video-voice-api-webhooks/1';

export interface WebhookAttemptResult {
  succeeded: boolean;
  /** The receiver's HTTP status; null when none was received. */
  http_status: number | null;
  /** Why the attempt failed, in a few words (null when it succeeded). */
  error: string | null;
  duration_ms: number;
}

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  policy: TargetPolicy;
  resolver?: Resolver;
  timeout_ms?: number;
  response_bytes_max?: number;
}

/**
 * A request to `url` that connects to the address already checked (no second DNS answer), its name
 * still in the Host header and, for https, in SNI and the certificate check; no connection reuse.
 */
export function pinnedRequest(
  url: URL,
  target: ResolvedAddress,
  method: string,
  headers: Record<string, string>,
  signal?: AbortSignal,
): http.ClientRequest {
  const send = url.protocol === 'https:' ? https.request : http.request;
  return send({
    protocol: url.protocol,
    host: hostOf(url),
    port: url.port || undefined,
    path: url.pathname + url.search,
    method,
    headers,
    lookup: pinnedLookup(target),
    agent: false,
    ...(signal ? { signal } : {}),
  });
}

/** A `lookup` that answers the address already checked, in whichever form the caller asks for. */
function pinnedLookup(target: ResolvedAddress): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address: target.address, family: target.family }]);
    else callback(null, target.address, target.family);
  }) as LookupFunction;
}

export async function sendWebhook(req: WebhookRequest): Promise<WebhookAttemptResult> {
  const started = process.hrtime.bigint();
  const elapsed = () => Math.round(Number(process.hrtime.bigint() - started) / 1e6);
  const timeout_ms = req.timeout_ms ?? WEBHOOK_ATTEMPT_TIMEOUT_MS;
  const bytes_max = req.response_bytes_max ?? WEBHOOK_RESPONSE_BYTES_MAX;
  let url: URL;
  let target: ResolvedAddress;
  try {
    url = parseWebhookUrl(req.url, req.policy);
    target = await resolveWebhookTarget(url, req.policy, req.resolver ?? systemResolver);
  } catch (err) {
    if (err instanceof WebhookTargetError)
      return { succeeded: false, http_status: null, error: `refused: ${err.message}`, duration_ms: elapsed() };
    throw err;
  }
  const body = Buffer.from(req.body, 'utf8');
  return new Promise<WebhookAttemptResult>((resolve) => {
    let settled = false;
    const finish = (r: Omit<WebhookAttemptResult, 'duration_ms'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve({ ...r, duration_ms: elapsed() });
    };
    // A customer's server gets nothing of our traces.
    const request = withoutTracePropagation(() =>
      pinnedRequest(url, target, 'POST', {
        ...req.headers,
        'content-type': 'application/json',
        'content-length': String(body.length),
        'user-agent': USER_AGENT,
      }),
    );
    const timer = setTimeout(
      () => finish({ succeeded: false, http_status: null, error: `timeout: no answer within ${timeout_ms} ms` }),
      timeout_ms,
    );
    request.on('error', (err: NodeJS.ErrnoException) =>
      finish({ succeeded: false, http_status: null, error: `connection failed: ${err.code ?? err.message}` }),
    );
    request.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const outcome = (): Omit<WebhookAttemptResult, 'duration_ms'> =>
        status >= 200 && status <= 299
          ? { succeeded: true, http_status: status, error: null }
          : {
              succeeded: false,
              http_status: status,
              error: status >= 300 && status <= 399 ? `redirect (${status}) not followed` : `HTTP ${status}`,
            };
      // Read at most bytes_max of the answer (nothing is kept), then close.
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= bytes_max) finish(outcome());
      });
      res.on('end', () => finish(outcome()));
      res.on('error', () => finish(outcome()));
    });
    request.end(body);
  });
}
