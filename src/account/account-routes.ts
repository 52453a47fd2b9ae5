// GET and PATCH /v2/account: the caller's workspace, its balance and budget settings (./account.ts).
import type { RequestHandler } from 'express';
import type { Db } from '../db/pool.js';
import { principalOf } from '../http/auth.js';
import { jsonBody } from '../http/json-body.js';
import { ApiRouter, json, type RouteContract } from '../http/openapi.js';
import { Account, UpdateAccountBody } from './schemas.js';
import { accountUpdateOf, getAccount, presentAccount, updateAccount, type AutoTopUpPolicy } from './account.js';

const getAccountOperation = {
  method: 'get',
  path: '/v2/account',
  operationId: 'getAccount',
  tag: 'Billing',
  summary: "This workspace's account",
  description: 'The balance, what is owed, and the budget settings: the low balance alert and automatic top-up.',
  security: 'apiKey',
  responses: { '200': json(Account, 'The account.') },
} satisfies RouteContract;

const updateAccountOperation = {
  method: 'patch',
  path: '/v2/account',
  operationId: 'updateAccount',
  tag: 'Billing',
  summary: "Change this workspace's budget settings",
  description:
    'Sets the low balance alert (`low_balance_threshold_in_euro`; null turns it off): a charge leaving the balance below it sends the ' +
    'webhook event `balance.low`, once, then again only after a credit brought the balance back to or above it. Sets automatic top-up ' +
    '(`auto_top_up`; null turns it off). Fields left out are unchanged.',
  security: 'apiKey',
  body: { component: 'UpdateAccountBody', schema: UpdateAccountBody, example: { low_balance_threshold_in_euro: 5 } },
  responses: { '200': json(Account, 'The account, changed.') },
  errors: {
    400:
      'Invalid request, e.g. a threshold below 0 or above 1000000 (naming the field), or automatic top-up without a card saved by a paid ' +
      'Checkout (payment_method_required) or outside the top-up bounds.',
    429: undefined,
    503: 'Automatic top-up asked for, and buying credits is not configured here (billing_not_configured).',
  },
} satisfies RouteContract;

export function accountRoutes(deps: { auth: RequestHandler; limit: RequestHandler; db: Db; autoTopUp?: AutoTopUpPolicy }): ApiRouter {
  const api = new ApiRouter();

  api.route(getAccountOperation, deps.auth, async (_input, _req, res) => {
    res.json(presentAccount(await getAccount(deps.db, principalOf(res).workspace_id), deps.autoTopUp?.checkoutBounds ?? null));
  });

  api.route(updateAccountOperation, deps.auth, deps.limit, jsonBody, async ({ body }, _req, res) => {
    const updated = await updateAccount(deps.db, principalOf(res).workspace_id, accountUpdateOf(body), deps.autoTopUp);
    res.json(presentAccount(updated, deps.autoTopUp?.checkoutBounds ?? null));
  });

  return api;
}
