// Phase 10: usage at scale. A product process on a database of its own; one workspace (four API keys)
// gets millions of ledger entries over 90 days, written in steps (bench/usage-data.ts), and after each
// step three reads take turns, one request at a time: the usage of the 90 days by day and model, by day
// and API key (GET /v2/usage), and a single job's row (GET /v2/videos/generations/{id}). Then, on a
// scratch database: the sample check (the grouped count equals what the usage triggers write, and the
// ledger audit holds on the generated rows), and the charge's throughput with the usage triggers and
// without them (ALTER TABLE ... DISABLE TRIGGER), in alternating turns.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import type { Infra } from '../test/helpers/infra.js';
import { ADMIN_TOKEN, createTestDatabase, http } from '../test/helpers/stack.js';
import { createPool, type Db } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';
import { auditLedger } from '../src/billing/audit.js';
import { chargeVideoJob } from '../src/video-jobs/billing.js';
import { usageQuery } from '../src/usage/service.js';
import type { BenchConfig } from './bench-config.js';
import { pooled, runLoad, type LoadResult } from './load.js';
import { awaitOutcome, createJob, productCustomer, simulatedJob, type Customer } from './product-api.js';
import { PRODUCT_CREATE_PATH } from './product-server.js';
import { spawnSubject } from './subject.js';
import { subjectEnv } from './subject-env.js';
import { settingsForBulkWrites, writeUsageStep, type UsageStepWritten } from './usage-data.js';
import type { Log } from './log.js';

export const USAGE_READS = ['row', 'by_model', 'by_key'] as const;
export type UsageRead = (typeof USAGE_READS)[number];

export interface UsageStep {
  /** Ledger entries and requests of the workspace after this step. */
  entries: number;
  requests: number;
  write_ms: number;
  /**
   * The workspace's rollup rows: hourly (what a read by hour sums), daily (what a 90-day read by day and key
   * sums) and daily by model (what a 90-day read by day and model reads).
   */
  rollup_rows: number;
  daily_rows: number;
  model_rows: number;
  reads: Record<UsageRead, LoadResult>;
  /** EXPLAIN ANALYZE of the by-model read's statement, after the reads. */
  plan: string;
}

export interface ChargeRound {
  with_triggers: LoadResult;
  without_triggers: LoadResult;
}

export interface UsageBench {
  sample: UsageStepWritten & { audit_ok: boolean; audit: string };
  steps: UsageStep[];
  charges: { concurrency: number; rounds: ChargeRound[] };
}

const DAY_MS = 86_400_000;
const SPAN_MS = 90 * DAY_MS;
/** Requests of each read before a step's measured turns. */
const WARMUP_READS = 20;
const READ_TURNS = 5;
const SAMPLE_ENTRIES = 20_000;
/** Even: each state goes first in half the rounds (a turn is slower after the other state's). */
const CHARGE_ROUNDS = 4;
/** A top-up's largest amount (the admin API's bound). */
const TOPUP_MAX_EUR = 1_000_000;
/** The most a generated request can cost (a two-video job at the largest unit price), with a margin. */
const REQUEST_COST_MAX_EUR = 2;
const EXTRA_KEYS = 3;

/** Each part is handed to `report` as soon as it is measured: the largest sizes take long to write. */
export interface UsageReport {
  sample(s: UsageBench['sample']): void;
  charges(c: UsageBench['charges']): void;
  step(s: UsageStep): void;
}

export async function benchUsage(infra: Infra, cfg: BenchConfig, log: Log, report: UsageReport): Promise<UsageBench> {
  const sample = await sampleCheck(log);
  report.sample(sample);
  const charges = await chargeThroughput(cfg, log);
  report.charges(charges);
  const steps = await readsAtScale(infra, cfg, log, report);
  return { sample, steps, charges };
}

