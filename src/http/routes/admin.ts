// Admin API (contract.md 3): workspaces, credits, API keys, ledger audit. Behind ADMIN_TOKEN.
import { Router, type RequestHandler } from 'express';
import type { Db } from '../../db/pool.js';
import { AddCreditsBody, CreateApiKeyBody, CreateWorkspaceBody, idempotencyKeyOf } from '../schemas.js';
import { jsonBody } from '../json-body.js';
import { invalidParam, notFound } from '../errors.js';
import { eurToMicroEurRounded, microEurToEur } from '../../money.js';
import { addCredits, auditLedger } from '../../billing/ledger.js';
import { createApiKey, createWorkspace, getWorkspace } from '../../services/workspaces.js';
import { findSpeechModel, findVideoModel } from '../../catalog.js';
import { isUuid } from '../../services/video-jobs.js';

/** A euro amount of a request (bounded by its schema), rounded to the nearest micro-euro. */
function euroParam(name: string, amount_eur: number): number {
  const micro = eurToMicroEurRounded(amount_eur);
  if (micro === null) throw invalidParam(name, `${name} must be a number of euros up to 1000000`);
  return micro;
}

export function adminRoutes(deps: { db: Db; admin: RequestHandler }): Router {
  const r = Router();
  r.use('/admin', deps.admin);

  const workspaceId = (raw: unknown): string => {
    const id = String(raw);
    if (!isUuid(id)) throw notFound('workspace_not_found', `no workspace ${id}`, 'id');
    return id;
  };
  const presentWorkspace = (w: { id: string; name: string; balance_micro_eur: number }) => ({
    id: w.id,
    object: 'workspace',
    name: w.name,
    balance_in_euro: microEurToEur(w.balance_micro_eur),
  });

  r.post('/admin/v1/workspaces', jsonBody, async (req, res) => {
    const body = CreateWorkspaceBody.parse(req.body);
    const credits = body.credits_in_euro === undefined ? 0 : euroParam('credits_in_euro', body.credits_in_euro);
    const w = await createWorkspace(deps.db, { name: body.name, credits_micro_eur: credits });
    res.status(201).json(presentWorkspace(w));
  });

  r.get('/admin/v1/workspaces/:id', async (req, res) => {
    res.json(presentWorkspace(await getWorkspace(deps.db, workspaceId(req.params['id']))));
  });

  r.post('/admin/v1/workspaces/:id/credits', jsonBody, async (req, res) => {
    const id = workspaceId(req.params['id']);
    const body = AddCreditsBody.parse(req.body);
    const idempotencyKey = idempotencyKeyOf(req);
    const amount = euroParam('amount_in_euro', body.amount_in_euro);
    const result = await addCredits(deps.db, { workspaceId: id, amount_micro_eur: amount, idempotencyKey });
    res.json({ id, object: 'workspace', balance_in_euro: microEurToEur(result.balance_micro_eur), topup_id: result.topup_id });
  });

  r.post('/admin/v1/workspaces/:id/api-keys', jsonBody, async (req, res) => {
    const id = workspaceId(req.params['id']);
    const body = CreateApiKeyBody.parse(req.body);
    for (const [i, m] of (body.models ?? []).entries()) {
      if (!findVideoModel(m) && !findSpeechModel(m)) throw invalidParam(`models.${i}`, `unknown model "${m}"`);
    }
    const key = await createApiKey(deps.db, { workspaceId: id, models: body.models ? [...new Set(body.models)] : null });
    res.status(201).json({ id: key.id, object: 'api_key', key: key.key, models: key.models });
  });

  r.get('/admin/v1/ledger/audit', async (_req, res) => {
    res.json(await auditLedger(deps.db));
  });

  return r;
}
