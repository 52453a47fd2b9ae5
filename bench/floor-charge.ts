// The floor's charge: one PostgreSQL transaction that locks a workspace row, moves its balance and
// appends a ledger-like row (idempotent per job). Tables of its own, in the floor's own database.
import { inTransaction, type Db } from '../src/db/pool.js';

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
);`;

export async function createFloorWorkspace(db: Db, id: string, balance_micro_eur: number): Promise<void> {
  await db.query(FLOOR_SCHEMA_SQL);
  await db.query('INSERT INTO floor_workspaces (id, balance_micro_eur) VALUES ($1, $2)', [id, balance_micro_eur]);
}

export function createFloorActivities(db: Db) {
  return {
    /** The balance after the charge. */
    async chargeFloorJob(c: FloorCharge): Promise<number> {
      return inTransaction(db, async (tx) => {
        const locked = await tx.query<{ balance_micro_eur: number }>('SELECT balance_micro_eur FROM floor_workspaces WHERE id = $1 FOR UPDATE', [c.workspace_id]);
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
