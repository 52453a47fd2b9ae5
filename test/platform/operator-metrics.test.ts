// What an operator alerts on, exported by real processes: an API and a worker-only process (its app
// metrics with the probes /livez and /readyz beside them, and the Temporal SDK's metrics) run real jobs
// on real PostgreSQL and Temporal; the series the alert rules and the dashboard name must all be among
// what they serve. Also: jobs settled and refunded by model and backend, late pending jobs read from
// PostgreSQL, the ledger audit's result, the reconciler's runs, and provider errors with Retry-After.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { freePort } from '../helpers/infra.js';
import { spawn, type ChildProcess } from 'node:child_process';
import pg from 'pg';
import YAML from 'yaml';
import { ADMIN_TOKEN, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { observeProviderError, registerDatabaseGauges, registry } from '../../src/metrics.js';
import { createPool } from '../../src/db/pool.js';
import { describeProviderError } from '../../src/providers/video/provider-errors.js';
import { passingRefusal } from '../../src/providers/video/http.js';

/** Every sample of a Prometheus text exposition: name, labels, value. */
function samples(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}
const valueOf = (text: string, name: string, labels: Record<string, string> = {}) =>
  samples(text)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);

async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  return res.text();
}

/** The metric names in PromQL expressions: every selector in deploy/ is written name{...}. */
function selectorNames(expr: string): string[] {
  return [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)].map((m) => m[1]!);
}
function namesUsedByRulesAndDashboard(): Set<string> {
  const rules = (
    YAML.parse(fs.readFileSync('deploy/prometheus/alerts.yaml', 'utf8')) as { groups: { rules: { expr: string }[] }[] }
  ).groups.flatMap((g) => g.rules);
  const dashboard = JSON.parse(fs.readFileSync('deploy/grafana/video-voice-api.json', 'utf8')) as {
    panels: { targets?: { expr: string }[] }[];
  };
  const exprs = [...rules.map((r) => r.expr), ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))];
  return new Set(exprs.flatMap(selectorNames));
}

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeout_ms = 30_000): Promise<T> {
  const end = Date.now() + timeout_ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    assert.ok(Date.now() < end, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

let stack: Stack;
let worker: ChildProcess;
let workerOutput = '';
let appPort: number;
let sdkPort: number;
let db: pg.Client;

before(async () => {
  stack = await startStack({ worker: false });
  [appPort, sdkPort] = [await freePort(), await freePort()];
  worker = spawn(process.execPath, ['--import', 'tsx', 'src/worker-main.ts'], {
    env: {
      ...process.env,
      ...stack.env,
      LOG_LEVEL: 'info',
      APP_METRICS_PORT: String(appPort),
      WORKER_METRICS_PORT: String(sdkPort),
      RECONCILE_INTERVAL_MS: '1000',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  worker.stdout!.on('data', (b: Buffer) => (workerOutput += b.toString()));
  worker.stderr!.on('data', (b: Buffer) => (workerOutput += b.toString()));
  db = new pg.Client({ connectionString: stack.env['DATABASE_URL'] });
  await db.connect();
});
after(async () => {
  if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
  await db.end();
  await stack.stop();
});

const appUrl = (p: string) => `http://127.0.0.1:${appPort}${p}`;

describe('a worker process answers the probes beside its app metrics', () => {
  test('/livez as soon as it serves, /readyz once its workers run (and the API has /livez too)', async () => {
    await until('the worker to answer /livez', async () => (await fetch(appUrl('/livez')).catch(() => null))?.status === 200, 120_000);
    const ready = await until(
      'the worker to be ready',
      async () => {
        assert.equal(worker.exitCode, null, workerOutput);
        const r = await fetch(appUrl('/readyz'));
        return r.status === 200 && r.json();
      },
      120_000,
    );
    assert.deepEqual(ready, { ok: true });
    assert.ok(workerOutput.includes('"worker running"'), 'ready only once the worker runs');
    assert.equal((await fetch(appUrl('/nope'))).status, 404);
    assert.equal((await http(stack.baseUrl, 'GET', '/livez')).status, 200);
  });
});

describe('jobs, money and backlog', () => {
  test('jobs settled and refunded by model and backend; pending and late jobs; the ledger audit; the reconciler', async () => {
    await until('the worker to be ready', async () => (await fetch(appUrl('/readyz')).catch(() => null))?.status === 200, 120_000);
    const c = await newCustomer(stack, 20);
    // 4 videos asked, 1 delivered: a refunded shortfall. Then a failure (refunded in full).
    const short = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ videos: 1 }, { n: 4 }) });
    assert.equal((await waitForJob(stack, c.key, short.body.id)).status, 'succeeded');
    const failed = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ outcome: 'fail' }, { n: 1 }),
    });
    assert.equal((await waitForJob(stack, c.key, failed.body.id)).status, 'failed');
    const app = await scrape(appUrl('/metrics'));
    const by = { model: 'sim-video-1', backend: 'simulator' };
    assert.equal(valueOf(app, 'video_jobs_settled_by_backend_total', { ...by, outcome: 'succeeded' }), 1);
    assert.equal(valueOf(app, 'video_jobs_settled_by_backend_total', { ...by, outcome: 'failed' }), 1);
    assert.equal(valueOf(app, 'video_jobs_refunded_total', by), 2);

    // A job that waits on its provider is pending; made late in the database, it is counted late.
    const slow = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ delay_ms: 600_000 }, { n: 1 }),
    });
    assert.equal(slow.status, 202);
    let api = await scrape(`${stack.baseUrl}/metrics`);
    assert.equal(valueOf(api, 'video_jobs_pending', { model: 'sim-video-1' }), 1);
    assert.equal(valueOf(api, 'video_jobs_pending_past_deadline'), 0);
    const deadline = (await db.query<{ deadline_at: Date }>('SELECT deadline_at FROM video_jobs WHERE id = $1', [slow.body.id])).rows[0]!
      .deadline_at;
    await db.query(`UPDATE video_jobs SET deadline_at = now() - interval '2 minutes' WHERE id = $1`, [slow.body.id]);
    api = await scrape(`${stack.baseUrl}/metrics`);
    assert.equal(valueOf(api, 'video_jobs_pending_past_deadline'), 1);
    // The gauges read from PostgreSQL are the API's: a worker's scrape runs no query.
    assert.ok(!(await scrape(appUrl('/metrics'))).includes('video_jobs_pending_past_deadline'), 'the worker serves no database gauge');
    await db.query('UPDATE video_jobs SET deadline_at = $2 WHERE id = $1', [slow.body.id, deadline]);
    assert.equal((await http(stack.baseUrl, 'POST', `/v2/videos/generations/${slow.body.id}/cancel`, { token: c.key })).status, 200);
    assert.equal((await waitForJob(stack, c.key, slow.body.id)).error?.code, 'cancelled');
    api = await scrape(`${stack.baseUrl}/metrics`);
    assert.equal(valueOf(api, 'video_jobs_pending', { model: 'sim-video-1' }), 0);
    assert.equal(valueOf(api, 'webhook_deliveries_pending'), 0);
    assert.equal(valueOf(api, 'webhook_delivery_oldest_pending_age_seconds'), 0);

    // The ledger audit, answered by the API, is counted with its result.
    const audit = await http(stack.baseUrl, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
    assert.equal(audit.body.ok, true, JSON.stringify(audit.body));
    api = await scrape(`${stack.baseUrl}/metrics`);
    assert.equal(valueOf(api, 'ledger_audits_total', { result: 'ok' }), 1);
    assert.equal(valueOf(api, 'ledger_audit_unaccounted_jobs'), 0);

    // The reconciler (every second here) counts its runs and what it found, each finding a series.
    const reconciled = await until('a reconciler run', async () => {
      const t = await scrape(appUrl('/metrics'));
      return valueOf(t, 'reconciler_runs_total') >= 1 && t;
    });
    for (const finding of ['job_restarted', 'speech_hold_released', 'webhook_delivery_started', 'voice_deletion_started']) {
      assert.ok(
        samples(reconciled).some((s) => s.name === 'reconciler_findings_total' && s.labels['finding'] === finding),
        finding,
      );
    }
  });

  test('a provider error is counted by backend, operation and code, and a Retry-After by its seconds', async () => {
    observeProviderError('fal', 'submit', describeProviderError(passingRefusal(429, 'fal answered HTTP 429', '7')));
    observeProviderError('fal', 'poll', describeProviderError(passingRefusal(503, 'fal answered HTTP 503', null)));
    observeProviderError('fal', 'poll', { code: 'some_code_of_the_provider' });
    const text = await registry.metrics();
    assert.equal(valueOf(text, 'video_provider_errors_total', { backend: 'fal', operation: 'submit', code: 'rate_limited' }), 1);
    assert.equal(valueOf(text, 'video_provider_errors_total', { backend: 'fal', operation: 'poll', code: 'provider_unavailable' }), 1);
    assert.equal(
      valueOf(text, 'video_provider_errors_total', { backend: 'fal', operation: 'poll', code: 'other' }),
      1,
      'codes outside the known set are other',
    );
    assert.equal(valueOf(text, 'video_provider_retry_after_seconds_count', { backend: 'fal', operation: 'submit' }), 1);
    assert.equal(valueOf(text, 'video_provider_retry_after_seconds_sum', { backend: 'fal', operation: 'submit' }), 7);
    assert.equal(valueOf(text, 'video_provider_retry_after_seconds_bucket', { backend: 'fal', operation: 'submit', le: '5' }), 0);
    assert.equal(valueOf(text, 'video_provider_retry_after_seconds_bucket', { backend: 'fal', operation: 'submit', le: '10' }), 1);
    assert.equal(
      valueOf(text, 'video_provider_retry_after_seconds_count', { backend: 'fal', operation: 'poll' }),
      0,
      'a refusal without Retry-After observes no wait',
    );
  });
});

