// API keys against the real Temporal server: temporal-server (mTLS, stores on the run's PostgreSQL) with
// its JWT authorizer and default claim mapper (`authorizer: default`, `claimMapper: default`,
// `permissionsClaimName`), its signing keys from a JWKS this test serves over HTTP. The service's
// processes authenticate with TEMPORAL_API_KEY (sent as `authorization: Bearer <key>`): a key with
// a role on the namespace runs a job to the end; a key for another namespace, or one whose signature
// the JWKS does not verify, is refused by the server, and a process given it stops at startup with one line.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import type { Connection } from '@temporalio/client';
import { connectWithCert, serverTopologyMissing, startTemporalServer, type TemporalServer } from '../helpers/server-infra.js';
import { freePort } from '../helpers/infra.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { ADMIN_TOKEN, createTestDatabase, http as request, infra, simJob } from '../helpers/stack.js';

const PERMISSIONS_CLAIM = 'permissions';

interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  jwk: Record<string, unknown>;
}

function signingKey(kid: string): SigningKey {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' } };
}

/** A JWT (RS256) with `sub` and the permissions claim, valid for an hour. */
function token(key: SigningKey, permissions: string[]): string {
  const now = Math.floor(Date.now() / 1000);
  const part = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const signed = `${part({ alg: 'RS256', typ: 'JWT', kid: key.kid })}.${part({ sub: 'video-api', iat: now, exp: now + 3600, [PERMISSIONS_CLAIM]: permissions })}`;
  return `${signed}.${sign('sha256', Buffer.from(signed), key.privateKey).toString('base64url')}`;
}

const missing = serverTopologyMissing();
const published = signingKey('video-api-test-1');
/** Same kid, another private key: its signatures do not verify against the published key. */
const forged = signingKey('video-api-test-1');

let jwks: http.Server;
let server: TemporalServer;
let root: string;
const children: ChildProcess[] = [];
const connections: Connection[] = [];

/** The environment of a service process on this server, with `apiKey`. */
async function serviceEnv(apiKey: string): Promise<Record<string, string>> {
  return {
    ...server.clientEnv,
    TEMPORAL_API_KEY: apiKey,
    DATABASE_URL: await createTestDatabase(),
    TEMPORAL_TASK_QUEUE: `auth-${randomUUID()}`,
    ADMIN_TOKEN,
    URL_SIGNING_SECRET: 'test-url-signing-secret-0123456789abcdef',
    DATA_DIR: fs.mkdtempSync(path.join(root, 'data-')),
    SIMULATOR: 'on',
    VIDEO_POLL_INTERVAL_MS: '200',
    PORT: String(await freePort()),
  };
}

/** Starts an API process with `apiKey`: null once it is ready, else the lines it printed before exiting. */
async function refusal(apiKey: string): Promise<string[] | null> {
  const env = await serviceEnv(apiKey);
  return startEntryProcess({ env }, 'api', { track: children }).then(
    () => null,
    (err: Error) => err.message.split('\n').filter((l) => l.trim() !== '' && !l.includes(' WARN ')),
  );
}

describe("API keys against temporal-server's JWT authorizer", { skip: missing ?? false }, () => {
  before(async () => {
    jwks = http.createServer((req, res) => {
      res.writeHead(req.url === '/.well-known/jwks.json' ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [published.jwk] }));
    });
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    root = fs.mkdtempSync(path.join(infra().tmp, 'temporal-auth-'));
    const started = Date.now();
    server = await startTemporalServer({
      root,
      postgresUrl: infra().databaseUrl,
      databasePrefix: `temporal_auth_${randomUUID().slice(0, 8)}`,
      authorization: {
        jwksUrl: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/.well-known/jwks.json`,
        permissionsClaimName: PERMISSIONS_CLAIM,
        adminApiKey: token(published, ['temporal-system:admin']),
      },
    });
    process.stderr.write(
      `temporal-server with the JWT authorizer up in ${Date.now() - started} ms: ${JSON.stringify(server.timings_ms)}\n`,
    );
  });
  after(async () => {
    killAll(children);
    for (const c of connections) await c.close().catch(() => {});
    await server?.stop();
    await new Promise((r) => jwks?.close(r));
  });

  test('the server itself: a key for the namespace is served; no key, a key for another namespace or a forged one is PermissionDenied', async () => {
    const describeWith = async (apiKey?: string) => {
      const conn = await connectWithCert(server.address, server.certs, apiKey);
      connections.push(conn);
      return conn.workflowService.describeNamespace({ namespace: 'default' });
    };
    const ns = await describeWith(token(published, ['default:write']));
    assert.equal(ns.namespaceInfo?.name, 'default');
    for (const apiKey of [undefined, token(published, ['other:admin']), token(forged, ['default:admin'])]) {
      // A token that does not verify is refused on every call (the connection's first one included);
      // a verified token without a role on the namespace, on the namespace's calls.
      await assert.rejects(describeWith(apiKey), (err: Error & { code?: number; cause?: { code?: number } }) => {
        assert.equal(err.code ?? err.cause?.code, 7, `PERMISSION_DENIED: ${err.message}`);
        return true;
      });
    }
  });

  test('the service with a key allowed for the namespace runs a job to the end', async () => {
    const env = await serviceEnv(token(published, ['default:write']));
    await startEntryProcess({ env }, 'worker', { track: children });
    await startEntryProcess({ env }, 'api', { track: children });
    const api = `http://127.0.0.1:${env['PORT']}`;
    const ws = await request(api, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: { name: 'auth', credits_in_euro: 2 } });
    assert.equal(ws.status, 201, JSON.stringify(ws.body));
    const key = await request(api, 'POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, { token: ADMIN_TOKEN, json: {} });
    const created = await request(api, 'POST', '/v2/videos/generations', { token: key.body.key, json: simJob() });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    let job: any;
    for (let i = 0; ; i++) {
      job = (await request(api, 'GET', `/v2/videos/generations/${created.body.id}`, { token: key.body.key })).body;
      if (job.status !== 'pending') break;
      assert.ok(i < 300, 'job still pending');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    const audit = await request(api, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
    assert.equal(audit.body.ok, true, JSON.stringify(audit.body));
  });

  test('a key for another namespace, or with a bad signature: the process stops at startup with one line, the key not in it', async () => {
    for (const apiKey of [token(published, ['other:admin']), token(forged, ['default:admin'])]) {
      const lines = await refusal(apiKey);
      assert.ok(lines, 'the process must not start');
      assert.equal(lines.length, 1, lines.join('\n'));
      assert.match(lines[0]!, /refused this process's credentials \(PERMISSION_DENIED: Request unauthorized\.\); check TEMPORAL_API_KEY/);
      assert.ok(!lines[0]!.includes(apiKey.split('.')[2]!), 'the key is not printed');
    }
  });
});
