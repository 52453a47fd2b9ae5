// GET /v2/balance and GET /v2/ledger: the caller's workspace balance and ledger statement.
import { Router, type RequestHandler } from 'express';
import type { Db } from '../../db/pool.js';
import { principalOf } from '../auth.js';
import { pageQueryOf } from '../page-query.js';
import { LedgerPageQuery } from '../schemas.js';
import { microEurToEur } from '../../money.js';
import { balanceOf, LEDGER_ENTRY_ID_PREFIX, listLedgerEntries, type LedgerEntryRecord } from '../../services/statement.js';

const ENTRY_TYPE = { topup: 'credit', charge: 'charge', refund: 'refund' } as const;

export function presentLedgerEntry(e: LedgerEntryRecord) {
  return {
    id: `${LEDGER_ENTRY_ID_PREFIX}${e.id}`,
    object: 'ledger_entry' as const,
    type: ENTRY_TYPE[e.kind],
    amount_in_euro: microEurToEur(Math.abs(e.amount_micro_eur)),
    balance_after_in_euro: microEurToEur(e.balance_after_micro_eur),
    job_id: e.video_job_id,
    speech_request_id: e.speech_request_id,
    created: Math.floor(e.created_at_ms / 1000),
  };
}

export function statementRoutes(deps: { auth: RequestHandler; db: Db }): Router {
  const r = Router();

  r.get('/v2/balance', deps.auth, async (_req, res) => {
    const balance = await balanceOf(deps.db, principalOf(res).workspace_id);
    res.json({ object: 'balance', balance_in_euro: microEurToEur(balance) });
  });

  r.get('/v2/ledger', deps.auth, async (req, res) => {
    const page = await listLedgerEntries(deps.db, principalOf(res).workspace_id, pageQueryOf(req, LedgerPageQuery));
    res.json({ object: 'list', data: page.data.map(presentLedgerEntry), has_more: page.has_more });
  });

  return r;
}
