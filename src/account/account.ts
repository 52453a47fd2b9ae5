// The account of a workspace (GET/PATCH /v2/account, and the operators' PATCH of a workspace's account):
// its balance, what it owes, and its budget settings. The low balance alert is kept on the workspace's
// row (low_balance_threshold_micro_eur) and checked by the database with every ledger entry
// (migration 024_budget_alerts.sql), which sends the webhook event balance.low.
import type { Db } from '../db/pool.js';
import { NotFoundError } from '../billing/ledger.js';
import { invalidParam } from '../errors.js';
import { eurToMicroEurRounded, microEurToEur } from '../money.js';
import type { Account } from './schemas.js';

export interface AccountRecord {
  balance_micro_eur: number;
  /** null: no low balance alert. */
  low_balance_threshold_micro_eur: number | null;
}

/** A change of the account's settings: an absent field is left as it is. */
export interface AccountUpdate {
  /** null turns the alert off. */
  low_balance_threshold_micro_eur?: number | null;
}

const ACCOUNT_COLUMNS = 'balance_micro_eur, low_balance_threshold_micro_eur';

export async function getAccount(db: Db, workspaceId: string): Promise<AccountRecord> {
  const r = await db.query<AccountRecord>(`SELECT ${ACCOUNT_COLUMNS} FROM workspaces WHERE id = $1`, [workspaceId]);
  if (!r.rows[0]) throw new NotFoundError(`workspace ${workspaceId} not found`);
  return r.rows[0];
}

/**
 * Applies the update and answers the account. A threshold that changes arms the alert (the next charge
 * leaving the balance below it sends balance.low); the same threshold again leaves its state as it is.
 */
export async function updateAccount(db: Db, workspaceId: string, update: AccountUpdate): Promise<AccountRecord> {
  if (update.low_balance_threshold_micro_eur === undefined) return getAccount(db, workspaceId);
  const r = await db.query<AccountRecord>(
    `UPDATE workspaces SET low_balance_armed = low_balance_armed OR low_balance_threshold_micro_eur IS DISTINCT FROM $2,
                           low_balance_threshold_micro_eur = $2
      WHERE id = $1 RETURNING ${ACCOUNT_COLUMNS}`,
    [workspaceId, update.low_balance_threshold_micro_eur],
  );
  if (!r.rows[0]) throw new NotFoundError(`workspace ${workspaceId} not found`);
  return r.rows[0];
}

/** The update a request body asks for, its euros rounded to micro-euros (the body's schema bounds them). */
export function accountUpdateOf(body: { low_balance_threshold_in_euro?: number | null | undefined }): AccountUpdate {
  const threshold = body.low_balance_threshold_in_euro;
  if (threshold === undefined) return {};
  if (threshold === null) return { low_balance_threshold_micro_eur: null };
  const micro = eurToMicroEurRounded(threshold);
  if (micro === null || micro < 0)
    throw invalidParam('low_balance_threshold_in_euro', 'low_balance_threshold_in_euro must be a number of euros');
  return { low_balance_threshold_micro_eur: micro };
}

export function presentAccount(a: AccountRecord): Account {
  return {
    object: 'account',
    balance_in_euro: microEurToEur(a.balance_micro_eur),
    // Nothing can be owed yet, and there is no automatic top-up: these are their values for "nothing owed" and "off".
    owed_in_euro: 0,
    low_balance_threshold_in_euro: a.low_balance_threshold_micro_eur === null ? null : microEurToEur(a.low_balance_threshold_micro_eur),
    auto_top_up: null,
  };
}
