// Reaching a secured Temporal with Temporal's own client configuration (TEMPORAL_ADDRESS, TEMPORAL_TLS_*,
// TEMPORAL_API_KEY, TEMPORAL_CONFIG_FILE): the dev server behind a TLS front that requires a client
// certificate signed by its CA (mTLS) and an API key in the `authorization` metadata (test/helpers/
// grpc-tls-proxy.ts). Every refusal stops `npm run api` / `npm run worker` with one line saying which
// and how to fix it; the API key and the client certificate rotate while jobs run, and no job is lost.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { createTestCa, type TestCa } from '../helpers/tls-certs.js';
import { startGrpcTlsProxy, type GrpcTlsProxy } from '../helpers/grpc-tls-proxy.js';
import {
  assertAuditHolds,
  balanceMicro,
  createTestDatabase,
  http,
  infra,
  newCustomer,
  simJob,
  startStack,
  waitForJob,
} from '../helpers/stack.js';
import { connectClient } from '../../src/temporal/client.js';
import { describeSecurity } from '../../src/temporal/connection-config.js';
import { checkSearchAttributes } from '../../src/temporal/search-attributes.js';
import { loadConfig, ConfigError } from '../../src/config.js';
import { msToTs } from '@temporalio/common/lib/time.js';

let dir: string;
let ca: TestCa;
let otherCa: TestCa;
let proxy: GrpcTlsProxy;
const API_KEY = 'tk-first-0123456789abcdefghijklmnop';

before(async () => {
  dir = fs.mkdtempSync(path.join(infra().tmp, 'temporal-tls-'));
  ca = createTestCa(path.join(dir, 'ca'));
  otherCa = createTestCa(path.join(dir, 'other-ca'), 'some other CA');
  const server = ca.server('localhost');
  proxy = await startGrpcTlsProxy({
    upstream: infra().temporalAddress,
    cert: server.cert,
    key: server.key,
    clientCa: ca.cert,
    apiKeys: [API_KEY],
  });
});
after(async () => {
  await proxy?.close();
});

/** Temporal's variables for a client certificate, trusting `serverCa` for the server's. */
const mtlsEnv = (pair: { certPath: string; keyPath: string }, serverCa: TestCa = ca) => ({
  TEMPORAL_ADDRESS: proxy.address,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: serverCa.certPath,
  TEMPORAL_TLS_CLIENT_CERT_PATH: pair.certPath,
  TEMPORAL_TLS_CLIENT_KEY_PATH: pair.keyPath,
});

