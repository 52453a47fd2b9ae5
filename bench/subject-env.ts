// The environment of a subject process: this process's environment (so a service setting exported in the
// shell is honoured, as by `npm start`), plus a database of its own on the run's PostgreSQL, a task queue
// of its own on the run's Temporal, and what running unattended needs. Every other setting of the
// service keeps its default: the figures are the product's as shipped.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { ADMIN_TOKEN, createTestDatabase } from '../test/helpers/stack.js';
import type { Infra } from '../test/helpers/infra.js';
import type { SubjectKind } from './subject.js';

export interface SubjectEnv {
  env: Record<string, string>;
  databaseUrl: string;
}

export async function subjectEnv(infra: Infra, kind: SubjectKind, overrides: Record<string, string> = {}): Promise<SubjectEnv> {
  const databaseUrl = await createTestDatabase();
  const inherited: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) inherited[k] = v;
  const env = {
    ...inherited,
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: fs.mkdtempSync(path.join(infra.root, `${kind}-`)),
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: infra.temporalAddress,
    ...infra.temporalEnv,
    TEMPORAL_TASK_QUEUE: `bench-${kind}-${randomUUID()}`,
    ADMIN_TOKEN,
    URL_SIGNING_SECRET: 'bench-url-signing-secret-0123456789abcdef',
    SIMULATOR: 'on',
    LOG_LEVEL: process.env['BENCH_LOG_LEVEL'] ?? 'silent',
    // One API key sends every request of the benchmark: its rate limit must not be what is measured.
    RATE_LIMIT_PER_MINUTE: '1000000',
    RATE_LIMIT_READS_PER_MINUTE: '1000000',
    // ... and one workspace holds every pending job of phases 1 and 4: nor is its pending-job limit.
    MAX_PENDING_JOBS_PER_WORKSPACE: '1000000',
    ...overrides,
  };
  return { env, databaseUrl };
}
