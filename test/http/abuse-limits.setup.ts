// What the abuse and exhaustion tests share: one service stack per test file, creates with images,
// scratch databases for jobs nobody runs, and charges as the workflow's charge step makes them.
import { after, before } from 'node:test';
import { createHash, randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import type { VideoJobCharge } from '../../src/video-jobs/billing.js';
import { createTestDatabase, http as api, simJob, startStack, type Stack } from '../helpers/stack.js';
import { imageField, pngImage } from '../helpers/images.js';

export let stack: Stack;

export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
export const create = (s: { baseUrl: string }, key: string, json: unknown, headers?: Record<string, string>) =>
  api(s.baseUrl, 'POST', '/v2/videos/generations', { token: key, json, ...(headers ? { headers } : {}) });
export const withImage = (seed: number) => ({ ...simJob(), image: imageField(pngImage(64, 36, seed), 'image/png') });

export async function inputsOf(db: Db, where: { workspace_id?: string; job_id?: string }): Promise<number> {
  const [col, v] = where.workspace_id ? ['workspace_id', where.workspace_id] : ['job_id', where.job_id];
  const r = await db.query(`SELECT count(*)::int AS n FROM video_job_inputs WHERE ${col} = $1`, [v]);
  return r.rows[0].n;
}

/** A database of its own (migrated), for tests that fill it with jobs nobody runs. */
export async function scratchDatabase(settings: Record<`video_api.${string}`, number> = {}): Promise<Db> {
  const db = createPool(await createTestDatabase(), 10, settings);
  await migrate(db);
  return db;
}

/** A charge of `n` = 1 video of sim-video-1 for `cost` micro-euros, as the workflow's charge step makes it. */
export function chargeOf(workspaceId: string, cost = 100_000): VideoJobCharge {
  const jobId = randomUUID();
  return {
    jobId,
    attemptId: randomUUID(),
    workflowId: `video-job-${jobId}`,
    workspaceId,
    model: 'sim-video-1',
    prompt: 'p',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
    estimated_cost_micro_eur: cost,
    created_at_ms: Date.now(),
    request_fingerprint: `fp-${jobId}`,
    accept_by_ms: Date.now() + 60_000,
    backend: 'simulator',
    deadline_at_ms: Date.now() + 3_600_000,
  };
}

/** Registers the file's hooks: one service stack for the whole file. */
export function useAbuseStack(): void {
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.stop();
  });
}