async function readsAtScale(infra: Infra, cfg: BenchConfig, log: Log, report: UsageReport): Promise<UsageStep[]> {
  const { env, databaseUrl } = await subjectEnv(infra, 'product');
  const profDir = process.env['BENCH_CPU_PROF_DIR'];
  const product = await spawnSubject('product', env, { cpuProfDir: profDir && path.join(profDir, 'usage') });
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const customer = await productCustomer(product.url);
    const keyIds = [await keyIdOf(client, customer.workspaceId)];
    for (let i = 0; i < EXTRA_KEYS; i++) {
      const r = await http(product.url, 'POST', `/admin/v1/workspaces/${customer.workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
      if (r.status !== 201) throw new Error(`api key: ${r.status} ${JSON.stringify(r.body)}`);
      keyIds.push(r.body.id);
    }
    // The job whose row is read: settled, so nothing writes it while the steps are written.
    const job = await createJob(customer, simulatedJob(0, 'usage row read'));
    if (!job.id) throw new Error(`row-read job: ${job.error}`);
    await awaitOutcome(customer, job.id, 200, 120_000);
    const to_ms = Date.now();
    const steps: UsageStep[] = [];
    let written = { entries: 0, requests: 0 };
    await settingsForBulkWrites(client);
    for (const size of cfg.BENCH_USAGE_ENTRIES) {
      log(`phase 10: writing ledger entries up to ${size.toLocaleString('en')}`);
      await topUp(customer, client, (size - written.entries) * REQUEST_COST_MAX_EUR);
      const t0 = performance.now();
      const step = await writeUsageStep(client, {
        workspaceId: customer.workspaceId,
        apiKeyIds: keyIds,
        entries: size - written.entries,
        from_ms: to_ms - SPAN_MS,
        span_ms: SPAN_MS,
      });
      await client.query(
        'VACUUM ANALYZE video_jobs, speech_requests, ledger_entries, usage_rollups, usage_daily_rollups, usage_daily_model_rollups',
      );
      const write_ms = performance.now() - t0;
      written = { entries: written.entries + step.entries, requests: written.requests + step.requests };
      const entries = Number(
        (await client.query('SELECT count(*) AS n FROM ledger_entries WHERE workspace_id = $1', [customer.workspaceId])).rows[0].n,
      );
      const rollup_rows = Number(
        (await client.query('SELECT count(*) AS n FROM usage_rollups WHERE workspace_id = $1', [customer.workspaceId])).rows[0].n,
      );
      const daily_rows = Number(
        (await client.query('SELECT count(*) AS n FROM usage_daily_rollups WHERE workspace_id = $1', [customer.workspaceId])).rows[0].n,
      );
      const model_rows = Number(
        (await client.query('SELECT count(*) AS n FROM usage_daily_model_rollups WHERE workspace_id = $1', [customer.workspaceId])).rows[0]
          .n,
      );
      log(
        `phase 10: ${entries.toLocaleString('en')} entries (${rollup_rows} hourly, ${daily_rows} daily, ${model_rows} daily by model rollup rows) written in ${Math.round(write_ms / 1000)} s; reading`,
      );
      const reads = await measureReads(customer, job.id, to_ms, cfg.BENCH_USAGE_READS, written.requests + 1);
      const plan = await explainByModel(client, customer.workspaceId, to_ms);
      steps.push({ entries, requests: written.requests + 1, write_ms, rollup_rows, daily_rows, model_rows, reads, plan });
      report.step(steps.at(-1)!);
    }
    return steps;
  } finally {
    await client.end();
    await product.stop();
  }
}

async function keyIdOf(client: pg.Client, workspaceId: string): Promise<string> {
  return (await client.query('SELECT id FROM api_keys WHERE workspace_id = $1', [workspaceId])).rows[0].id;
}

/** Credits for the step's charges, in top-ups the admin API allows. */
async function topUp(c: Customer, client: pg.Client, needed_eur: number): Promise<void> {
  const balance = Number(
    (await client.query('SELECT balance_micro_eur FROM workspaces WHERE id = $1', [c.workspaceId])).rows[0].balance_micro_eur,
  );
  for (let have = balance / 1e6; have < needed_eur; have += TOPUP_MAX_EUR) {
    const r = await http(c.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: TOPUP_MAX_EUR },
    });
    if (r.status !== 200) throw new Error(`top-up: ${r.status} ${JSON.stringify(r.body)}`);
  }
}

const usagePath = (to_ms: number, group: 'model' | 'api_key') =>
  `/v2/usage?start=${Math.floor((to_ms - SPAN_MS) / 1000)}&end=${Math.ceil(to_ms / 1000)}&bucket=day&group_by=${group}`;

/**
 * The three reads, one request at a time, in turns (the order rotated each turn), after a warm-up; every
 * usage answer must count every request of the workspace.
 */
async function measureReads(
  c: Customer,
  jobId: string,
  to_ms: number,
  reads: number,
  requests: number,
): Promise<Record<UsageRead, LoadResult>> {
  const send: Record<UsageRead, () => Promise<string | null>> = {
    row: async () => {
      const r = await http(c.baseUrl, 'GET', `${PRODUCT_CREATE_PATH}/${jobId}`, { token: c.key });
      return r.status === 200 ? null : `${r.status} ${JSON.stringify(r.body)}`;
    },
    by_model: () => usageRead(c, usagePath(to_ms, 'model'), requests),
    by_key: () => usageRead(c, usagePath(to_ms, 'api_key'), requests),
  };
  for (const kind of USAGE_READS) {
    const warm = await runLoad(WARMUP_READS, 1, send[kind]);
    if (warm.errors > 0) throw new Error(`usage phase, ${kind} read: ${warm.first_error}`);
  }
  const turns: Record<UsageRead, LoadResult[]> = { row: [], by_model: [], by_key: [] };
  const perTurn = Math.max(1, Math.round(reads / READ_TURNS));
  for (let t = 0; t < READ_TURNS; t++) {
    for (let k = 0; k < USAGE_READS.length; k++) {
      const kind = USAGE_READS[(t + k) % USAGE_READS.length]!;
      turns[kind].push(await runLoad(perTurn, 1, send[kind]));
    }
  }
  return { row: pooled(turns.row), by_model: pooled(turns.by_model), by_key: pooled(turns.by_key) };
}

async function usageRead(c: Customer, path: string, requests: number): Promise<string | null> {
  const r = await http(c.baseUrl, 'GET', path, { token: c.key });
  if (r.status !== 200) return `${r.status} ${JSON.stringify(r.body)}`;
  if (r.body.total.requests !== requests) return `the usage counts ${r.body.total.requests} requests, not ${requests}`;
  return null;
}

async function explainByModel(client: pg.Client, workspaceId: string, to_ms: number): Promise<string> {
  const q = usageQuery(
    { workspaceId, bucket: 'day', group_by: ['model'], start: Math.floor((to_ms - SPAN_MS) / 1000), end: Math.ceil(to_ms / 1000) },
    Math.floor(Date.now() / 1000),
  );
  const r = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, q.values);
  return r.rows.map((row) => row['QUERY PLAN']).join('\n');
}

/** A scratch database on the run's PostgreSQL, migrated. */
async function scratchDb(): Promise<{ url: string; db: Db }> {
  const url = await createTestDatabase();
  const db = createPool(url, 32, {}, { statement_timeout_ms: 600_000, query_timeout_ms: 660_000 });
  await migrate(db);
  return { url, db };
}

/** A workspace with one API key and a balance from one top-up (its ledger entry), allowed `max_pending` jobs pending. */
async function scratchWorkspace(db: Db, balance_micro_eur: number, max_pending = 50): Promise<{ workspaceId: string; apiKeyId: string }> {
  const workspaceId = randomUUID();
  const apiKeyId = randomUUID();
  await db.query(
    `WITH w AS (INSERT INTO workspaces (id, name, balance_micro_eur, max_pending_jobs) VALUES ($1::uuid, 'usage bench', $4::bigint, $5::int) RETURNING id),
          k AS (INSERT INTO api_keys (id, workspace_id, key_sha256, key_prefix) SELECT $2::uuid, id, sha256(convert_to($2::uuid::text, 'UTF8')), 'vva_bench' FROM w),
          t AS (INSERT INTO topups (id, workspace_id, amount_micro_eur) SELECT $3::uuid, id, $4::bigint FROM w RETURNING id)
     INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, topup_id, balance_after_micro_eur)
     SELECT $1::uuid, 'topup', $4::bigint, 'topup:' || id, id, $4::bigint FROM t`,
    [workspaceId, apiKeyId, randomUUID(), balance_micro_eur, max_pending],
  );
  return { workspaceId, apiKeyId };
}

/**
 * A small sample written with the usage triggers on: the grouped count of its rows must equal the
 * rollups the triggers wrote, and the ledger audit (usage part included) must hold.
 */
async function sampleCheck(log: Log): Promise<UsageBench['sample']> {
  log(`phase 10: sample of ${SAMPLE_ENTRIES} entries, rollups by the triggers and by the grouped count`);
  const db = await scratchDb();
  const s = { ...db, ...(await scratchWorkspace(db.db, SAMPLE_ENTRIES * REQUEST_COST_MAX_EUR * 1e6)) };
  const client = new pg.Client({ connectionString: s.url });
  await client.connect();
  try {
    const written = await writeUsageStep(client, {
      workspaceId: s.workspaceId,
      apiKeyIds: [s.apiKeyId],
      entries: SAMPLE_ENTRIES,
      from_ms: Date.now() - SPAN_MS,
      span_ms: SPAN_MS,
      compareWithTriggers: true,
    });
    const audit = await auditLedger(s.db);
    return { ...written, audit_ok: audit.ok, audit: audit.ok ? '' : JSON.stringify(audit).slice(0, 2000) };
  } finally {
    await client.end();
    await s.db.end();
  }
}

/**
 * The charge (chargeVideoJob, the function the create's charge activity calls) at BENCH_CONCURRENCY in
 * flight on one workspace, with the usage triggers on and off in alternating turns, each state first in half the rounds.
 */
async function chargeThroughput(cfg: BenchConfig, log: Log): Promise<UsageBench['charges']> {
  const charges = cfg.BENCH_USAGE_CHARGES;
  const s = await scratchDb();
  const COST = 1_000_000;
  try {
    // Every turn charges a workspace of its own: the charge counts the workspace's pending jobs, so each
    // turn starts from none.
    const charge = (w: { workspaceId: string; apiKeyId: string }) => (i: number) =>
      chargeVideoJob(s.db, {
        jobId: randomUUID(),
        attemptId: randomUUID(),
        workflowId: `video-job-bench-${i}-${randomUUID()}`,
        workspaceId: w.workspaceId,
        model: 'veo-3.1-fast-generate-001',
        prompt: 'usage bench charge',
        params: { n: 1, durationSeconds: 4 } as never,
        estimated_cost_micro_eur: COST,
        created_at_ms: Date.now(),
        request_fingerprint: 'usage-bench',
        accept_by_ms: Date.now() + 60_000,
        apiKeyId: w.apiKeyId,
        backend: 'vertex',
        deadline_at_ms: Date.now() + 3_600_000,
      }).then((r) => (r.ok ? null : r.reason));
    const turn = async (triggers: boolean) => {
      const action = triggers ? 'ENABLE' : 'DISABLE';
      await s.db.query(`ALTER TABLE video_jobs ${action} TRIGGER usage_video_jobs_insert`);
      const w = await scratchWorkspace(s.db, charges * COST, charges);
      return runLoad(charges, cfg.BENCH_CONCURRENCY, charge(w));
    };
    // Warm in both states (every connection of the pool plans the charge, and the triggers' statements),
    // then statistics for the scratch tables, so the first measured turn plans as the last.
    const warm = Math.min(200, charges);
    for (const triggers of [true, false]) {
      await s.db.query(`ALTER TABLE video_jobs ${triggers ? 'ENABLE' : 'DISABLE'} TRIGGER usage_video_jobs_insert`);
      await runLoad(warm, cfg.BENCH_CONCURRENCY, charge(await scratchWorkspace(s.db, warm * COST, warm)));
    }
    await s.db.query('ANALYZE');
    const rounds: ChargeRound[] = [];
    for (let r = 0; r < CHARGE_ROUNDS; r++) {
      log(`phase 10: charges, round ${r + 1} of ${CHARGE_ROUNDS}`);
      if (r % 2 === 0) {
        const with_triggers = await turn(true);
        rounds.push({ with_triggers, without_triggers: await turn(false) });
      } else {
        const without_triggers = await turn(false);
        rounds.push({ without_triggers, with_triggers: await turn(true) });
      }
    }
    await s.db.query('ALTER TABLE video_jobs ENABLE TRIGGER usage_video_jobs_insert');
    return { concurrency: cfg.BENCH_CONCURRENCY, rounds };
  } finally {
    await s.db.end();
  }
}
