// Metrics and logs: GET /metrics after a real job (route-pattern latency histograms, jobs settled,
// exact credits charged and refunded, provider poll latency), METRICS_TOKEN, a worker-only process
// serving its own metrics and the Temporal SDK's, and logs that carry ids but never a secret.
// The metrics registry is one per process, shared here by the stack's API and worker: this file's
// stack is fresh, so every count below is known exactly.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { ADMIN_TOKEN, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { createLogger } from '../../src/logger.js';

const METRICS_TOKEN = 'test-metrics-token-0123456789abcdef';
const UNIT_4S_720P = 200_000;

/** Every sample of a Prometheus text exposition: name, labels, value. */
function parseMetrics(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The sum of the samples named `name` whose labels include `labels`. */
function valueOf(text: string, name: string, labels: Record<string, string> = {}): number {
  return parseMetrics(text)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

async function scrape(url: string, token: string | undefined = METRICS_TOKEN): Promise<string> {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  return res.text();
}

const logLines: string[] = [];
const logStream = { write: (line: string) => void logLines.push(line) };
const logs = () => logLines.map((l) => JSON.parse(l) as Record<string, any>);

let stack: Stack;
before(async () => {
  stack = await startStack({ env: { METRICS_TOKEN, LOG_LEVEL: 'debug' }, logStream });
});
after(async () => {
  await stack.stop();
});

describe('GET /metrics', () => {
  test('needs METRICS_TOKEN when it is set, not an API key; /healthz stays open', async () => {
    const c = await newCustomer(stack, 1);
    for (const token of [undefined, c.key, ADMIN_TOKEN, `${METRICS_TOKEN}x`]) {
      const r = await http(stack.baseUrl, 'GET', '/metrics', token ? { token } : {});
      assert.equal(r.status, 401);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer');
      assert.equal(r.body.error.type, 'authentication_error');
    }
    const text = await scrape(`${stack.baseUrl}/metrics`);
    assert.match(text, /^# TYPE process_cpu_user_seconds_total counter$/m, 'default process metrics');
    assert.match(text, /^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
    assert.equal((await http(stack.baseUrl, 'GET', '/healthz')).status, 200);
  });

  test('after a job with a shortfall: route-pattern latencies, jobs settled, exact credits, provider polls', async () => {
    const c = await newCustomer(stack, 10);
    const headers = { 'Idempotency-Key': 'metrics-1' };
    // 4 videos asked, 1 delivered: charged 4 units, refunded 3.
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ videos: 1 }, { n: 4 }),
      headers,
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.refunded_in_euro, 0.6);
    // An idempotent replay of the create changes no money counter.
    const replay = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ videos: 1 }, { n: 4 }),
      headers,
    });
    assert.equal(replay.status, 202);
    assert.equal(replay.body.id, created.body.id);
    assert.equal((await http(stack.baseUrl, 'GET', '/no/such/route')).status, 404);
    const download = await fetch(job.videos[0].url);
    assert.equal(download.status, 200);
    await download.arrayBuffer();

    // A request is observed when its response has finished on the server: a streamed download may
    // finish a moment after the client has read it.
    const h = 'http_request_duration_seconds_count';
    let text = await scrape(`${stack.baseUrl}/metrics`);
    for (let i = 0; i < 50 && valueOf(text, h, { route: '/v2/files/{key}' }) === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      text = await scrape(`${stack.baseUrl}/metrics`);
    }
    assert.equal(valueOf(text, h, { method: 'POST', route: '/v2/videos/generations', status: '202' }), 2);
    assert.ok(valueOf(text, h, { method: 'GET', route: '/v2/videos/generations/:id', status: '200' }) >= 1);
    assert.equal(valueOf(text, h, { method: 'GET', route: 'unmatched', status: '404' }), 1);
    assert.ok(valueOf(text, h, { method: 'GET', route: '/metrics', status: '401' }) >= 1);
    assert.equal(valueOf(text, h, { method: 'GET', route: '/v2/files/{key}', status: '200' }), 1);
    assert.ok(!text.includes(created.body.id), 'no raw path (job id) in any label');
    assert.ok(valueOf(text, 'http_request_duration_seconds_bucket', { route: '/v2/videos/generations', status: '202', le: '+Inf' }) === 2);

    assert.equal(valueOf(text, 'video_jobs_settled_total', { outcome: 'succeeded', error_code: 'none' }), 1);
    assert.equal(valueOf(text, 'video_jobs_settled_total'), 1);
    assert.equal(valueOf(text, 'credits_charged_micro_eur_total', { kind: 'video' }), 4 * UNIT_4S_720P);
    assert.equal(valueOf(text, 'credits_refunded_micro_eur_total', { kind: 'video' }), 3 * UNIT_4S_720P);
    assert.ok(valueOf(text, 'video_provider_poll_duration_seconds_count', { backend: 'simulator', result: 'succeeded' }) >= 1);
    assert.ok(valueOf(text, 'video_provider_poll_duration_seconds_count') >= 1);

    // A failed job: counted by its error code, refunded in full.
    const failed = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ outcome: 'fail' }, { n: 1 }),
    });
    assert.equal((await waitForJob(stack, c.key, failed.body.id)).status, 'failed');
    const after = await scrape(`${stack.baseUrl}/metrics`);
    assert.equal(valueOf(after, 'video_jobs_settled_total', { outcome: 'failed', error_code: 'generation_failed' }), 1);
    assert.equal(valueOf(after, 'credits_charged_micro_eur_total', { kind: 'video' }), 5 * UNIT_4S_720P);
    assert.equal(valueOf(after, 'credits_refunded_micro_eur_total', { kind: 'video' }), 4 * UNIT_4S_720P);
  });

  test('speech charges count once per Idempotency-Key', async () => {
    const c = await newCustomer(stack, 1);
    const before = valueOf(await scrape(`${stack.baseUrl}/metrics`), 'credits_charged_micro_eur_total', { kind: 'speech' });
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json', 'Idempotency-Key': 'speech-1' },
        body: JSON.stringify({ input: 'hello', voice: 'sim-narrator' }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    const text = await scrape(`${stack.baseUrl}/metrics`);
    assert.equal(valueOf(text, 'credits_charged_micro_eur_total', { kind: 'speech' }) - before, 5 * 150); // 150 micro-euros per character
  });
});

