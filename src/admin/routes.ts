// Admin API: workspaces, credits, API keys (and their revocation), ledger audit. Behind ADMIN_TOKEN.
// Each operation's contract, then its handler.
import type { RequestHandler } from 'express';
import { z, type ZodError } from 'zod';
import type { Db } from '../db/pool.js';
import {
  AddCreditsBody,
  AdminVideoJob,
  ApiKey,
  ApiKeyRevoked,
  CreateApiKeyBody,
  CreateWorkspaceBody,
  LedgerAudit,
  SetWorkspaceLimitsBody,
  Workspace,
  WorkspaceCredits,
} from './schemas.js';
import { ApiRouter, json, type ContractHandler, type RouteContract } from '../http/openapi.js';
import { apiKeyBodySchema } from '../models/openapi-bodies.js';
import { jsonBody } from '../http/json-body.js';
import { invalidParam, notFound } from '../errors.js';
import { eurToMicroEurRounded, microEurToEur } from '../money.js';
import { addCredits, NotFoundError } from '../billing/ledger.js';
import { auditLedger, type AuditOptions } from '../billing/audit.js';
import {
  createApiKey,
  createWorkspace,
  getWorkspace,
  revokeApiKey,
  setWorkspaceLimits,
  type Workspace as WorkspaceRecord,
} from '../account/workspaces.js';
import { accountUpdateOf, presentAccount, updateAccount } from '../account/account.js';
import { Account, UpdateAccountBody } from '../account/schemas.js';
import { findSpeechModel, findVideoModel } from '../models/catalog.js';
import { isUuid } from '../ids.js';
import type { VideoJobsService } from '../video-jobs/service.js';
import { recordLedgerAudit } from '../metrics.js';
import { presentVideoJob } from '../video-jobs/present.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import { baseUrlOf } from '../http/base-url.js';

/** A euro amount of a request (bounded by its schema), rounded to the nearest micro-euro. */
function euroParam(name: string, amount_eur: number): number {
  const micro = eurToMicroEurRounded(amount_eur);
  if (micro === null) throw invalidParam(name, `${name} must be a number of euros up to 1000000`);
  return micro;
}

/** A workspace id of the path: anything but a UUID names no workspace, a 404 like an unknown one (`workspaceNotFound`). */
const WORKSPACE_ID = z.object({ id: z.string().refine(isUuid).describe('The workspace id.') });
const workspaceNotFound = (_err: ZodError, _where: string, params: unknown) =>
  notFound(
    'workspace_not_found',
    `no workspace ${typeof params === 'object' && params !== null && 'id' in params ? String(params.id) : ''}`,
    'id',
  );

export interface AdminRoutesDeps {
  db: Db;
  admin: RequestHandler;
  audit: AuditOptions;
  /** Video jobs, for the operator's inspection of a job and its workflow. */
  jobs: VideoJobsService;
  downloadUrls: DownloadUrlSigner;
  publicBaseUrl: string | undefined;
}

const adminCreateWorkspace = {
  method: 'post',
  path: '/admin/v1/workspaces',
  operationId: 'adminCreateWorkspace',
  tag: 'Admin',
  summary: 'Create a workspace',
  security: 'admin',
  body: { component: 'CreateWorkspaceBody', schema: CreateWorkspaceBody, example: { name: 'demo', credits_in_euro: 10 } },
  responses: { '201': json(Workspace, 'The new workspace.') },
  errors: { 400: undefined },
} satisfies RouteContract;

const adminGetWorkspace = {
  method: 'get',
  path: '/admin/v1/workspaces/{id}',
  operationId: 'adminGetWorkspace',
  tag: 'Admin',
  summary: 'Get a workspace and its balance',
  security: 'admin',
  requestParams: { path: WORKSPACE_ID },
  invalid: workspaceNotFound,
  responses: { '200': json(Workspace, 'The workspace.') },
  errors: { 404: 'No such workspace.' },
} satisfies RouteContract;

const adminSetWorkspaceLimits = {
  method: 'post',
  path: '/admin/v1/workspaces/{id}/limits',
  operationId: 'adminSetWorkspaceLimits',
  tag: 'Admin',
  summary: "Set a workspace's limits",
  description:
    'Applies to the next create: jobs already pending are never cancelled. `max_pending_jobs: null` restores the default (MAX_PENDING_JOBS_PER_WORKSPACE).',
  security: 'admin',
  requestParams: { path: WORKSPACE_ID },
  invalid: workspaceNotFound,
  body: { component: 'SetWorkspaceLimitsBody', schema: SetWorkspaceLimitsBody, example: { max_pending_jobs: 200 } },
  responses: { '200': json(Workspace, 'The workspace with its limits.') },
  errors: { 400: undefined, 404: 'No such workspace.' },
} satisfies RouteContract;

