// A service stack for one test file on the run's shared PostgreSQL and Temporal: its own database,
// task queue and data dir, the real worker and the real HTTP API. No mocks of either server.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import assert from 'node:assert/strict';
import pg from 'pg';
import type { DestinationStream } from 'pino';
import { loadConfig, type Config } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { openDatabase } from '../../src/runtime/database.js';
import { startApi, type RunningApi } from '../../src/runtime/api.js';
import { startWorker, type RunningWorker } from '../../src/runtime/worker.js';
import type { Db } from '../../src/db/pool.js';
import { auditLedger } from '../../src/billing/audit.js';
import { videoJobWorkflowStates } from '../../src/temporal/workflow-states.js';
import { deleteReconcileSchedule } from '../../src/temporal/reconcile-schedule.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export function infra() {
  const databaseUrl = process.env['TEST_DATABASE_URL'];
  const temporalAddress = process.env['TEST_TEMPORAL_ADDRESS'];
  const tmp = process.env['TEST_TMP_DIR'];
  if (!databaseUrl || !temporalAddress || !tmp) throw new Error('run tests with `npm test` (it starts PostgreSQL and Temporal)');
  return { databaseUrl, temporalAddress, tmp };
}

/** A fresh database on the shared server. */
export async function createTestDatabase(): Promise<string> {
  const { databaseUrl } = infra();
  const name = `t_${randomUUID().replace(/-/g, '')}`;
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(databaseUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

export interface StackOptions {
  env?: Record<string, string>;
  worker?: boolean;
  /** Where the stack's logs go (default stdout); set LOG_LEVEL in `env` to see any. */
  logStream?: DestinationStream;
}

export interface Stack {
  config: Config;
  env: Record<string, string>;
  db: Db;
  api: RunningApi;
  baseUrl: string;
  worker: RunningWorker | null;
  stop(): Promise<void>;
}

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const { temporalAddress: runTemporalAddress, tmp } = infra();
  // A DATABASE_URL in `env` reopens that database (a restart with another configuration); else a new one.
  const databaseUrl = opts.env?.['DATABASE_URL'] ?? (await createTestDatabase());
  const env: Record<string, string> = {
    PORT: '0',
    DATA_DIR: fs.mkdtempSync(path.join(tmp, 'data-')),
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: runTemporalAddress,
    TEMPORAL_TASK_QUEUE: `test-${randomUUID()}`,
    ADMIN_TOKEN,
    URL_SIGNING_SECRET: 'test-url-signing-secret-0123456789abcdef',
    VIDEO_POLL_INTERVAL_MS: '100',
    VIDEO_POLL_MAX_INTERVAL_MS: '300',
    VIDEO_JOB_TIMEOUT_MS: '60000',
    SIMULATOR: 'on',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '100000',
    RATE_LIMIT_READS_PER_MINUTE: '1000000',
    ...opts.env,
  };
  const config = loadConfig(env);
  const logger = createLogger(config.logLevel, 'test', opts.logStream);
  const db = await openDatabase(databaseUrl, config);
  // The configured Temporal (a test may point TEMPORAL_ADDRESS elsewhere: a TLS front), else the run's.
  const temporalAddress = config.temporal.address ?? infra().temporalAddress;
  const worker = opts.worker === false ? null : await startWorker({ config, db, temporalAddress, logger });
  const api = await startApi({
    config,
    db,
    temporalAddress,
    secrets: { adminToken: ADMIN_TOKEN, urlSigningSecret: config.urlSigningSecret!, adminTokenGenerated: false },
    logger,
  });
  return {
    config,
    env,
    db,
    api,
    baseUrl: api.url,
    worker,
    async stop() {
      await deleteReconcileSchedule(api.temporal, config.temporal.taskQueue).catch(() => {});
      await api.close();
      await worker?.shutdown();
      await db.end();
    },
  };
}

export interface HttpResult<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export async function http<T = any>(
  baseUrl: string,
  method: string,
  p: string,
  opts: { token?: string; json?: unknown; headers?: Record<string, string>; rawBody?: string | Buffer } = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined = opts.rawBody;
  if (opts.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(opts.json);
  }
  const res = await fetch(baseUrl + p, { method, headers, body: body as BodyInit | undefined });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('application/json')) parsed = JSON.parse(text);
  return { status: res.status, headers: res.headers, body: parsed as T };
}

/** Creates a workspace with credits and an API key through the admin API. */
export async function newCustomer(stack: Pick<Stack, 'baseUrl'>, credits_in_euro: number, models?: string[]) {
  const ws = await http(stack.baseUrl, 'POST', '/admin/v1/workspaces', {
    token: ADMIN_TOKEN,
    json: { name: `ws-${randomUUID().slice(0, 8)}`, credits_in_euro },
  });
  assert.equal(ws.status, 201, JSON.stringify(ws.body));
  const key = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, {
    token: ADMIN_TOKEN,
    json: models ? { models } : {},
  });
  assert.equal(key.status, 201, JSON.stringify(key.body));
  return { workspaceId: ws.body.id as string, key: key.body.key as string };
}

export async function balanceEur(stack: Stack, workspaceId: string): Promise<number> {
  const r = await http(stack.baseUrl, 'GET', `/admin/v1/workspaces/${workspaceId}`, { token: ADMIN_TOKEN });
  assert.equal(r.status, 200);
  return r.body.balance_in_euro;
}

export async function balanceMicro(stack: Stack, workspaceId: string): Promise<number> {
  const r = await stack.db.query<{ balance_micro_eur: number }>('SELECT balance_micro_eur FROM workspaces WHERE id = $1', [workspaceId]);
  return r.rows[0]!.balance_micro_eur;
}

/** The ledger audit, through the admin API, must hold. */
export async function assertAuditHolds(stack: Stack): Promise<void> {
  const r = await http(stack.baseUrl, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
  assert.equal(r.status, 200);
  assert.equal(r.body.ok, true, `ledger audit failed: ${JSON.stringify(r.body)}`);
  const direct = await auditLedger(stack.db, { workflowStates: videoJobWorkflowStates(stack.api.temporal) });
  assert.equal(direct.ok, true, JSON.stringify(direct));
}

export async function waitForJob(stack: Stack, key: string, id: string, timeout_ms = 30_000): Promise<any> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const r = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: key });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    if (r.body.status !== 'pending') return r.body;
    if (Date.now() > deadline) throw new Error(`job ${id} still pending after ${timeout_ms} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

export const simJob = (simulate: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  prompt: 'a lighthouse at dusk, waves crashing',
  model: 'sim-video-1',
  durationSeconds: 4,
  resolution: '720p',
  aspectRatio: '16:9',
  n: 2,
  parameters: { simulate: { delay_ms: 200, ...simulate } },
  ...extra,
});

/** POST /v2/audio/speech with a JSON body: the status, headers, the bytes, and the JSON error when it is one. */
export async function speakRequest(baseUrl: string, key: string, json: unknown) {
  const res = await fetch(`${baseUrl}/v2/audio/speech`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
  return { status: res.status, headers: res.headers, bytes, body: isJson ? JSON.parse(bytes.toString()) : null };
}