describe('the series the alert rules and the dashboard use', () => {
  test('are all exported by the API, the worker or the Temporal SDK of a running stack', async () => {
    await until('the worker to be ready', async () => (await fetch(appUrl('/readyz')).catch(() => null))?.status === 200, 120_000);
    // Work for every kind of series: a job (settled, polled, SDK task latencies), a webhook-free run.
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { n: 1 }) });
    assert.equal((await waitForJob(stack, c.key, created.body.id)).status, 'succeeded');
    const audit = await http(stack.baseUrl, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
    assert.equal(audit.body.ok, true, JSON.stringify(audit.body));
    const sources = {
      api: await scrape(`${stack.baseUrl}/metrics`),
      worker: await scrape(appUrl('/metrics')),
      sdk: await scrape(`http://127.0.0.1:${sdkPort}/metrics`),
    };
    const exported = new Set(Object.values(sources).flatMap((t) => samples(t).map((s) => s.name)));
    // Labelled series appear with their first event (a provider error, say); declared by a process
    // (its # TYPE line) is enough for them.
    const declared = new Set(
      Object.values(sources).flatMap((t) =>
        [...t.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap((m) =>
          m[2] === 'histogram' ? [`${m[1]}_bucket`, `${m[1]}_count`, `${m[1]}_sum`] : [m[1]!],
        ),
      ),
    );
    const used = namesUsedByRulesAndDashboard();
    assert.ok(used.size >= 20, [...used].join(' '));
    const missing = [...used].filter((n) => !exported.has(n) && !declared.has(n));
    assert.deepEqual(
      missing,
      [],
      `not exported: ${missing.join(', ')}\nSDK metrics: ${[...new Set(samples(sources.sdk).map((s) => s.name))].join(' ')}`,
    );
    // The Temporal SDK's series the rules use carry the worker's task queue.
    const queue = stack.config.temporal.taskQueue;
    for (const name of [
      'temporal_workflow_task_schedule_to_start_latency_bucket',
      'temporal_activity_schedule_to_start_latency_bucket',
      'temporal_worker_task_slots_available',
    ]) {
      assert.ok(
        samples(sources.sdk).some((s) => s.name === name && s.labels['task_queue'] === queue),
        `${name}{task_queue="${queue}"}`,
      );
    }
  });
});

describe('gauges read from PostgreSQL', () => {
  test('a scrape still answers, within a few seconds, while PostgreSQL is unreachable (the gauges keep their last values)', async () => {
    const before = await registry.metrics();
    const unreachable = createPool('postgresql://nobody@127.0.0.1:1/none', 1);
    registerDatabaseGauges(unreachable);
    try {
      const started = Date.now();
      const text = await registry.metrics();
      assert.ok(Date.now() - started < 5_000, `${Date.now() - started} ms`);
      assert.equal(valueOf(text, 'video_jobs_pending_past_deadline'), valueOf(before, 'video_jobs_pending_past_deadline'));
      assert.match(text, /^# TYPE webhook_deliveries_pending gauge$/m);
    } finally {
      registerDatabaseGauges(stack.db);
      await unreachable.end();
    }
  });
});
