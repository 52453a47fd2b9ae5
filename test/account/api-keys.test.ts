// API key revocation: DELETE /admin/v1/api-keys/{id} and the CLI's `key revoke`.
// A revoked key gets 401 at once on the API process that revoked it, and within API_KEY_CACHE_TTL_MS on
// another one (a real `npm run api` process on the same database, which remembers a key it found active
// that long); revoking is idempotent; other keys keep working.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { adminCli } from '../helpers/admin-cli.js';
import { freePort } from '../helpers/infra.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { ADMIN_TOKEN, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { API_KEY_CACHE_TTL_MS } from '../../src/account/workspaces.js';

let stack: Stack;
const children: ChildProcess[] = [];
before(async () => {
  stack = await startStack({ worker: false });
});
after(async () => {
  killAll(children);
  await stack.stop();
});

async function newKey(workspaceId: string) {
  const r = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
  assert.equal(r.status, 201);
  return r.body as { id: string; key: string };
}

test('a revoked key gets 401 at once where it was revoked and within seconds on every other API process; revoking again answers the same; other keys keep working', async () => {
  const c = await newCustomer(stack, 1);
  const key = await newKey(c.workspaceId);
  const port = await freePort();
  await startEntryProcess(stack, 'api', { env: { PORT: String(port) }, track: children });
  const second = `http://127.0.0.1:${port}`;
  for (const base of [stack.baseUrl, second]) assert.equal((await http(base, 'GET', '/v2/balance', { token: key.key })).status, 200);

  const revoked = await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${key.id}`, { token: ADMIN_TOKEN });
  assert.equal(revoked.status, 200);
  assert.deepEqual(revoked.body, { id: key.id, object: 'api_key', revoked: true });
  const revoked_ms = Date.now();
  for (const base of [stack.baseUrl, second]) {
    let r = await http(base, 'GET', '/v2/balance', { token: key.key });
    // The other process may answer from its short cache of active keys until that entry expires.
    while (base === second && r.status === 200 && Date.now() - revoked_ms < API_KEY_CACHE_TTL_MS + 1_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      r = await http(base, 'GET', '/v2/balance', { token: key.key });
    }
    assert.equal(r.status, 401, base);
    assert.equal(r.body.error.code, 'invalid_api_key');
    assert.equal(r.headers.get('www-authenticate'), 'Bearer');
  }
  const again = await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${key.id}`, { token: ADMIN_TOKEN });
  assert.deepEqual([again.status, again.body], [200, revoked.body]);
  assert.equal((await http(second, 'GET', '/v2/balance', { token: c.key })).status, 200, 'the workspace and its other keys are untouched');
});

test('unknown or malformed ids are 404; the admin token is required', async () => {
  for (const id of [randomUUID(), 'not-a-uuid']) {
    const r = await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${id}`, { token: ADMIN_TOKEN });
    assert.equal(r.status, 404);
    assert.deepEqual(r.body.error, { type: 'not_found_error', code: 'api_key_not_found', message: `no API key ${id}`, param: 'id' });
  }
  const c = await newCustomer(stack, 1);
  const key = await newKey(c.workspaceId);
  for (const token of [undefined, c.key]) {
    assert.equal((await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${key.id}`, token ? { token } : {})).status, 401);
  }
  assert.equal((await http(stack.baseUrl, 'GET', '/v2/balance', { token: key.key })).status, 200, 'still valid');
});

test('CLI: key revoke --id K prints the answer; an unknown id exits 1 with the error', async () => {
  const c = await newCustomer(stack, 1);
  const key = await newKey(c.workspaceId);
  const ok = await adminCli(stack.baseUrl, ['key', 'revoke', '--id', key.id]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.deepEqual(JSON.parse(ok.stdout), { id: key.id, object: 'api_key', revoked: true });
  assert.equal((await http(stack.baseUrl, 'GET', '/v2/balance', { token: key.key })).status, 401);
  const unknown = await adminCli(stack.baseUrl, ['key', 'revoke', '--id', randomUUID()]);
  assert.equal(unknown.code, 1);
  assert.equal(JSON.parse(unknown.stdout).error.code, 'api_key_not_found');
  const missing = await adminCli(stack.baseUrl, ['key', 'revoke']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /missing --id/);
});