describe('logs', () => {
  test('request and job logs carry request, workspace and job ids; no key, token or secret is ever printed', async () => {
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { n: 2 }) });
    assert.equal(created.status, 202);
    await waitForJob(stack, c.key, created.body.id);
    const bogusKey = 'vva_sk_not-a-real-key-but-secret-looking-0123456789';
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/models', { token: bogusKey })).status, 401);
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/models', { token: c.key })).status, 200);
    await http(stack.baseUrl, 'GET', '/metrics', { token: METRICS_TOKEN });
    // Settlement is logged after the workflow's last activity; give the log a moment.
    for (let i = 0; i < 50 && !logs().some((l) => l.msg === 'video job settled' && l.job_id === created.body.id); i++)
      await new Promise((r) => setTimeout(r, 100));

    for (const secret of [c.key, bogusKey, ADMIN_TOKEN, METRICS_TOKEN, stack.env['URL_SIGNING_SECRET']!]) {
      const leak = logLines.find((l) => l.includes(secret));
      assert.equal(leak && leak.replaceAll(secret, '<SECRET>'), undefined, 'a log line contains a secret');
    }
    assert.equal(
      logLines.find((l) => /Bearer \S/i.test(l)),
      undefined,
      'no Authorization header value in any log line',
    );

    const lines = logs();
    const create = lines.find((l) => l.msg === 'request' && l.method === 'POST' && l.job_id === created.body.id);
    assert.ok(create, 'request log of the create');
    assert.equal(create.status, 202);
    assert.equal(create.workspace_id, c.workspaceId);
    assert.match(create.request_id, /^[0-9a-f-]{36}$/);
    assert.ok(lines.some((l) => l.msg === 'request' && l.method === 'GET' && l.job_id === created.body.id && l.status === 200));

    const ofJob = (msg: string) => lines.find((l) => l.msg === msg && l.job_id === created.body.id);
    assert.equal(ofJob('video job charged')?.workspace_id, c.workspaceId);
    assert.equal(ofJob('video job charged')?.estimated_cost_micro_eur, 2 * UNIT_4S_720P);
    assert.equal(ofJob('video job submitted')?.workspace_id, c.workspaceId);
    assert.ok(ofJob('video provider polled'), 'poll logs (debug) carry the job id');
    const settled = ofJob('video job settled');
    assert.ok(settled);
    assert.equal(settled.workspace_id, c.workspaceId);
    assert.equal(settled.outcome, 'succeeded');
    assert.equal(settled.cost_micro_eur, 2 * UNIT_4S_720P);
    assert.equal(settled.refunded_micro_eur, 0);
  });

  test('the logger redacts secrets wherever they appear, errors included', () => {
    const captured: string[] = [];
    const logger = createLogger('info', 'redact', { write: (l: string) => void captured.push(l) });
    const err = Object.assign(new Error('boom'), {
      headers: { authorization: 'Bearer s3cr3t-a' },
      config: { headers: { Authorization: 'Bearer s3cr3t-b' } },
    });
    logger.error({ err, req: { headers: { authorization: 'Bearer s3cr3t-c', cookie: 's3cr3t-d' } } }, 'failed');
    logger.info({ key: 's3cr3t-e', token: 's3cr3t-f', adminToken: 's3cr3t-g', workspace: { api_key: 's3cr3t-h' } }, 'x');
    const out = captured.join('');
    assert.ok(!out.includes('s3cr3t'), out);
    assert.match(out, /boom/);
  });
});

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => s.once('listening', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('a worker-only process (npm run worker)', () => {
  let workerStack: Stack;
  const children: ChildProcess[] = [];
  before(async () => {
    workerStack = await startStack({ worker: false });
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await workerStack.stop();
  });

  function spawnWorker(env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker-main.ts'], {
      env: { ...process.env, ...workerStack.env, LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let output = '';
    child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    return { child, output: () => output, exited };
  }

  /** The worker's `worker running` log line, once it has started. */
  async function runningLine(w: ReturnType<typeof spawnWorker>): Promise<Record<string, any>> {
    for (let i = 0; ; i++) {
      assert.ok(i < 600 && w.child.exitCode === null, `worker did not start: ${w.output()}`);
      const running = w
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
        .find((l) => l.msg === 'worker running');
      if (running) return running;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  test('serves its own metrics on APP_METRICS_PORT and the Temporal SDK metrics on WORKER_METRICS_PORT', async () => {
    const sdkPort = await freePort();
    const w = spawnWorker({ WORKER_METRICS_PORT: String(sdkPort), APP_METRICS_PORT: '0', METRICS_TOKEN });
    const running = await runningLine(w);
    const appUrl = running.metrics_url as string;
    assert.match(appUrl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.equal((await fetch(appUrl)).status, 401, 'METRICS_TOKEN applies here too');

    const c = await newCustomer(workerStack, 10);
    const created = await http(workerStack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ videos: 1 }, { n: 2 }),
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal((await waitForJob(workerStack, c.key, created.body.id, 60_000)).status, 'succeeded', w.output());

    const app = await scrape(appUrl);
    assert.equal(valueOf(app, 'video_jobs_settled_total', { outcome: 'succeeded' }), 1);
    assert.equal(valueOf(app, 'credits_charged_micro_eur_total', { kind: 'video' }), 2 * UNIT_4S_720P);
    assert.equal(valueOf(app, 'credits_refunded_micro_eur_total', { kind: 'video' }), UNIT_4S_720P);
    assert.ok(valueOf(app, 'video_provider_poll_duration_seconds_count', { backend: 'simulator' }) >= 1);
    // The gauges read from PostgreSQL are the API's: a worker's scrape costs no query.
    assert.ok(!/^(video_jobs_pending|webhook_deliveries_pending|webhook_delivery_oldest)/m.test(app), 'no database gauges');

    const sdk = await scrape(`http://127.0.0.1:${sdkPort}/metrics`, undefined);
    assert.ok(
      parseMetrics(sdk).some((s) => s.name.startsWith('temporal_') && s.labels['task_queue'] === workerStack.config.temporal.taskQueue),
      sdk.slice(0, 2000),
    );

    w.child.kill('SIGTERM');
    assert.equal(await w.exited, 0, w.output());
  });

  test("in production without METRICS_TOKEN, the worker's business metrics are not served (the API's rule); its probes are", async () => {
    const w = spawnWorker({
      NODE_ENV: 'production',
      PUBLIC_BASE_URL: 'https://api.example.test',
      URL_SIGNING_SECRET: 'Vq3kZp8WmR2tXy7LbN4cHd9FgJ6sQe1A',
      APP_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    });
    const appUrl = (await runningLine(w)).metrics_url as string;
    const r = await fetch(appUrl);
    assert.equal(r.status, 404);
    assert.doesNotMatch(await r.text(), /credits_charged/);
    assert.equal((await fetch(appUrl.replace(/\/metrics$/, '/livez'))).status, 200);
    w.child.kill('SIGTERM');
    assert.equal(await w.exited, 0, w.output());
  });

  test('a taken WORKER_METRICS_PORT ends the worker with one clear line', async () => {
    const port = await freePort();
    const blocker = net.createServer().listen(port, '127.0.0.1');
    await new Promise((r) => blocker.once('listening', r));
    try {
      const w = spawnWorker({ WORKER_METRICS_PORT: String(port), LOG_LEVEL: 'warn' });
      assert.equal(await w.exited, 1);
      assert.equal(w.output().trim(), `worker: 127.0.0.1:${port} is already in use; set WORKER_METRICS_PORT to a free port`);
    } finally {
      blocker.close();
    }
  });
});

describe('in production', () => {
  test('/metrics is not served without METRICS_TOKEN, and PUBLIC_BASE_URL is required', async () => {
    const { loadConfig } = await import('../../src/config.js');
    const base = { NODE_ENV: 'production', ADMIN_TOKEN, URL_SIGNING_SECRET: 'x'.repeat(32) };
    assert.throws(() => loadConfig(base), /PUBLIC_BASE_URL must be set when NODE_ENV=production/);
    const prod = await startStack({
      worker: false,
      env: { NODE_ENV: 'production', PUBLIC_BASE_URL: 'https://api.example.test', SIMULATOR: 'on' },
    });
    try {
      const r = await http(prod.baseUrl, 'GET', '/metrics');
      assert.equal(r.status, 404);
      assert.equal(r.body.error.code, 'route_not_found');
    } finally {
      await prod.stop();
    }
  });
});