const adminUpdateWorkspaceAccount = {
  method: 'patch',
  path: '/admin/v1/workspaces/{id}/account',
  operationId: 'adminUpdateWorkspaceAccount',
  tag: 'Admin',
  summary: "Change a workspace's budget settings",
  description:
    "What the workspace's own PATCH /v2/account changes (the low balance alert), for an operator; fields left out are unchanged.",
  security: 'admin',
  requestParams: { path: WORKSPACE_ID },
  invalid: workspaceNotFound,
  body: { component: 'UpdateAccountBody', schema: UpdateAccountBody, example: { low_balance_threshold_in_euro: 5 } },
  responses: { '200': json(Account, "The workspace's account, changed.") },
  errors: { 400: undefined, 404: 'No such workspace.' },
} satisfies RouteContract;

const adminAddCredits = {
  method: 'post',
  path: '/admin/v1/workspaces/{id}/credits',
  operationId: 'adminAddCredits',
  tag: 'Admin',
  summary: 'Add credits to a workspace',
  description: 'With an `Idempotency-Key`, a retry adds the credits once and answers the same top-up.',
  security: 'admin',
  requestParams: { path: WORKSPACE_ID },
  invalid: workspaceNotFound,
  idempotent: true,
  body: { component: 'AddCreditsBody', schema: AddCreditsBody, example: { amount_in_euro: 25 } },
  responses: { '200': json(WorkspaceCredits, 'Added.') },
  errors: { 400: 'Invalid request, e.g. an amount below 0.000001 or above 1000000.', 404: 'No such workspace.' },
} satisfies RouteContract;

const adminCreateApiKey = {
  method: 'post',
  path: '/admin/v1/workspaces/{id}/api-keys',
  operationId: 'adminCreateApiKey',
  tag: 'Admin',
  summary: 'Create an API key',
  description: 'The key is shown once, in this answer. Without `models` it may use every model.',
  security: 'admin',
  requestParams: { path: WORKSPACE_ID },
  invalid: workspaceNotFound,
  // `models` names models of the catalog.
  body: { component: 'CreateApiKeyBody', schema: CreateApiKeyBody, example: { models: ['sim-video-1'] }, override: apiKeyBodySchema },
  responses: { '201': json(ApiKey, 'The new key.') },
  errors: { 400: 'Invalid request, e.g. an unknown model (`param: models.{i}`).', 404: 'No such workspace.' },
} satisfies RouteContract;

const adminRevokeApiKey = {
  method: 'delete',
  path: '/admin/v1/api-keys/{id}',
  operationId: 'adminRevokeApiKey',
  tag: 'Admin',
  summary: 'Revoke an API key',
  description: 'The key is refused (401) from the next request on, by every API process. Revoking a revoked key answers the same.',
  security: 'admin',
  requestParams: { path: z.object({ id: z.string().describe('The API key id (`id` of the key, not the key itself).') }) },
  responses: { '200': json(ApiKeyRevoked, 'Revoked.') },
  errors: { 404: 'No such API key (api_key_not_found).' },
} satisfies RouteContract;

const adminLedgerAudit = {
  method: 'get',
  path: '/admin/v1/ledger/audit',
  operationId: 'adminLedgerAudit',
  tag: 'Admin',
  summary: 'Audit the ledger',
  security: 'admin',
  responses: { '200': json(LedgerAudit, 'The audit (ok or not).') },
} satisfies RouteContract;

const adminInspectVideoJob = {
  method: 'get',
  path: '/admin/v1/video-jobs/{id}',
  operationId: 'adminInspectVideoJob',
  tag: 'Admin',
  summary: "Inspect a video job: its record beside its workflow's answer",
  description:
    "Customers' reads answer from the job's record, which the workflow's activities keep current; this " +
    "asks the job's workflow itself (the jobState query, a workflow task on a worker), " +
    'so an operator can see both. Any workspace.',
  security: 'admin',
  requestParams: { path: z.object({ id: z.string().describe('The job id.') }) },
  responses: { '200': json(AdminVideoJob, 'The job and its workflow.') },
  errors: { 404: 'No such job (job_not_found).' },
} satisfies RouteContract;

