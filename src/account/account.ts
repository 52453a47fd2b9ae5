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
  /** What Stripe refunds and disputes took beyond the balance (../payments/). */
  owed_micro_eur: number;
  /** null: no low balance alert. */
  low_balance_threshold_micro_eur: number | null;
  /** null: no automatic top-up. */
  auto_top_up_threshold_micro_eur: number | null;
  auto_top_up_amount_micro_eur: number | null;
  auto_top_up_failure: string | null;
}

/** A change of the account's settings: an absent field is left as it is. */
export interface AccountUpdate {
  /** null turns the alert off. */
  low_balance_threshold_micro_eur?: number | null;
  /** null turns automatic top-up off. */
  auto_top_up?: { threshold_micro_eur: number; amount_micro_eur: number } | null;
}

/** What automatic top-up needs, checked before it is turned on (../payments/). */
export interface AutoTopUpPolicy {
  /** Why it cannot be turned on for this workspace now (the ApiError to answer), or null. */
  refusal(workspaceId: string, amount_micro_eur: number): Promise<Error | null>;
  /** What one Checkout may buy; null: buying credits is not configured. */
  readonly checkoutBounds: { min_micro_eur: number; max_micro_eur: number } | null;
}

const ACCOUNT_COLUMNS = `balance_micro_eur, owed_micro_eur, low_balance_threshold_micro_eur,
  auto_top_up_threshold_micro_eur, auto_top_up_amount_micro_eur, auto_top_up_failure`;

export async function getAccount(db: Db, workspaceId: string): Promise<AccountRecord> {
  const r = await db.query<AccountRecord>(`SELECT ${ACCOUNT_COLUMNS} FROM workspaces WHERE id = $1`, [workspaceId]);
  if (!r.rows[0]) throw new NotFoundError(`workspace ${workspaceId} not found`);
  return r.rows[0];
}

/**
 * Applies the update and answers the account. A threshold that changes arms the alert (the next charge
 * leaving the balance below it sends balance.low); the same threshold again leaves its state as it is.
 */
export async function updateAccount(
  db: Db,
  workspaceId: string,
  update: AccountUpdate,
  autoTopUp?: AutoTopUpPolicy,
): Promise<AccountRecord> {
  if (update.auto_top_up !== undefined) await setAutoTopUp(db, workspaceId, update.auto_top_up, autoTopUp);
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

/**
 * Turns automatic top-up on (armed: the next charge leaving the balance below the threshold starts one
 * payment; a failure noted before is cleared) or off. Turning it on needs what `policy` checks.
 */
async function setAutoTopUp(
  db: Db,
  workspaceId: string,
  value: { threshold_micro_eur: number; amount_micro_eur: number } | null,
  policy: AutoTopUpPolicy | undefined,
): Promise<void> {
  if (value !== null) {
    const refused = policy
      ? await policy.refusal(workspaceId, value.amount_micro_eur)
      : invalidParam('auto_top_up', 'automatic top-up is not available');
    if (refused) throw refused;
  }
  await db.query(
    `UPDATE workspaces SET auto_top_up_threshold_micro_eur = $2, auto_top_up_amount_micro_eur = $3, auto_top_up_armed = true,
            auto_top_up_failure = NULL WHERE id = $1`,
    [workspaceId, value?.threshold_micro_eur ?? null, value?.amount_micro_eur ?? null],
  );
}

/** Euros with at most two decimals, as micro-euros; else a 400 naming `param`. */
function centsOf(eur: number, param: string): number {
  const cents = Math.round(eur * 100);
  if (Math.abs(cents - eur * 100) > 1e-6) throw invalidParam(param, `${param} has at most two decimals`);
  return cents * 10_000;
}

/** The update a request body asks for, its euros rounded to micro-euros (the body's schema bounds them). */
export function accountUpdateOf(body: {
  low_balance_threshold_in_euro?: number | null | undefined;
  auto_top_up?: { threshold_in_euro: number; amount_in_euro: number } | null | undefined;
}): AccountUpdate {
  const update: AccountUpdate = {};
  if (body.auto_top_up !== undefined) {
    update.auto_top_up =
      body.auto_top_up === null
        ? null
        : {
            threshold_micro_eur: centsOf(body.auto_top_up.threshold_in_euro, 'auto_top_up.threshold_in_euro'),
            amount_micro_eur: centsOf(body.auto_top_up.amount_in_euro, 'auto_top_up.amount_in_euro'),
          };
  }
  const threshold = body.low_balance_threshold_in_euro;
  if (threshold === undefined) return update;
  if (threshold === null) return { ...update, low_balance_threshold_micro_eur: null };
  const micro = eurToMicroEurRounded(threshold);
  if (micro === null || micro < 0)
    throw invalidParam('low_balance_threshold_in_euro', 'low_balance_threshold_in_euro must be a number of euros');
  return { ...update, low_balance_threshold_micro_eur: micro };
}

export function presentAccount(a: AccountRecord, checkout: AutoTopUpPolicy['checkoutBounds'] = null): Account {
  return {
    object: 'account',
    balance_in_euro: microEurToEur(a.balance_micro_eur),
    owed_in_euro: microEurToEur(a.owed_micro_eur),
    low_balance_threshold_in_euro: a.low_balance_threshold_micro_eur === null ? null : microEurToEur(a.low_balance_threshold_micro_eur),
    auto_top_up:
      a.auto_top_up_threshold_micro_eur === null || a.auto_top_up_amount_micro_eur === null
        ? null
        : {
            threshold_in_euro: microEurToEur(a.auto_top_up_threshold_micro_eur),
            amount_in_euro: microEurToEur(a.auto_top_up_amount_micro_eur),
          },
    credits_checkout: checkout && {
      min_in_euro: microEurToEur(checkout.min_micro_eur),
      max_in_euro: microEurToEur(checkout.max_micro_eur),
    },
    auto_top_up_error: a.auto_top_up_failure,
  };
}
