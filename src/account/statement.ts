// The customer's balance and ledger statement (GET /v2/balance, GET /v2/ledger): read-only views of
// the workspace's own ledger, newest first, by keyset on the entry id (index ledger_entries_workspace_id).
import type { Db } from '../db/pool.js';
import type { PageQuery } from '../http/schemas.js';
import { LEDGER_ENTRY_ID_PREFIX } from './schemas.js';
import { getWorkspace } from './workspaces.js';
import { cursorOf, pageOf, type Page } from '../db/pagination.js';

export { LEDGER_ENTRY_ID_PREFIX };

/** One page of a workspace's entries: $1 workspace, $2 the id to start below (null: the newest), $3 rows. */
export const LEDGER_PAGE_SQL = `
  SELECT id, kind, amount_micro_eur, owed_change_micro_eur, balance_after_micro_eur, video_job_id, speech_request_id, stripe_id,
         (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms
    FROM ledger_entries
   WHERE workspace_id = $1 AND ($2::bigint IS NULL OR id < $2)
   ORDER BY id DESC LIMIT $3`;

export interface LedgerEntryRecord {
  id: number;
  kind: 'topup' | 'charge' | 'refund' | 'credit' | 'debit';
  amount_micro_eur: number;
  /** What a Stripe credit paid (negative) or debit added to (positive) of what the workspace owes. */
  owed_change_micro_eur: number;
  balance_after_micro_eur: number;
  video_job_id: string | null;
  speech_request_id: string | null;
  stripe_id: string | null;
  created_at_ms: number;
}

export async function balanceOf(db: Db, workspaceId: string): Promise<{ balance_micro_eur: number; owed_micro_eur: number }> {
  const w = await getWorkspace(db, workspaceId);
  return { balance_micro_eur: w.balance_micro_eur, owed_micro_eur: w.owed_micro_eur };
}

export async function listLedgerEntries(db: Db, workspaceId: string, query: PageQuery): Promise<Page<LedgerEntryRecord>> {
  const after = cursorOf(LEDGER_ENTRY_ID_PREFIX, query);
  const r = await db.query<LedgerEntryRecord>(LEDGER_PAGE_SQL, [workspaceId, after, query.limit + 1]);
  return pageOf(r.rows, query.limit);
}
