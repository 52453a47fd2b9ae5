// Prometheus metrics of this process (prom-client): one registry per process, shared by the API and
// the worker when both run in it. Served at GET /metrics by the API, and by `startMetricsServer` in a
// worker-only process. Every label has a bounded set of values. The Temporal SDK's own metrics are
// exported by its runtime on WORKER_METRICS_PORT (src/temporal/worker.ts), not here.
import http from 'node:http';
import { createHash, timingSafeEqual } from 'node:crypto';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ConfigError } from './config.js';

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

export const httpRequestDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request latency, by method, route pattern (unmatched for no route) and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
});

export const videoJobsSettled = new Counter({
  name: 'video_jobs_settled_total',
  help: 'Video jobs settled, by outcome and error code (none when succeeded; other for codes outside the known set)',
  labelNames: ['outcome', 'error_code'] as const,
  registers: [registry],
});

export const creditsCharged = new Counter({
  name: 'credits_charged_micro_eur_total',
  help: 'Credits charged (ledger charge entries written by this process), in micro-euros, by kind',
  labelNames: ['kind'] as const,
  registers: [registry],
});

export const creditsRefunded = new Counter({
  name: 'credits_refunded_micro_eur_total',
  help: 'Credits refunded (ledger refund entries written by this process), in micro-euros, by kind',
  labelNames: ['kind'] as const,
  registers: [registry],
});

export const videoProviderPollDuration = new Histogram({
  name: 'video_provider_poll_duration_seconds',
  help: 'Latency of one video provider status poll, by backend and result (running, succeeded, failed, error)',
  labelNames: ['backend', 'result'] as const,
  registers: [registry],
});

export type CreditKind = 'video' | 'speech';

/** Job error codes used as label values; any other code (a provider's own) is counted as `other`. */
const KNOWN_ERROR_CODES = new Set([
  'cancelled',
  'deadline_exceeded',
  'no_videos',
  'storage_failed',
  'submit_failed',
  'poll_failed',
  'generation_failed',
  'provider_not_configured',
  'invalid_output',
  'invalid_request',
  'not_found',
]);

export function errorCodeLabel(code: string | null | undefined): string {
  if (!code) return 'none';
  return KNOWN_ERROR_CODES.has(code) ? code : 'other';
}

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Observes one finished HTTP request. `route` is the matched Express route's pattern (e.g.
 * `/v2/videos/generations/:id`), never the raw path, so label values stay bounded.
 */
export function observeHttpRequest(
  req: { method: string; baseUrl?: string; route?: { path?: unknown } },
  statusCode: number,
  seconds: number,
): void {
  const p = req.route?.path;
  // A RegExp route (the file downloads) is labelled by its readable source: /v2/files/(.+)
  const pattern = p instanceof RegExp ? p.source.replace(/^\^/, '').replace(/\$$/, '').replace(/\\\//g, '/') : String(p);
  const route = p === undefined ? 'unmatched' : (req.baseUrl ?? '') + pattern;
  const method = HTTP_METHODS.has(req.method) ? req.method : 'other';
  httpRequestDuration.observe({ method, route, status: String(statusCode) }, seconds);
}

function bearerMatches(header: string | undefined, expectedToken: string): boolean {
  const m = header ? /^Bearer +(\S+) *$/i.exec(header) : null;
  const given = createHash('sha256').update(m?.[1] ?? '').digest();
  const expected = createHash('sha256').update(expectedToken).digest();
  return m !== null && timingSafeEqual(given, expected);
}

/**
 * Answers a scrape with the registry in Prometheus text format. With a token (METRICS_TOKEN), a
 * request without `Authorization: Bearer <token>` gets a 401 in the API's error shape.
 */
export async function handleMetricsRequest(req: http.IncomingMessage, res: http.ServerResponse, token: string | undefined): Promise<void> {
  if (token !== undefined && !bearerMatches(req.headers.authorization, token)) {
    res.writeHead(401, { 'Content-Type': 'application/json; charset=utf-8', 'WWW-Authenticate': 'Bearer' });
    res.end(JSON.stringify({ error: { type: 'authentication_error', code: 'invalid_metrics_token', message: 'missing or invalid metrics token', param: null } }));
    return;
  }
  const body = await registry.metrics();
  res.writeHead(200, { 'Content-Type': registry.contentType });
  res.end(body);
}

/**
 * A small HTTP server of a worker-only process: GET /metrics (the app's metrics), and, with `ready`, the
 * probes GET /livez (the process answers: 200) and GET /readyz (200 when `ready` resolves true, else 503).
 */
export async function startMetricsServer(opts: {
  port: number;
  host: string;
  token: string | undefined;
  portVariable: string;
  ready?: () => Promise<boolean>;
}): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const read = req.method === 'GET' || req.method === 'HEAD';
    if (read && opts.ready && (path === '/livez' || path === '/readyz')) {
      const answer = (ok: boolean) => {
        res.writeHead(ok ? 200 : 503, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
        res.end(JSON.stringify({ ok }));
      };
      if (path === '/livez') answer(true);
      else opts.ready().then(answer, () => answer(false));
      return;
    }
    if (path !== '/metrics' || !read) {
      res.writeHead(404, { 'Content-Type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify({ error: { type: 'not_found_error', code: 'route_not_found', message: 'only GET /metrics is served here', param: null } }));
      return;
    }
    handleMetricsRequest(req, res, opts.token).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new ConfigError(`port ${opts.port} is already in use; set ${opts.portVariable} to a free port`) : err),
    );
    server.listen(opts.port, opts.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  return {
    url: `http://${opts.host}:${port}/metrics`,
    async close() {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeIdleConnections();
      });
    },
  };
}
