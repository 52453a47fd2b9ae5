// PostgreSQL over TLS, as managed services (RDS, Cloud SQL, Azure) expect: DATABASE_URL with
// `sslmode=verify-full&sslrootcert=<CA file>`. A real PostgreSQL started with ssl=on, a certificate
// from a test CA naming `localhost`, and a pg_hba.conf that admits the service's database over TLS only:
// the API and the worker (`npm run api`, `npm run worker`: migrations included) run a job to the end,
// the admin CLI works against them; a URL whose host the certificate does not name is refused at
// startup with one line.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { postgresUserIds } from '../../src/db/embedded-placement.js';
import { createTestCa, type TestCa } from '../helpers/tls-certs.js';
import { freePort } from '../helpers/infra.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { ADMIN_TOKEN, http, infra, simJob } from '../helpers/stack.js';
import { openDatabase } from '../../src/runtime/database.js';
import { ConfigError, loadConfig } from '../../src/config.js';

let dir: string;
let ca: TestCa;
let server: EmbeddedPostgres;
let port: number;
const children: ChildProcess[] = [];

before(async () => {
  dir = fs.mkdtempSync(path.join(infra().tmp, 'pg-tls-'));
  fs.chmodSync(dir, 0o755); // the embedded PostgreSQL runs as another user when we are root
  ca = createTestCa(path.join(dir, 'ca'));
  fs.chmodSync(path.join(dir, 'ca'), 0o755);
  const cert = ca.server('localhost', { altNames: ['DNS:localhost'] });
  const ids = postgresUserIds();
  if (ids) for (const f of [cert.certPath, cert.keyPath]) fs.chownSync(f, ids.uid, ids.gid);
  // The service's database only over TLS; the readiness check of the embedded server uses "postgres".
  const hba = path.join(dir, 'pg_hba.conf');
  fs.writeFileSync(
    hba,
    ['hostssl all all 127.0.0.1/32 trust', 'hostssl all all ::1/128 trust', 'host postgres postgres 127.0.0.1/32 trust', ''].join('\n'),
  );
  fs.chmodSync(hba, 0o644);
  port = await freePort();
  server = await startEmbeddedPostgres({
    pgdata: path.join(dir, 'pg'),
    port,
    logFile: path.join(dir, 'postgres.log'),
    extraArgs: [
      '-c',
      'ssl=on',
      '-c',
      `ssl_cert_file=${cert.certPath}`,
      '-c',
      `ssl_key_file=${cert.keyPath}`,
      '-c',
      `hba_file=${hba}`,
      '-c',
      'listen_addresses=127.0.0.1,::1',
    ],
  });
});
after(async () => {
  killAll(children);
  await server?.stop();
});

const tlsUrl = (host: string) =>
  `postgres://postgres@${host}:${port}/videoapi?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca.certPath)}`;

function serviceEnv(databaseUrl: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: infra().temporalAddress,
    TEMPORAL_TASK_QUEUE: `pg-tls-${randomUUID()}`,
    DATA_DIR: fs.mkdtempSync(path.join(dir, 'data-')),
    ADMIN_TOKEN,
    URL_SIGNING_SECRET: 'test-url-signing-secret-0123456789abcdef',
    SIMULATOR: 'on',
    VIDEO_POLL_INTERVAL_MS: '100',
  };
}

test('without TLS the service database is refused by the server (the test server admits TLS only)', async () => {
  const plain = new pg.Client({ connectionString: `postgres://postgres@localhost:${port}/videoapi` });
  await assert.rejects(plain.connect(), /no pg_hba\.conf entry .*no encryption/);
  await plain.end().catch(() => {});
});

test('sslmode=verify-full with sslrootcert: the API and the worker migrate, run a job to the end; the admin CLI works; the connections are TLS', async () => {
  const env = serviceEnv(tlsUrl('localhost'));
  const apiPort = await freePort();
  await startEntryProcess({ env }, 'api', { env: { PORT: String(apiPort) }, track: children });
  await startEntryProcess({ env }, 'worker', { track: children });
  const base = `http://127.0.0.1:${apiPort}`;

  // The admin CLI, against this API.
  const cli = spawn(process.execPath, ['--import', 'tsx', 'src/admin-cli.ts', 'workspace', 'create', '--name', 'tls', '--credits', '5'], {
    env: { ...process.env, API_URL: base, ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  cli.stdout.on('data', (d) => (out += d));
  assert.equal(await new Promise((r) => cli.on('exit', r)), 0);
  const ws = JSON.parse(out);
  const key = await http(base, 'POST', `/admin/v1/workspaces/${ws.id}/api-keys`, { token: ADMIN_TOKEN, json: {} });
  assert.equal(key.status, 201);
  const created = await http(base, 'POST', '/v2/videos/generations', { token: key.body.key, json: simJob() });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  let job: any;
  for (let i = 0; ; i++) {
    job = (await http(base, 'GET', `/v2/videos/generations/${created.body.id}`, { token: key.body.key })).body;
    if (job.status !== 'pending') break;
    assert.ok(i < 300, 'job still pending');
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(job.status, 'succeeded', JSON.stringify(job));

  // Every session of the service's database is encrypted (the server would refuse any other).
  const check = new pg.Client({ connectionString: tlsUrl('localhost') });
  await check.connect();
  const sessions = await check.query<{ ssl: boolean; n: string }>(
    "SELECT s.ssl, count(*) AS n FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = 'videoapi' GROUP BY s.ssl",
  );
  await check.end();
  assert.deepEqual(
    sessions.rows.map((r) => r.ssl),
    [true],
  );
  assert.ok(Number(sessions.rows[0]!.n) >= 3, 'the API, the worker and this check');
});

test('a certificate that does not name the host: refused at startup, one line, non-zero exit', async () => {
  for (const entry of ['api', 'worker'] as const) {
    const child = spawn(process.execPath, ['--import', 'tsx', `src/${entry}-main.ts`], {
      env: { ...process.env, ...serviceEnv(tlsUrl('127.0.0.1')), PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.resume();
    const code = await new Promise((r) => child.on('exit', r));
    assert.notEqual(code, 0);
    const lines = stderr.trim().split('\n');
    assert.equal(lines.length, 1, stderr);
    assert.match(
      lines[0]!,
      new RegExp(
        `^${entry}: cannot reach PostgreSQL at postgres://postgres@127\\.0\\.0\\.1:${port}/videoapi\\?sslmode=verify-full.*: its certificate does not name the host in DATABASE_URL \\(IP: 127\\.0\\.0\\.1 is not in the cert's list: \\); connect by a name in the certificate$`,
      ),
    );
  }
});

test("a password in DATABASE_URL, in the user part or as libpq's password= / sslpassword= parameter, never appears in a refusal", async () => {
  const closed = await freePort();
  const config = loadConfig({});
  for (const url of [
    `postgres://svc:pw-in-userinfo@127.0.0.1:${closed}/db?sslmode=verify-full`,
    `postgres://svc@127.0.0.1:${closed}/db?password=pw-in-query&sslmode=verify-full&sslpassword=pw-of-key`,
  ]) {
    await assert.rejects(openDatabase(url, config), (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.match(err.message, /cannot reach PostgreSQL at postgres:\/\/svc/);
      assert.doesNotMatch(err.message, /pw-/, err.message);
      return true;
    });
  }
});