const presentWorkspace = (w: WorkspaceRecord) => ({
  id: w.id,
  object: 'workspace',
  name: w.name,
  balance_in_euro: microEurToEur(w.balance_micro_eur),
  max_pending_jobs: w.max_pending_jobs,
});

function createApiKeyHandler(deps: AdminRoutesDeps): ContractHandler<typeof adminCreateApiKey> {
  return async ({ params, body }, _req, res) => {
    const id = params.id;
    // The catalog decides which model ids exist: checked here, not by the body's schema.
    for (const [i, m] of (body.models ?? []).entries()) {
      if (!findVideoModel(m) && !findSpeechModel(m)) throw invalidParam(`models.${i}`, `unknown model "${m}"`);
    }
    const spend_limit_micro_eur =
      body.spend_limit_in_euro === undefined ? null : euroParam('spend_limit_in_euro', body.spend_limit_in_euro);
    const key = await createApiKey(deps.db, {
      workspaceId: id,
      models: body.models ? [...new Set(body.models)] : null,
      spend_limit_micro_eur,
    });
    res.status(201).json({
      id: key.id,
      object: 'api_key',
      key: key.key,
      models: key.models,
      spend_limit_in_euro: key.spend_limit_micro_eur === null ? null : microEurToEur(key.spend_limit_micro_eur),
    });
  };
}

function inspectVideoJobHandler(deps: AdminRoutesDeps): ContractHandler<typeof adminInspectVideoJob> {
  return async ({ params: { id } }, req, res) => {
    const inspected = await deps.jobs.inspect(id);
    if (!inspected.record) throw notFound('job_not_found', `no video generation job ${id}`, 'id');
    const baseUrl = baseUrlOf(req, deps.publicBaseUrl);
    const live = inspected.workflow.state;
    res.json({
      id,
      object: 'admin.video_job',
      record: await presentVideoJob(inspected.record, deps.downloadUrls, baseUrl),
      workflow: {
        status: live?.status ?? null,
        state: live ? await presentVideoJob(live, deps.downloadUrls, baseUrl) : null,
        failure: inspected.workflow.failure,
      },
    });
  };
}

export function adminRoutes(deps: AdminRoutesDeps): ApiRouter {
  const api = new ApiRouter();
  api.router.use('/admin', deps.admin);

  api.route(adminCreateWorkspace, jsonBody, async ({ body }, _req, res) => {
    const credits = body.credits_in_euro === undefined ? 0 : euroParam('credits_in_euro', body.credits_in_euro);
    const w = await createWorkspace(deps.db, { name: body.name, credits_micro_eur: credits });
    res.status(201).json(presentWorkspace(w));
  });

  api.route(adminGetWorkspace, async ({ params }, _req, res) => {
    res.json(presentWorkspace(await getWorkspace(deps.db, params.id)));
  });

  api.route(adminSetWorkspaceLimits, jsonBody, async ({ params, body }, _req, res) => {
    const id = params.id;
    res.json(presentWorkspace(await setWorkspaceLimits(deps.db, id, body)));
  });

  api.route(adminUpdateWorkspaceAccount, jsonBody, async ({ params, body }, _req, res) => {
    res.json(presentAccount(await updateAccount(deps.db, params.id, accountUpdateOf(body))));
  });

  api.route(adminAddCredits, jsonBody, async ({ params, body, idempotencyKey }, _req, res) => {
    const id = params.id;
    const amount = euroParam('amount_in_euro', body.amount_in_euro);
    const result = await addCredits(deps.db, { workspaceId: id, amount_micro_eur: amount, idempotencyKey });
    res.json({ id, object: 'workspace', balance_in_euro: microEurToEur(result.balance_micro_eur), topup_id: result.topup_id });
  });

  api.route(adminCreateApiKey, jsonBody, createApiKeyHandler(deps));

  api.route(adminRevokeApiKey, async ({ params: { id } }, _req, res) => {
    const unknownKey = () => notFound('api_key_not_found', `no API key ${id}`, 'id');
    if (!isUuid(id)) throw unknownKey();
    try {
      await revokeApiKey(deps.db, id);
    } catch (err) {
      throw err instanceof NotFoundError ? unknownKey() : err;
    }
    res.json({ id, object: 'api_key', revoked: true });
  });

  api.route(adminLedgerAudit, async (_input, _req, res) => {
    const report = await auditLedger(deps.db, deps.audit);
    recordLedgerAudit(report);
    res.json(report);
  });

  api.route(adminInspectVideoJob, inspectVideoJobHandler(deps));

  return api;
}
