// Admin API (contract.md 3, 9): workspaces, credits, API keys (and their revocation), ledger audit. Behind ADMIN_TOKEN.
import { Router, type RequestHandler } from 'express';
import type { Db } from '../../db/pool.js';
import { AddCreditsBody, CreateApiKeyBody, CreateWorkspaceBody, idempotencyKeyOf, SetWorkspaceLimitsBody } from '../schemas.js';
import { jsonBody } from '../json-body.js';
import { invalidParam, notFound } from '../errors.js';
import { eurToMicroEurRounded, microEurToEur } from '../../money.js';
import { addCredits, NotFoundError } from '../../billing/ledger.js';
import { auditLedger, type AuditOptions } from '../../billing/audit.js';
import { createApiKey, createWorkspace, getWorkspace, revokeApiKey, setWorkspaceLimits, type Workspace } from '../../services/workspaces.js';
import { findSpeechModel, findVideoModel } from '../../catalog.js';
import { isUuid } from '../../services/video-jobs.js';

/** A euro amount of a request (bounded by its schema), rounded to the nearest micro-euro. */
function euroParam(name: string, amount_eur: number): number {
  const micro = eurToMicroEurRounded(amount_eur);
  if (micro === null) throw invalidParam(name, `${name} must be a number of euros up to 1000000`);
  return micro;
}

export function adminRoutes(deps: { db: Db; admin: RequestHandler; audit: AuditOptions }): Router {
  const r = Router();
  r.use('/admin', deps.admin);

  const workspaceId = (raw: unknown): string => {
    const id = String(raw);
    if (!isUuid(id)) throw notFound('workspace_not_found', `no workspace ${id}`, 'id');
    return id;
  };
  const presentWorkspace = (w: Workspace) => ({
    id: w.id,
    object: 'workspace',
    name: w.name,
    balance_in_euro: microEurToEur(w.balance_micro_eur),
    max_pending_jobs: w.max_pending_jobs,
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

  r.post('/admin/v1/workspaces/:id/limits', jsonBody, async (req, res) => {
    const id = workspaceId(req.params['id']);
    const body = SetWorkspaceLimitsBody.parse(req.body);
    res.json(presentWorkspace(await setWorkspaceLimits(deps.db, id, body)));
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
    const spend_limit_micro_eur = body.spend_limit_in_euro === undefined ? null : euroParam('spend_limit_in_euro', body.spend_limit_in_euro);
    const key = await createApiKey(deps.db, { workspaceId: id, models: body.models ? [...new Set(body.models)] : null, spend_limit_micro_eur });
    res.status(201).json({
      id: key.id,
      object: 'api_key',
      key: key.key,
      models: key.models,
      spend_limit_in_euro: key.spend_limit_micro_eur === null ? null : microEurToEur(key.spend_limit_micro_eur),
    });
  });

  r.delete('/admin/v1/api-keys/:id', async (req, res) => {
    const id = String(req.params['id']);
    const unknownKey = () => notFound('api_key_not_found', `no API key ${id}`, 'id');
    if (!isUuid(id)) throw unknownKey();
    try {
      await revokeApiKey(deps.db, id);
    } catch (err) {
      throw err instanceof NotFoundError ? unknownKey() : err;
    }
    res.json({ id, object: 'api_key', revoked: true });
  });

  r.get('/admin/v1/ledger/audit', async (_req, res) => {
    res.json(await auditLedger(deps.db, deps.audit));
  });

  return r;
}