/** Runs an entry point to its exit; its stderr and exit code. */
async function runEntry(
  entry: 'api' | 'worker',
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const base: Record<string, string> = {};
  // Only this test's Temporal variables: none inherited from the shell running the tests.
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('TEMPORAL_') && !k.startsWith('TEST_')) base[k] = v;
  const child = spawn(process.execPath, ['--import', 'tsx', `src/${entry}-main.ts`], {
    env: {
      ...base,
      DATABASE_URL: await createTestDatabase(),
      DATA_DIR: fs.mkdtempSync(path.join(dir, 'data-')),
      PORT: '0',
      LOG_LEVEL: 'info',
      TEMPORAL_TASK_QUEUE: `tls-${Math.random().toString(36).slice(2)}`,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.on('data', (d) => (stdout += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  clearTimeout(timer);
  return { code, stderr, stdout };
}

function assertRefusal(
  r: { code: number | null; stderr: string; stdout: string },
  entry: string,
  pattern: RegExp,
  secrets: string[] = [],
): void {
  assert.notEqual(r.code, 0, `${entry} should have refused to start: ${r.stderr}${r.stdout}`);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line: ${r.stderr}`);
  assert.match(lines[0]!, new RegExp(`^${entry}: `));
  assert.match(lines[0]!, pattern);
  assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at |Error:/, 'no stack trace');
  for (const s of secrets) assert.ok(!(r.stderr + r.stdout).includes(s.trim().split('\n')[1] ?? s), 'no secret in the output');
}

describe('startup refusals: one line, which and how to fix, non-zero exit', () => {
  test('a server that requires a client certificate, reached without one (API and worker)', async () => {
    for (const entry of ['api', 'worker'] as const) {
      const r = await runEntry(entry, {
        TEMPORAL_ADDRESS: proxy.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.certPath,
        TEMPORAL_API_KEY: API_KEY,
      });
      assertRefusal(
        r,
        entry,
        /requires a client certificate \(mTLS\): set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/,
        [API_KEY],
      );
    }
  });

  test('a client certificate from a CA the server does not trust; a server certificate from a CA we do not trust; an expired client certificate', async () => {
    const foreign = otherCa.client('foreign');
    const r1 = await runEntry('api', mtlsEnv(foreign));
    assertRefusal(r1, 'api', /refused the client certificate \(not signed by a CA it trusts, or revoked\)/, [foreign.key]);

    const good = ca.client('good');
    const r2 = await runEntry('worker', mtlsEnv(good, otherCa));
    assertRefusal(r2, 'worker', /presents a certificate signed by an unknown CA .*set TEMPORAL_TLS_SERVER_CA_CERT_PATH/, [good.key]);

    const expired = ca.client('expired', { days: -1 });
    const r3 = await runEntry('api', mtlsEnv(expired));
    assertRefusal(
      r3,
      'api',
      /the Temporal client certificate expired on .*; the server refuses it: renew it \(TEMPORAL_TLS_CLIENT_CERT_PATH\)/,
      [expired.key],
    );
  });

  test('a wrong API key (API and worker); an unknown namespace', async () => {
    const good = ca.client('good-2');
    const tlsEnv = mtlsEnv(good);
    const wrongKey = 'tk-wrong-0123456789abcdefghijklmnop';
    for (const entry of ['api', 'worker'] as const) {
      const r = await runEntry(entry, { ...tlsEnv, TEMPORAL_API_KEY: wrongKey });
      assertRefusal(r, entry, /refused this process's credentials \(UNAUTHENTICATED: invalid API key\); check TEMPORAL_API_KEY/, [
        wrongKey,
      ]);
      assert.ok(!(r.stderr + r.stdout).includes(wrongKey));
    }
    const r = await runEntry('api', { ...tlsEnv, TEMPORAL_API_KEY: API_KEY, TEMPORAL_NAMESPACE: 'no-such-namespace' });
    assertRefusal(
      r,
      'api',
      /the Temporal namespace "no-such-namespace" does not exist at .*; set TEMPORAL_NAMESPACE to an existing one, or create it/,
    );
  });

  test('a plaintext connection to a TLS server; TLS to a plaintext server; a profile that does not exist', async () => {
    const r1 = await runEntry('api', { TEMPORAL_ADDRESS: proxy.address });
    assertRefusal(r1, 'api', /does not answer gRPC in plaintext; if it requires TLS, set TEMPORAL_TLS=true/);
    const r2 = await runEntry('worker', { TEMPORAL_ADDRESS: infra().temporalAddress, TEMPORAL_TLS: 'true' });
    assertRefusal(r2, 'worker', /did not answer TLS .*set TEMPORAL_TLS=false/);
    const toml = path.join(dir, 'temporal.toml');
    fs.writeFileSync(toml, '[profile.default]\naddress = "127.0.0.1:1"\n');
    assert.throws(
      () => loadConfig({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, /Temporal profile "prod" \(TEMPORAL_PROFILE\) is not in .*temporal\.toml/);
        return true;
      },
    );
  });

  test('missing search attributes in the namespace', async () => {
    const good = ca.client('good-3');
    const client = await connectClient({ address: infra().temporalAddress, namespace: 'default' });
    const ns = `bare-${Math.random().toString(36).slice(2, 8)}`;
    await client.workflowService.registerNamespace({ namespace: ns, workflowExecutionRetentionPeriod: msToTs(86_400_000) });
    await client.connection.close();
    const lacks = new RegExp(
      `Temporal namespace "${ns}" lacks the Keyword search attribute\\(s\\) WorkspaceId, VideoModel, VideoJobStatus; add them: temporal operator search-attribute create`,
    );
    const r = await runEntry('worker', { ...mtlsEnv(good), TEMPORAL_NAMESPACE: ns, TEMPORAL_API_KEY: API_KEY });
    assertRefusal(r, 'worker', lacks);

    // Where the operator service is refused (Temporal Cloud), the attributes are looked up by visibility
    // queries instead: the same line for the worker's native connection and the API's client.
    proxy.operatorService = false;
    try {
      const refusedBefore = proxy.refused;
      assertRefusal(await runEntry('worker', { ...mtlsEnv(good), TEMPORAL_NAMESPACE: ns, TEMPORAL_API_KEY: API_KEY }), 'worker', lacks);
      assert.ok(proxy.refused > refusedBefore, 'the operator service was asked and refused');
      const settings = loadConfig({ ...mtlsEnv(good), TEMPORAL_API_KEY: API_KEY }).temporal.connection;
      const secured = await connectClient({ ...settings.connect, namespace: 'default' });
      try {
        await checkSearchAttributes(secured.connection, 'default', settings.connect);
        await assert.rejects(checkSearchAttributes(secured.connection, ns, settings.connect), lacks);
      } finally {
        await secured.connection.close();
      }
    } finally {
      proxy.operatorService = true;
    }
  });
});

/** Replaces a file as a secret manager does: a new file renamed over the old one. */
function replace(file: string, text: string): void {
  fs.writeFileSync(`${file}.new`, text);
  fs.renameSync(`${file}.new`, file);
}

/** A log destination kept in memory, and a wait for lines matching a pattern. */
function captureLogs() {
  let logs = '';
  const logStream = new Writable({
    write(chunk, _enc, cb) {
      logs += chunk.toString();
      cb();
    },
  });
  const waitForLog = async (pattern: RegExp, count: number) => {
    const deadline = Date.now() + 30_000;
    while ((logs.match(new RegExp(pattern.source, 'g')) ?? []).length < count) {
      assert.ok(Date.now() < deadline, `no ${count} x ${pattern} in the logs: ${logs}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { logStream, waitForLog, text: () => logs };
}

describe('a secured Temporal: mTLS and an API key from a Temporal profile file', () => {
  test('the API key and the client certificate rotate while jobs run: no job lost, billing exact, no credential in the logs', async () => {
    const certDir = path.join(dir, 'rotating');
    fs.mkdirSync(certDir);
    const certPath = path.join(certDir, 'client.crt');
    const keyPath = path.join(certDir, 'client.key');
    const toml = path.join(certDir, 'temporal.toml');
    const first = ca.client('service-v1');
    replace(certPath, first.cert);
    replace(keyPath, first.key);
    replace(toml, `[profile.default]\napi_key = "${API_KEY}"\n`);
    proxy.clientNames = new Set(['service-v1']);
    proxy.seenClientNames.length = 0;

    const { logStream, waitForLog, text: logs } = captureLogs();
    const stack = await startStack({
      logStream,
      env: {
        LOG_LEVEL: 'info',
        TEMPORAL_ADDRESS: proxy.address,
        TEMPORAL_CONFIG_FILE: toml,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.certPath,
        TEMPORAL_TLS_CLIENT_CERT_PATH: certPath,
        TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath,
        TEMPORAL_CREDENTIALS_CHECK_INTERVAL_MS: '200',
      },
    });
    try {
      const customer = await newCustomer(stack, 20);
      const create = async (i: number) => {
        const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
          token: customer.key,
          json: simJob({ delay_ms: 4_000 }, { prompt: `rotation ${i}` }),
        });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        return r.body.id as string;
      };
      const jobs = await Promise.all(Array.from({ length: 6 }, (_, i) => create(i)));

      // The API key: the profile file gets a new one; the server accepts both for the switch, then only the new.
      const secondKey = 'tk-second-0123456789abcdefghijklmno';
      proxy.apiKeys.add(secondKey);
      replace(toml, `[profile.default]\napi_key = "${secondKey}"\n`);
      await waitForLog(/Temporal credentials rotated/, 2); // the API's client and the worker's connection
      proxy.apiKeys.delete(API_KEY);
      const refusedBefore = proxy.refused;
      jobs.push(...(await Promise.all([6, 7].map(create))));

      // The client certificate: new files; the server then accepts only the new certificate.
      const second = ca.client('service-v2');
      proxy.clientNames.add('service-v2');
      replace(keyPath, second.key);
      replace(certPath, second.cert);
      await waitForLog(/"tls_changed":true/, 2);
      proxy.clientNames = new Set(['service-v2']);
      jobs.push(...(await Promise.all([8, 9].map(create))));
      // SIGHUP re-reads too (nothing changed: no rotation logged, nothing breaks).
      process.kill(process.pid, 'SIGHUP');

      for (const id of jobs) {
        const job = await waitForJob(stack, customer.key, id, 60_000);
        assert.equal(job.status, 'succeeded', JSON.stringify(job));
      }
      assert.deepEqual(proxy.seenClientNames, ['service-v1', 'service-v2']);
      assert.equal(proxy.refused, refusedBefore, 'no call was made with a revoked credential after the rotation');
      assert.equal(await balanceMicro(stack, customer.workspaceId), 20_000_000 - jobs.length * 400_000);
      await assertAuditHolds(stack);
      assert.match(logs(), /Temporal credentials rotated/);
      for (const secret of [API_KEY, secondKey, first.key, second.key, first.cert, second.cert]) {
        const sample = secret.includes('\n') ? secret.split('\n')[1]! : secret;
        assert.ok(!logs().includes(sample), 'a credential appears in the logs');
      }
    } finally {
      await stack.stop();
    }
  });

  test('SIGHUP alone applies a new API key (the file check is hours away); the old key is then refused and nothing fails', async () => {
    const keyDir = path.join(dir, 'sighup');
    fs.mkdirSync(keyDir);
    const toml = path.join(keyDir, 'temporal.toml');
    const client = ca.client('sighup');
    const keys = ['tk-sighup-a-0123456789abcdefghijklm', 'tk-sighup-b-0123456789abcdefghijklm'];
    replace(toml, `[profile.default]\napi_key = "${keys[0]}"\n`);
    proxy.apiKeys = new Set([keys[0]!]);
    proxy.clientNames = null;
    const { logStream, waitForLog } = captureLogs();
    const stack = await startStack({
      logStream,
      env: { LOG_LEVEL: 'info', ...mtlsEnv(client), TEMPORAL_CONFIG_FILE: toml, TEMPORAL_CREDENTIALS_CHECK_INTERVAL_MS: '3600000' },
    });
    try {
      proxy.apiKeys.add(keys[1]!);
      replace(toml, `[profile.default]\napi_key = "${keys[1]}"\n`);
      process.kill(process.pid, 'SIGHUP');
      await waitForLog(/"reason":"SIGHUP".*"api_key_changed":true.*Temporal credentials rotated/, 2);
      proxy.apiKeys.delete(keys[0]!);
      const refusedBefore = proxy.refused;
      const customer = await newCustomer(stack, 5);
      const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, json: simJob() });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      assert.equal((await waitForJob(stack, customer.key, r.body.id, 60_000)).status, 'succeeded');
      assert.equal(proxy.refused, refusedBefore);
    } finally {
      await stack.stop();
    }
  });
  test('a new API key Temporal refuses is not applied: the current key stays in use and jobs still run', async () => {
    const keyDir = path.join(dir, 'refused-key');
    fs.mkdirSync(keyDir);
    const toml = path.join(keyDir, 'temporal.toml');
    const client = ca.client('refused-key');
    const goodKey = 'tk-good-0123456789abcdefghijklmnopq';
    const mistypedKey = 'tk-mistyped-0123456789abcdefghijklm';
    replace(toml, `[profile.default]\napi_key = "${goodKey}"\n`);
    proxy.apiKeys = new Set([goodKey]);
    proxy.clientNames = null;
    const { logStream, waitForLog, text: logs } = captureLogs();
    const stack = await startStack({
      logStream,
      env: { LOG_LEVEL: 'info', ...mtlsEnv(client), TEMPORAL_CONFIG_FILE: toml, TEMPORAL_CREDENTIALS_CHECK_INTERVAL_MS: '3600000' },
    });
    try {
      replace(toml, `[profile.default]\napi_key = "${mistypedKey}"\n`);
      process.kill(process.pid, 'SIGHUP');
      await waitForLog(/Temporal credentials not rotated: Temporal refuses the new ones/, 2); // the API and the worker
      assert.doesNotMatch(logs(), /Temporal credentials rotated/);
      const refusedBefore = proxy.refused;
      const customer = await newCustomer(stack, 5);
      const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, json: simJob() });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      assert.equal((await waitForJob(stack, customer.key, r.body.id, 60_000)).status, 'succeeded');
      assert.equal(proxy.refused, refusedBefore, 'no call made with the refused key');
      assert.ok(!logs().includes(mistypedKey) && !logs().includes(goodKey), 'a key appears in the logs');
    } finally {
      await stack.stop();
    }
  });
  test('a Temporal credential refused while running (a key revoked or expired) answers 503, never a 500; back when it is accepted again', async () => {
    const keyDir = path.join(dir, 'revoked-key');
    fs.mkdirSync(keyDir);
    const key = 'tk-revoked-0123456789abcdefghijklmn';
    proxy.apiKeys = new Set([key]);
    proxy.clientNames = null;
    const stack = await startStack({ env: { ...mtlsEnv(ca.client('revoked')), TEMPORAL_API_KEY: key } });
    try {
      const customer = await newCustomer(stack, 5);
      const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: customer.key,
        json: simJob({ delay_ms: 60_000 }),
      });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      // The key is revoked once the submission has ended (its operation recorded, its completion sent):
      // what is tested here is the API's answer, not a submission whose completion Temporal refuses.
      for (
        let i = 0;
        i < 100 &&
        (await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: customer.key })).body.backend === null;
        i++
      ) {
        await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => setTimeout(r, 3_000));
      proxy.apiKeys = new Set(['tk-some-other-key-0123456789abcdef']);
      const refused = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${created.body.id}/cancel`, { token: customer.key });
      proxy.apiKeys = new Set([key]);
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.equal(refused.body.error.code, 'service_unavailable');
      assert.ok(!JSON.stringify(refused.body).includes(key));
      const cancelled = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${created.body.id}/cancel`, { token: customer.key });
      assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
      await waitForJob(stack, customer.key, created.body.id, 60_000);
      await assertAuditHolds(stack);
    } finally {
      await stack.stop();
    }
  });
});

