// Prometheus metrics of this process (prom-client): one registry per process, shared by the API and
// the worker when both run in it. Served at GET /metrics by the API, and by `startMetricsServer` in a
// worker-only process. Every label has a bounded set of values. The Temporal SDK's own metrics are
// exported by its runtime on WORKER_METRICS_PORT (src/temporal/worker.ts), not here.
import http from 'node:http';
import { createHash, timingSafeEqual } from 'node:crypto';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ConfigError } from './config-error.js';
import type { Db } from './db/pool.js';

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

export const videoJobsSettledByBackend = new Counter({
  name: 'video_jobs_settled_by_backend_total',
  help: 'Video jobs settled, by outcome, catalog model and backend (none when nothing was submitted)',
  labelNames: ['outcome', 'model', 'backend'] as const,
  registers: [registry],
});

export const videoJobsRefunded = new Counter({
  name: 'video_jobs_refunded_total',
  help: 'Video jobs settled with a refund (in full or a shortfall), by catalog model and backend',
  labelNames: ['model', 'backend'] as const,
  registers: [registry],
});

export const videoProviderErrors = new Counter({
  name: 'video_provider_errors_total',
  help: 'Video provider calls that failed, by backend, operation (submit, poll) and error code (other outside the known set)',
  labelNames: ['backend', 'operation', 'code'] as const,
  registers: [registry],
});

export const videoProviderPollRetries = new Counter({
  name: 'video_provider_poll_retries_total',
  help: 'Failed polls of a video operation retried later (its job waits, until its deadline at most), by backend and reason (passing, credentials, unreadable)',
  labelNames: ['backend', 'reason'] as const,
  registers: [registry],
});

export const videoProviderRetryAfter = new Histogram({
  name: 'video_provider_retry_after_seconds',
  help: 'The wait a video provider asked for (its Retry-After, as honoured) on a passing refusal, by backend and operation',
  labelNames: ['backend', 'operation'] as const,
  buckets: [1, 2, 5, 10, 20, 30, 60],
  registers: [registry],
});

export const reconcilerRuns = new Counter({
  name: 'reconciler_runs_total',
  help: 'Reconciler runs finished by this process',
  registers: [registry],
});

export const reconcilerFindings = new Counter({
  name: 'reconciler_findings_total',
  help: 'What reconciler runs found and repaired: job_restarted, speech_hold_released, speech_hold_captured, webhook_delivery_started, voice_deletion_started',
  labelNames: ['finding'] as const,
  registers: [registry],
});

export const reconcilerStepFailures = new Counter({
  name: 'reconciler_step_failures_total',
  help: 'Reconciler steps (or rows of a step) that failed in a run, by step; the other steps and rows went on',
  labelNames: ['step'] as const,
  registers: [registry],
});

