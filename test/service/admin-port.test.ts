// ADMIN_PORT: the operators' API on a listener of its own. Customers' port answers /admin with a 404 (as
// an unknown route), the admin listener serves /admin (with ADMIN_TOKEN), the probes and the metrics,
// and nothing of the customers' API. Without ADMIN_PORT, /admin stays on PORT.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, http, startStack, type Stack } from '../helpers/stack.js';

const WORKSPACE = { name: 'admin-port', credits_in_euro: 1 };

describe('ADMIN_PORT', () => {
  let split: Stack;
  let shared: Stack;
  before(async () => {
    split = await startStack({ worker: false, env: { ADMIN_PORT: '0' } });
    shared = await startStack({ worker: false });
  });
  after(async () => {
    await split?.stop();
    await shared?.stop();
  });

  test('the admin API is served on its own port only; the customer port answers 404 for it', async () => {
    const adminUrl = split.api.adminUrl;
    assert.ok(adminUrl && adminUrl !== split.baseUrl, 'a listener of its own');
    const onCustomerPort = await http(split.baseUrl, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: WORKSPACE });
    assert.equal(onCustomerPort.status, 404);
    assert.equal(onCustomerPort.body.error.code, 'route_not_found');
    assert.equal((await http(adminUrl, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: WORKSPACE })).status, 201);
    assert.equal((await http(adminUrl, 'POST', '/admin/v1/workspaces', { json: WORKSPACE })).status, 401, 'still behind ADMIN_TOKEN');
    assert.equal((await http(adminUrl, 'GET', '/livez')).status, 200);
    assert.equal((await http(adminUrl, 'GET', '/v2/models')).status, 404, "no customers' route");
    assert.equal((await http(split.baseUrl, 'GET', '/v2/models')).status, 401, 'served on PORT (asking for a key)');
  });

  test('without it, the admin API stays on PORT', async () => {
    assert.equal(shared.api.adminUrl, undefined);
    assert.equal((await http(shared.baseUrl, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: WORKSPACE })).status, 201);
  });
});