describe("Temporal's client configuration, as Temporal's CLI and SDKs read it", () => {
  test('Temporal Cloud with an API key: the endpoint, the namespace and the key, nothing else; the key implies TLS', () => {
    const config = loadConfig({
      TEMPORAL_ADDRESS: 'eu-west-1.aws.api.temporal.io:7233',
      TEMPORAL_NAMESPACE: 'prod.a1b2c',
      TEMPORAL_API_KEY: 'key-123',
    });
    assert.equal(config.temporal.address, 'eu-west-1.aws.api.temporal.io:7233');
    assert.equal(config.temporal.namespace, 'prod.a1b2c');
    assert.deepEqual(config.temporal.connection.connect, { address: 'eu-west-1.aws.api.temporal.io:7233', apiKey: 'key-123', tls: true });
    assert.equal(describeSecurity(config.temporal.connection.connect), 'TLS + API key');
    // TEMPORAL_TLS=false turns it off even with a key (Temporal's rule), TEMPORAL_TLS=true on without one.
    assert.equal(
      loadConfig({ TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'false' }).temporal.connection.connect.tls,
      false,
    );
    assert.equal(
      loadConfig({ TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: '0' }).temporal.connection.connect.tls,
      false,
    );
    assert.ok(loadConfig({ TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_TLS: '1' }).temporal.connection.connect.tls);
    const plainTls = loadConfig({ TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_TLS: 'true' }).temporal.connection.connect.tls;
    assert.ok(typeof plainTls === 'object' && !plainTls.clientCertPair && !plainTls.serverRootCACertificate, 'TLS with the system CAs');
    assert.equal(loadConfig({}).temporal.address, undefined, 'nothing set: npm start runs its dev server');
    assert.equal(loadConfig({}).temporal.namespace, 'default');
  });

  test('a profile file gives the address, namespace, key and TLS files; the environment overrides it; its files are watched', () => {
    const client = ca.client('profile');
    const toml = path.join(dir, 'profiles.toml');
    fs.writeFileSync(
      toml,
      [
        '[profile.default]',
        'address = "default.example:7233"',
        '[profile.prod]',
        'address = "prod.example:7233"',
        'namespace = "prod"',
        'api_key = "from-file"',
        '[profile.prod.tls]',
        `client_cert_path = "${client.certPath}"`,
        `client_key_path = "${client.keyPath}"`,
        `server_ca_cert_path = "${ca.certPath}"`,
        'server_name = "temporal.internal"',
        '',
      ].join('\n'),
    );
    const prod = loadConfig({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' }).temporal;
    assert.equal(prod.address, 'prod.example:7233');
    assert.equal(prod.namespace, 'prod');
    assert.equal(prod.connection.connect.apiKey, 'from-file');
    const tls = prod.connection.connect.tls as Exclude<typeof prod.connection.connect.tls, boolean | undefined>;
    assert.equal(tls.serverNameOverride, 'temporal.internal');
    assert.equal(Buffer.from(tls.clientCertPair!.crt).toString(), client.cert);
    assert.deepEqual(prod.connection.files.sort(), [toml, client.certPath, client.keyPath, ca.certPath].sort());
    assert.equal(loadConfig({ TEMPORAL_CONFIG_FILE: toml }).temporal.address, 'default.example:7233');
    const overridden = loadConfig({
      TEMPORAL_CONFIG_FILE: toml,
      TEMPORAL_PROFILE: 'prod',
      TEMPORAL_NAMESPACE: 'other',
      TEMPORAL_API_KEY: 'from-env',
    }).temporal;
    assert.equal(overridden.namespace, 'other');
    assert.equal(overridden.connection.connect.apiKey, 'from-env');
  });

  test("npm start keeps its dev server when only the Temporal CLI's own profile file (in the user's home) names an address", () => {
    const home = fs.mkdtempSync(path.join(dir, 'home-'));
    fs.mkdirSync(path.join(home, '.config', 'temporalio'), { recursive: true });
    fs.writeFileSync(
      path.join(home, '.config', 'temporalio', 'temporal.toml'),
      '[profile.default]\naddress = "prod.example:7233"\nnamespace = "prod"\napi_key = "cli-key"\n',
    );
    // `temporal config set` writes that file: npm start without TEMPORAL_ADDRESS runs its dev server as before.
    const start = loadConfig({ HOME: home }, { userTemporalProfile: false }).temporal;
    assert.equal(start.address, undefined);
    assert.equal(start.namespace, 'default');
    assert.equal(start.connection.connect.apiKey, undefined);
    // A profile named on purpose is used by npm start too; the API and the worker read the file as Temporal's CLI does.
    assert.equal(
      loadConfig({ HOME: home, TEMPORAL_PROFILE: 'default' }, { userTemporalProfile: false }).temporal.address,
      'prod.example:7233',
    );
    assert.equal(loadConfig({ HOME: home }).temporal.address, 'prod.example:7233');
  });

  test('refused at startup, naming the variable: a certificate without its key, a missing file, host verification off, a switch that is not a boolean', () => {
    const client = ca.client('half');
    const refusals: [Record<string, string>, RegExp][] = [
      [
        { TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_TLS_CLIENT_CERT_PATH: client.certPath },
        /client certificate is set without its key; set TEMPORAL_TLS_CLIENT_KEY_PATH/,
      ],
      [
        { TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_TLS_CLIENT_CERT_PATH: '/nonexistent/c.pem', TEMPORAL_TLS_CLIENT_KEY_PATH: client.keyPath },
        /cannot read the Temporal client configuration file \/nonexistent\/c\.pem \(ENOENT\)/,
      ],
      [
        { TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'true' },
        /TEMPORAL_TLS_DISABLE_HOST_VERIFICATION is not supported .* set TEMPORAL_TLS_SERVER_NAME/,
      ],
      // Temporal's TypeScript envconfig reads anything but "true" and "1" as false: TEMPORAL_TLS=TRUE would
      // send the API key in plaintext. A value it would not read as the operator meant is refused.
      [
        { TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'TRUE' },
        /TEMPORAL_TLS must be true, 1, false or 0 \(it is "TRUE"\)/,
      ],
      [
        { TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'yes' },
        /TEMPORAL_TLS must be true, 1, false or 0 \(it is "yes"\)/,
      ],
      [
        { TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'TRUE' },
        /TEMPORAL_TLS_DISABLE_HOST_VERIFICATION must be true, 1, false or 0/,
      ],
    ];
    for (const [env, pattern] of refusals) {
      assert.throws(
        () => loadConfig(env),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError);
          assert.match(err.message, pattern);
          assert.ok(!err.message.includes(client.key.split('\n')[1]!));
          return true;
        },
      );
    }
  });
});