export const ledgerAudits = new Counter({
  name: 'ledger_audits_total',
  help: 'Ledger audits answered by this process, by result (ok, not_ok)',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const ledgerAuditUnaccountedJobs = new Gauge({
  name: 'ledger_audit_unaccounted_jobs',
  help: 'Jobs the last ledger audit of this process could not account for',
  registers: [registry],
});

/** Counts an answered ledger audit (the admin API's) and keeps what it could not account for. */
export function recordLedgerAudit(report: { ok: boolean; unaccounted_jobs: unknown[] }): void {
  ledgerAudits.inc({ result: report.ok ? 'ok' : 'not_ok' });
  ledgerAuditUnaccountedJobs.set(report.unaccounted_jobs.length);
}

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

/** Provider error codes used as label values; any other is counted as `other`. */
const KNOWN_PROVIDER_ERROR_CODES = new Set([
  'rate_limited',
  'provider_timeout',
  'provider_unavailable',
  'provider_unreachable',
  'provider_unauthenticated',
  'provider_permission_denied',
  'provider_auth_failed',
  'provider_payment_required',
  'invalid_request',
  'invalid_response',
  'content_filtered',
  'model_not_supported',
  'not_found',
  'internal_error',
]);

/** Counts one failed provider call and, for a passing refusal that said when to come back, its Retry-After. */
export function observeProviderError(backend: string, operation: 'submit' | 'poll', e: { code: string; retry_after_ms?: number }): void {
  videoProviderErrors.inc({ backend, operation, code: KNOWN_PROVIDER_ERROR_CODES.has(e.code) ? e.code : 'other' });
  if (e.retry_after_ms !== undefined) videoProviderRetryAfter.observe({ backend, operation }, e.retry_after_ms / 1000);
}

export function errorCodeLabel(code: string | null | undefined): string {
  if (!code) return 'none';
  return KNOWN_ERROR_CODES.has(code) ? code : 'other';
}

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Observes one finished HTTP request. `route` is the matched Express route's pattern (e.g.
 * `/v2/videos/generations/:id`), never the raw path, so label values stay bounded.
 */
/** The property of a RegExp route that holds the path its requests are labelled by. */
export const ROUTE_LABEL = Symbol.for('video-voice-api.routeLabel');

export function observeHttpRequest(
  req: { method: string; baseUrl?: string; route?: { path?: unknown } },
  statusCode: number,
  seconds: number,
): void {
  const p = req.route?.path;
  // A RegExp route (the file downloads) is labelled by the documented path it carries (/v2/files/{key}),
  // else by its readable source.
  const pattern =
    p instanceof RegExp
      ? ((p as RegExp & { [ROUTE_LABEL]?: string })[ROUTE_LABEL] ?? p.source.replace(/^\^/, '').replace(/\$$/, '').replace(/\\\//g, '/'))
      : String(p);
  const route = p === undefined ? 'unmatched' : (req.baseUrl ?? '') + pattern;
  const method = HTTP_METHODS.has(req.method) ? req.method : 'other';
  httpRequestDuration.observe({ method, route, status: String(statusCode) }, seconds);
}

function bearerMatches(header: string | undefined, expectedToken: string): boolean {
  const m = header ? /^Bearer +(\S+) *$/i.exec(header) : null;
  const given = createHash('sha256')
    .update(m?.[1] ?? '')
    .digest();
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
    res.end(
      JSON.stringify({
        error: { type: 'authentication_error', code: 'invalid_metrics_token', message: 'missing or invalid metrics token', param: null },
      }),
    );
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
  /** Whether GET /metrics is served (false: 404, as the API does in production without METRICS_TOKEN); default true. */
  serveMetrics?: boolean;
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
    if (path !== '/metrics' || !read || opts.serveMetrics === false) {
      res.writeHead(404, { 'Content-Type': 'application/json; charset=utf-8' });
      res.end(
        JSON.stringify({
          error: {
            type: 'not_found_error',
            code: 'route_not_found',
            message: opts.serveMetrics === false ? 'no route here' : 'only GET /metrics is served here',
            param: null,
          },
        }),
      );
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
      reject(
        err.code === 'EADDRINUSE' ? new ConfigError(`port ${opts.port} is already in use; set ${opts.portVariable} to a free port`) : err,
      ),
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

/** The database the gauges below read; the latest process pool opened (one per process outside tests). */
let gaugeDb: Db | undefined;
/** How long a scrape waits for a gauge's query; beyond it (or on an error) the gauge keeps its last value. */
const GAUGE_QUERY_TIMEOUT_MS = 2_000;

async function readForGauge<R extends Record<string, unknown>>(sql: string): Promise<R[] | undefined> {
  const db = gaugeDb;
  if (!db) return undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), GAUGE_QUERY_TIMEOUT_MS)));
    const result = await Promise.race([db.query<R>(sql).then((r) => r.rows), timeout]);
    return result;
  } catch {
    // PostgreSQL unreachable: /readyz and the 503s say so; the scrape itself still answers.
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Gauges read from PostgreSQL when scraped (every process with a database serves the same values; take
 * max() across processes): pending jobs by model, those past their deadline by more than a minute (their
 * workflow's timer should have settled them), and webhook deliveries not finished with the age of the
 * oldest. Each gauge runs its own query (prom-client collects the metrics of a scrape concurrently),
 * bounded by GAUGE_QUERY_TIMEOUT_MS.
 */
export function registerDatabaseGauges(db: Db): void {
  gaugeDb = db;
  if (registry.getSingleMetric('video_jobs_pending')) return;
  new Gauge({
    name: 'video_jobs_pending',
    help: 'Video jobs pending, by catalog model',
    labelNames: ['model'] as const,
    registers: [registry],
    async collect() {
      const rows = await readForGauge<{ model: string; n: number }>(
        `SELECT model, count(*)::int AS n FROM video_jobs WHERE status = 'pending' GROUP BY model`,
      );
      if (!rows) return;
      this.reset();
      for (const row of rows) this.set({ model: row.model }, row.n);
    },
  });
  new Gauge({
    name: 'video_jobs_pending_past_deadline',
    help: 'Video jobs still pending more than a minute after their deadline (VIDEO_JOB_TIMEOUT_MS after creation)',
    registers: [registry],
    async collect() {
      const rows = await readForGauge<{ n: number }>(
        `SELECT count(*)::int AS n FROM video_jobs WHERE status = 'pending' AND deadline_at < now() - interval '1 minute'`,
      );
      if (rows) this.set(rows[0]?.n ?? 0);
    },
  });
  new Gauge({
    name: 'webhook_deliveries_pending',
    help: 'Webhook deliveries recorded and not yet succeeded or given up',
    registers: [registry],
    async collect() {
      const rows = await readForGauge<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`);
      if (rows) this.set(rows[0]?.n ?? 0);
    },
  });
  new Gauge({
    name: 'webhook_delivery_oldest_pending_age_seconds',
    help: 'Age of the oldest webhook delivery not yet finished (0 when none)',
    registers: [registry],
    async collect() {
      const rows = await readForGauge<{ s: number | null }>(
        `SELECT EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS s FROM webhook_deliveries WHERE status = 'pending'`,
      );
      if (rows) this.set(rows[0]?.s ?? 0);
    },
  });
}
