// GET /v2/balance and GET /v2/ledger: the caller's workspace balance and ledger statement.
import type { RequestHandler } from 'express';
import type { Db } from '../db/pool.js';
import { principalOf } from '../http/auth.js';
import { Balance, LedgerEntryList, LedgerPageQuery } from './schemas.js';
import { ApiRouter, json, PAGE_400, type RouteContract } from '../http/openapi.js';
import { microEurToEur } from '../money.js';
import { balanceOf, LEDGER_ENTRY_ID_PREFIX, listLedgerEntries, type LedgerEntryRecord } from './statement.js';

const ENTRY_TYPE = { topup: 'credit', charge: 'charge', refund: 'refund', credit: 'credit', debit: 'debit' } as const;

export function presentLedgerEntry(e: LedgerEntryRecord) {
  return {
    id: `${LEDGER_ENTRY_ID_PREFIX}${e.id}`,
    object: 'ledger_entry' as const,
    type: ENTRY_TYPE[e.kind],
    // A Stripe entry's whole amount: what moved the balance and what paid (or added to) what is owed.
    amount_in_euro: microEurToEur(Math.abs(e.amount_micro_eur - e.owed_change_micro_eur)),
    balance_after_in_euro: microEurToEur(e.balance_after_micro_eur),
    job_id: e.video_job_id,
    speech_request_id: e.speech_request_id,
    stripe_id: e.stripe_id,
    created: Math.floor(e.created_at_ms / 1000),
  };
}

const getBalance = {
  method: 'get',
  path: '/v2/balance',
  operationId: 'getBalance',
  tag: 'Billing',
  summary: "This workspace's balance",
  security: 'apiKey',
  responses: { '200': json(Balance, 'The balance.') },
} satisfies RouteContract;

const listLedgerEntriesOperation = {
  method: 'get',
  path: '/v2/ledger',
  operationId: 'listLedgerEntries',
  tag: 'Billing',
  summary: "This workspace's ledger statement",
  description: 'Every credit, charge, refund and debit of the workspace, newest first, each with the balance it left.',
  security: 'apiKey',
  requestParams: { query: LedgerPageQuery },
  responses: { '200': json(LedgerEntryList, 'A page of entries.') },
  errors: { 400: PAGE_400 },
} satisfies RouteContract;

export function statementRoutes(deps: { auth: RequestHandler; db: Db }): ApiRouter {
  const api = new ApiRouter();

  api.route(getBalance, deps.auth, async (_input, _req, res) => {
    const balance = await balanceOf(deps.db, principalOf(res).workspace_id);
    res.json({
      object: 'balance',
      balance_in_euro: microEurToEur(balance.balance_micro_eur),
      owed_in_euro: microEurToEur(balance.owed_micro_eur),
    });
  });

  api.route(listLedgerEntriesOperation, deps.auth, async (input, _req, res) => {
    const page = await listLedgerEntries(deps.db, principalOf(res).workspace_id, input.query);
    res.json({ object: 'list', data: page.data.map(presentLedgerEntry), has_more: page.has_more });
  });

  return api;
}
