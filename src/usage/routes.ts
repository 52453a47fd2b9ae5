// GET /v2/usage (the caller's workspace) and GET /admin/v1/usage (any workspace, or all): usage per
// bucket and group, as JSON or, with `format=csv` or `Accept: text/csv`, the same rows as CSV.
import type { Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import type { Db } from '../db/pool.js';
import { principalOf } from '../http/auth.js';
import { ApiRouter, type RouteContract } from '../http/openapi.js';
import { notFound } from '../errors.js';
import { AdminUsageQuery, Usage, USAGE_ROWS_MAX, UsageQuery, type UsageGroup } from './schemas.js';
import { readUsage, usageCsv, type UsageRequest } from './service.js';

const RANGE_400 =
  'Invalid `start`, `end`, `bucket`, `group_by` or `format`, `error.param` naming it; a range longer than 31 days by hour, ' +
  `400 days by day or 10 years by month, or one that would answer more than ${USAGE_ROWS_MAX} rows, names \`start\`.`;

const usageResponse = {
  description: `The usage. At most ${USAGE_ROWS_MAX} rows: narrow the range, take a larger bucket or fewer groups to stay within it.`,
  content: {
    'application/json': { schema: Usage },
    'text/csv': {
      schema: z
        .string()
        .describe('A header line, then one line per row: start,end, the grouped fields in the order named, then the counters.'),
    },
  },
};

const DESCRIPTION =
  'Requests (accepted ones only), their outcomes, what they produced and what they cost, per UTC hour, day or month of their ' +
  'creation, grouped by any of model, API key, kind (video, speech, voice_clone) and backend. Once everything in the range has ' +
  "settled, `cost_in_euro` summed over any grouping equals the jobs' `cost_in_euro` plus what speech cost, to the micro-euro.";

const getUsage = {
  method: 'get',
  path: '/v2/usage',
  operationId: 'getUsage',
  tag: 'Billing',
  summary: "This workspace's usage",
  description: DESCRIPTION,
  security: 'apiKey',
  requestParams: { query: UsageQuery },
  responses: { '200': usageResponse },
  errors: { 400: RANGE_400 },
} satisfies RouteContract;

const getAdminUsage = {
  method: 'get',
  path: '/admin/v1/usage',
  operationId: 'adminGetUsage',
  tag: 'Admin',
  summary: 'Usage of one workspace or all',
  description: `${DESCRIPTION} Across every workspace unless \`workspace_id\` names one; \`group_by\` also takes \`workspace\`.`,
  security: 'admin',
  requestParams: { query: AdminUsageQuery },
  responses: { '200': usageResponse },
  errors: { 400: RANGE_400, 404: 'No such workspace (workspace_not_found).' },
} satisfies RouteContract;

/** `format=csv`, or an Accept header that prefers CSV to JSON. */
const wantsCsv = (format: 'json' | 'csv' | undefined, req: Request) =>
  format === 'csv' || (format === undefined && req.accepts(['application/json', 'text/csv']) === 'text/csv');

async function answer(db: Db, q: UsageRequest & { format?: 'json' | 'csv' | undefined }, req: Request, res: Response) {
  const usage = await readUsage(db, q);
  if (!wantsCsv(q.format, req)) return res.json(usage);
  res
    .status(200)
    .type('text/csv; charset=utf-8')
    .set('Content-Disposition', `attachment; filename="usage-${usage.start}-${usage.end}-${usage.bucket}.csv"`)
    .send(usageCsv(usage, q.group_by ?? ([] as UsageGroup[])));
}

export function usageRoutes(deps: { auth: RequestHandler; admin: RequestHandler; db: Db }): ApiRouter {
  const api = new ApiRouter();

  api.route(getUsage, deps.auth, async ({ query }, req, res) => {
    await answer(deps.db, { ...query, workspaceId: principalOf(res).workspace_id }, req, res);
  });

  api.route(getAdminUsage, deps.admin, async ({ query }, req, res) => {
    const { workspace_id, ...rest } = query;
    if (workspace_id !== undefined) {
      const found = await deps.db.query('SELECT 1 FROM workspaces WHERE id = $1', [workspace_id]);
      if (found.rowCount === 0) throw notFound('workspace_not_found', 'no such workspace', 'workspace_id');
    }
    await answer(deps.db, { ...rest, workspaceId: workspace_id ?? null }, req, res);
  });

  return api;
}
