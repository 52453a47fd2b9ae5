// The floor's charge: one PostgreSQL transaction that locks a workspace row, moves its balance and
// appends a ledger-like row (idempotent per job). Tables of its own, in the floor's own database.
// The engine whole job's other steps: a submit that records an operation for the floor's poller, a copy
// that stores the simulator's video file, and a settlement that records the job's end.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inTransaction, type Db } from '../src/db/pool.js';

/** The video the simulator delivers for a 4 s, 16:9 job: what the floor's copy stores. */
const FLOOR_VIDEO = fileURLToPath(new URL('../assets/sim-video/16x9-4s.mp4', import.meta.url));

export interface FloorCharge {
  job_id: string;
  workspace_id: string;
  amount_micro_eur: number;
}

export const FLOOR_SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS floor_workspaces (id uuid PRIMARY KEY, balance_micro_eur bigint NOT NULL);
CREATE TABLE IF NOT EXISTS floor_ledger (
  id bigserial PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES floor_workspaces(id),
  amount_micro_eur bigint NOT NULL,
  idempotency_key text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS floor_polls (job_id uuid PRIMARY KEY, operation_id text NOT NULL, next_poll_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS floor_polls_due ON floor_polls (next_poll_at);
CREATE TABLE IF NOT EXISTS floor_jobs (id uuid PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz);`;

export async function createFloorWorkspace(db: Db, id: string, balance_micro_eur: number): Promise<void> {
  await db.query(FLOOR_SCHEMA_SQL);
  await db.query('INSERT INTO floor_workspaces (id, balance_micro_eur) VALUES ($1, $2)', [id, balance_micro_eur]);
}

/** The floor's poller finds an operation ended this long after its submit (the product's first poll). */
export interface FloorJobSettings {
  first_poll_after_ms: number;
  storage_dir: string;
}

export function createFloorActivities(db: Db, job: FloorJobSettings = { first_poll_after_ms: 1_000, storage_dir: '' }) {
  return {
    /** Records the job and its operation for the poller, due after the first poll interval. */
    async submitFloorJob(job_id: string): Promise<string> {
      const operation_id = `floor-op-${job_id}`;
      await db.query(
        `WITH j AS (INSERT INTO floor_jobs (id, status) VALUES ($1, 'pending') ON CONFLICT (id) DO NOTHING)
         INSERT INTO floor_polls (job_id, operation_id, next_poll_at) VALUES ($1, $2, now() + make_interval(secs => $3::float8 / 1000))
         ON CONFLICT (job_id) DO NOTHING`,
        [job_id, operation_id, job.first_poll_after_ms],
      );
      return operation_id;
    },
    /** Stores the job's video (the simulator's file for its shape). */
    async copyFloorOutput(input: { job_id: string; operation_id: string }): Promise<void> {
      const bytes = await fs.readFile(FLOOR_VIDEO);
      const dir = path.join(job.storage_dir, 'videos', input.job_id);
      await fs.mkdir(dir, { recursive: true });
      await fs.writeFile(path.join(dir, '0.mp4'), bytes);
    },
    /** Records the job's end and forgets its operation, in one transaction. */
    async settleFloorJob(input: { job_id: string; status: string }): Promise<void> {
      await inTransaction(db, async (tx) => {
        await tx.query("UPDATE floor_jobs SET status = $2, completed_at = now() WHERE id = $1 AND status = 'pending'", [
          input.job_id,
          input.status,
        ]);
        await tx.query('DELETE FROM floor_polls WHERE job_id = $1', [input.job_id]);
      });
    },
    /** The balance after the charge. */
    async chargeFloorJob(c: FloorCharge): Promise<number> {
      return inTransaction(db, async (tx) => {
        const locked = await tx.query<{ balance_micro_eur: number }>(
          'SELECT balance_micro_eur FROM floor_workspaces WHERE id = $1 FOR UPDATE',
          [c.workspace_id],
        );
        if (!locked.rows[0]) throw new Error(`no floor workspace ${c.workspace_id}`);
        const entry = await tx.query(
          'INSERT INTO floor_ledger (workspace_id, amount_micro_eur, idempotency_key) VALUES ($1, $2, $3) ON CONFLICT (idempotency_key) DO NOTHING',
          [c.workspace_id, -c.amount_micro_eur, `floor:${c.job_id}:charge`],
        );
        if (entry.rowCount === 0) return locked.rows[0].balance_micro_eur;
        const r = await tx.query<{ balance_micro_eur: number }>(
          'UPDATE floor_workspaces SET balance_micro_eur = balance_micro_eur - $2 WHERE id = $1 RETURNING balance_micro_eur',
          [c.workspace_id, c.amount_micro_eur],
        );
        return r.rows[0]!.balance_micro_eur;
      });
    },
  };
}

export type FloorActivities = ReturnType<typeof createFloorActivities>;
