// docker-compose.yml cannot run here (no Docker engine), so this keeps it consistent with the code:
// images pinned, every app variable one the config reads and valid for production, addresses and
// ports pointing at the services that serve them, search attributes the workflows use registered,
// the S3 storage pointing at the MinIO service and the bucket and credentials its setup creates.
import { describe, test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { connect as tlsConnect, createServer as tlsServer } from 'node:tls';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parse } from 'yaml';
import { ConfigError, ENV_VARS, loadConfig } from '../../src/config.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/messages.js';
import { TEMPORAL_DYNAMIC_CONFIG_FILE, temporalDynamicConfig } from '../../src/temporal/dynamic-config.js';
import { NAMESPACE_RETENTION, SQL_PLUGIN, schemaSteps } from '../helpers/server-infra.js';
import { describeSecurity, loadTemporalSettings, temporalEnv } from '../../src/temporal/connection-config.js';

const compose = parse(fs.readFileSync('docker-compose.yml', 'utf8'), { merge: true });
const services = compose.services as Record<string, any>;

const composeText = fs.readFileSync('docker-compose.yml', 'utf8');
/** The variables compose requires (${VAR:?message}): the secrets an operator writes into .env. */
const REQUIRED = [...new Set([...composeText.matchAll(/\$\{([A-Z][A-Z0-9_]*):\?[^}]*\}/g)].map((m) => m[1]!))];
/** A .env as docs/production.md tells operators to write it: every secret freshly generated. */
const DOT_ENV: Record<string, string> = Object.fromEntries(
  REQUIRED.map((k) => [k, k === 'POSTGRES_PASSWORD' ? randomBytes(24).toString('hex') : randomBytes(48).toString('base64')]),
);

/** Compose's ${VAR:-default} and ${VAR:?message} interpolation, with `dotEnv` set: its values, else the defaults. */
function interpolate(v: unknown, dotEnv: Record<string, string> = DOT_ENV): string {
  return String(v).replace(
    /\$\{([A-Z][A-Z0-9_]*)(?::-([^}]*)|:\?([^}]*))\}/g,
    (_m, name: string, fallback: string | undefined, required: string | undefined) => {
      if (dotEnv[name] !== undefined) return dotEnv[name]!;
      if (required !== undefined) throw new Error(`compose stops: ${required}`);
      return fallback ?? '';
    },
  );
}
const envOf = (name: string, dotEnv: Record<string, string> = DOT_ENV): Record<string, string> =>
  Object.fromEntries(Object.entries(services[name].environment ?? {}).map(([k, v]) => [k, interpolate(v, dotEnv)]));

test('the stack has every part, each image pinned', () => {
  for (const name of ['postgres', 'temporal-schema', 'temporal', 'temporal-setup', 'temporal-ui', 'minio', 'minio-setup', 'api', 'worker'])
    assert.ok(services[name], `service ${name}`);
  for (const [name, svc] of Object.entries(services)) {
    assert.ok(svc.image || svc.build, `${name} has an image`);
    // versions like 17.6, or MinIO's RELEASE.<timestamp> tags
    if (svc.image && !svc.build && name !== 'worker')
      assert.match(svc.image, /:([0-9][\w.-]*|RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z)$/, `${name} image is pinned to a version`);
  }
  assert.match(services['temporal'].image, /:1\.29\./, 'the Temporal server matches the dev server (1.29)');
  assert.equal(services['worker'].image, services['api'].image, 'api and worker run the same image');
});

test('api and worker environments are variables the config reads, and load for production', () => {
  for (const name of ['api', 'worker']) {
    const env = envOf(name);
    for (const key of Object.keys(env)) assert.ok(ENV_VARS.includes(key), `${name}: ${key} is not read by src/config.ts`);
    for (const [key, value] of Object.entries(env))
      assert.doesNotMatch(value, /\$\{/, `${name}: ${key} has a default for every interpolation`);
    const config = loadConfig(env);
    assert.equal(config.production, true);
    assert.ok(config.adminToken && config.urlSigningSecret, `${name}: production secrets set`);
    assert.ok(config.databaseUrl && config.temporal.address, `${name}: external PostgreSQL and Temporal`);
    assert.equal(config.temporal.taskQueue, loadConfig(envOf('api')).temporal.taskQueue, 'api and worker share the task queue');
  }
});

test('DATABASE_URL and TEMPORAL_ADDRESS point at the services, with their credentials and ports', () => {
  const env = envOf('api');
  const db = new URL(env['DATABASE_URL']!);
  const pg = envOf('postgres');
  assert.ok(services[db.hostname], `DATABASE_URL host ${db.hostname} is a service`);
  assert.equal(db.port || '5432', '5432');
  assert.equal(db.username, pg['POSTGRES_USER']);
  assert.equal(db.password, pg['POSTGRES_PASSWORD']);
  assert.equal(db.pathname.slice(1), pg['POSTGRES_DB']);
  const [host, port] = env['TEMPORAL_ADDRESS']!.split(':');
  assert.equal(host, 'temporal');
  assert.equal(port, '7233');
  assert.equal(envOf('temporal-ui')['TEMPORAL_ADDRESS'], env['TEMPORAL_ADDRESS']);
  assert.equal(envOf('temporal')['POSTGRES_SEEDS'], db.hostname, 'Temporal persists to the same PostgreSQL server');
});

test('videos are stored in the MinIO bucket that minio-setup creates, with the app user it creates', () => {
  const env = envOf('api');
  const config = loadConfig(env);
  assert.equal(config.storageBackend, 's3');
  assert.ok(config.s3);
  assert.deepEqual(loadConfig(envOf('worker')).s3, config.s3, 'api and worker use the same bucket');
  assert.deepEqual(loadConfig(envOf('worker')).s3?.credentials, config.s3.credentials);
  // S3_ENDPOINT: the minio service, on the port the server listens on (9000 unless --address says otherwise)
  const endpoint = new URL(config.s3.endpoint!);
  assert.equal(endpoint.hostname, 'minio');
  const minioArgs = services['minio'].command as string[];
  const address = minioArgs.includes('--address') ? minioArgs[minioArgs.indexOf('--address') + 1]! : ':9000';
  assert.equal(endpoint.port || '80', address.split(':').pop());
  assert.equal(config.s3.forcePathStyle, true, 'MinIO is addressed path-style');
  // S3_PUBLIC_ENDPOINT: the same server as published on the host, for customers' presigned URLs
  const publicEndpoint = new URL(config.s3.publicEndpoint!);
  assert.equal(publicEndpoint.hostname, 'localhost');
  const published = (services['minio'].ports as string[]).map((p) => p.split(':'));
  assert.ok(
    published.some(([host, container]) => host === publicEndpoint.port && container === endpoint.port),
    `minio publishes ${endpoint.port} on ${publicEndpoint.port}`,
  );
  // the bucket and the app's credentials are the ones the setup creates, not MinIO's root user
  const setup = envOf('minio-setup');
  const script = (services['minio-setup'].command as string[]).join('\n');
  assert.equal(setup['S3_BUCKET'], config.s3.bucket);
  assert.ok(script.includes('mc mb --ignore-existing "local/$$S3_BUCKET"'), 'the bucket is created');
  assert.ok(script.includes(`mc alias set local ${config.s3.endpoint} `), 'setup talks to the server the services use');
  assert.equal(setup['S3_APP_ACCESS_KEY'], env['AWS_ACCESS_KEY_ID']);
  assert.equal(setup['S3_APP_SECRET_KEY'], env['AWS_SECRET_ACCESS_KEY']);
  assert.ok(script.includes('mc admin user add local "$$S3_APP_ACCESS_KEY" "$$S3_APP_SECRET_KEY"'), 'the app user is created');
  assert.notEqual(env['AWS_ACCESS_KEY_ID'], envOf('minio')['MINIO_ROOT_USER'], 'the services do not use the root user');
  assert.equal(setup['MINIO_ROOT_USER'], envOf('minio')['MINIO_ROOT_USER']);
  assert.equal(setup['MINIO_ROOT_PASSWORD'], envOf('minio')['MINIO_ROOT_PASSWORD']);
  // order: minio healthy -> bucket set up -> api and worker
  assert.equal(services['minio-setup'].depends_on['minio'].condition, 'service_healthy');
  for (const name of ['api', 'worker']) {
    assert.equal(services[name].depends_on['minio-setup'].condition, 'service_completed_successfully', `${name} waits for the bucket`);
  }
});

test('the API listens on the port compose publishes, on all interfaces', () => {
  const config = loadConfig(envOf('api'));
  assert.equal(config.host, '0.0.0.0');
  const published = (services['api'].ports as string[]).map((p) => p.split(':').map(Number));
  assert.ok(
    published.some(([, container]) => container === config.port),
    `container port ${config.port} published`,
  );
});

test('the search attributes the workflows use are registered', () => {
  const script = JSON.stringify(services['temporal-setup'].command);
  for (const sa of SEARCH_ATTRIBUTES) assert.ok(script.includes(sa.name), `${sa.name} registered`);
  assert.equal(services['api'].depends_on['temporal-setup'].condition, 'service_completed_successfully');
  assert.equal(services['worker'].depends_on['temporal-setup'].condition, 'service_completed_successfully');
});

test('the Temporal server loads the settings the dev server runs with (config/temporal-dynamic-config.yaml)', () => {
  const file = envOf('temporal')['DYNAMIC_CONFIG_FILE_PATH'];
  assert.ok(file, 'the temporal service names its dynamic config file');
  const mounts = (services['temporal'].volumes as string[]).map((v) => v.split(':'));
  const mount = mounts.find(([, target]) => target === file);
  assert.ok(mount, `${file} is mounted into the temporal service`);
  assert.equal(path.resolve(mount[0]!), TEMPORAL_DYNAMIC_CONFIG_FILE, 'the mounted file is the one the dev server reads');
  assert.equal(temporalDynamicConfig(TEMPORAL_DYNAMIC_CONFIG_FILE).get('system.enableActivityEagerExecution'), true);
  // A value the dev server could not take as it is (per namespace, or several) is refused, not dropped.
  const constrained = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dynconf-')), 'c.yaml');
  fs.writeFileSync(constrained, 'system.enableActivityEagerExecution:\n  - value: true\n    constraints: { namespace: other }\n');
  assert.throws(() => temporalDynamicConfig(constrained), /exactly one value, without constraints/);
});

test('health checks and shared storage', () => {
  for (const name of ['postgres', 'temporal', 'minio', 'api']) assert.ok(services[name].healthcheck, `${name} has a health check`);
  assert.match(JSON.stringify(services['api'].healthcheck.test), /\/readyz/);
  const dataDir = envOf('api')['DATA_DIR'];
  for (const name of ['api', 'worker']) {
    assert.ok(
      (services[name].volumes as string[]).some((v) => v.endsWith(`:${dataDir}`)),
      `${name} mounts storage at DATA_DIR`,
    );
  }
});

test('the commands run files the build produces, and the Dockerfile builds them', () => {
  const dockerfile = fs.readFileSync('Dockerfile', 'utf8');
  assert.match(dockerfile, /npm run build/);
  for (const name of ['api', 'worker']) {
    const entry = (services[name].command as string[])[1]!;
    const source = entry.replace(/^dist\//, '').replace(/\.js$/, '.ts');
    assert.ok(fs.existsSync(source), `${entry} is built from ${source}`);
  }
  for (const dir of ['src/db/migrations', 'assets', 'config']) assert.match(dockerfile, new RegExp(`COPY ${dir}`), `image ships ${dir}`);
});

test("Temporal runs on its server image, its schema set up by Temporal's admin tools; never auto-setup", () => {
  assert.doesNotMatch(composeText, /auto-setup/);
  assert.match(services['temporal'].image, /^temporalio\/server:/);
  const schema = services['temporal-schema'];
  assert.match(schema.image, /^temporalio\/admin-tools:/);
  assert.equal(schema.image.split(':')[1], services['temporal'].image.split(':')[1], "the schema is the server version's");
  const script = (schema.command as string[]).join('\n');
  for (const db of ['temporal', 'temporal_visibility']) assert.match(script, new RegExp(`for db in [^;]*\\b${db}\\b`), `${db} is set up`);
  for (const step of ['create', 'setup-schema -v 0.0', 'update-schema -d "/etc/temporal/schema/postgresql/v12/'])
    assert.ok(script.includes(`--db "$$db" ${step}`), step);
  assert.equal(services['temporal'].depends_on['temporal-schema'].condition, 'service_completed_successfully');
  assert.equal(envOf('temporal-schema')['SQL_PASSWORD'], envOf('postgres')['POSTGRES_PASSWORD']);
  assert.equal(envOf('temporal')['POSTGRES_PWD'], envOf('postgres')['POSTGRES_PASSWORD']);
  // the namespace the services use is created (auto-setup did it before)
  const setup = JSON.stringify(services['temporal-setup'].command);
  assert.ok(setup.includes(`namespace create --address temporal:7233 --namespace ${envOf('api')['TEMPORAL_NAMESPACE']}`));
});

test('PostgreSQL and Temporal publish no port; the Temporal UI only on demand and on loopback', () => {
  for (const name of ['postgres', 'temporal-schema', 'temporal', 'temporal-setup'])
    assert.equal(services[name].ports, undefined, `${name} publishes nothing`);
  assert.deepEqual(services['temporal-ui'].profiles, ['ui'], 'the UI starts only with --profile ui');
  for (const name of Object.keys(services)) {
    for (const p of (services[name].ports ?? []) as string[]) {
      const parts = p.split(':');
      const public_ = parts.length === 2;
      if (public_)
        assert.ok(['api', 'minio'].includes(name) && ['8080', '9000'].includes(parts[1]!), `${name} publishes ${p} on every interface`);
      else assert.equal(parts[0], '127.0.0.1', `${name}: ${p}`);
    }
  }
});

test('every secret comes from .env: compose needs each one, .env.example lists them, git and the image ignore .env', () => {
  assert.deepEqual(REQUIRED.sort(), [
    'ADMIN_TOKEN',
    'METRICS_TOKEN',
    'MINIO_ROOT_PASSWORD',
    'POSTGRES_PASSWORD',
    'S3_APP_SECRET_KEY',
    'URL_SIGNING_SECRET',
  ]);
  const example = fs.readFileSync('.env.example', 'utf8');
  for (const k of REQUIRED) assert.match(example, new RegExp(`^${k}=$`, 'm'), `.env.example lists ${k}, empty`);
  assert.throws(() => envOf('api', {}), /compose stops: set [A-Z_]+ in \.env/, 'without .env compose does not start');
  assert.match(fs.readFileSync('.gitignore', 'utf8'), /^\.env$/m);
  assert.match(fs.readFileSync('.dockerignore', 'utf8'), /^\.env$/m);
  assert.match(
    fs.readFileSync('docs/production.md', 'utf8'),
    /cp \.env\.example \.env/,
    'docs/production.md tells operators to write .env',
  );
});

test('production refuses placeholder, short and well-known secrets with one line naming the variable', () => {
  const good = envOf('api');
  const cases: [Record<string, string>, RegExp][] = [
    [{ ADMIN_TOKEN: 'a1B2c3D4e5F6g7H8i9J0k' }, /^ADMIN_TOKEN is shorter than 32 characters/],
    [{ ADMIN_TOKEN: 'change-me-admin-token-0123456789abcdef' }, /^ADMIN_TOKEN is a placeholder/],
    [{ URL_SIGNING_SECRET: 'ab'.repeat(20) }, /^URL_SIGNING_SECRET has fewer than 10 distinct characters/],
    [{ METRICS_TOKEN: 'short-metrics-token-0123456789' }, /^METRICS_TOKEN is shorter than 32 characters/],
    [{ AWS_SECRET_ACCESS_KEY: 'change-me-s3-app-secret-0123456789' }, /^AWS_SECRET_ACCESS_KEY is a placeholder/],
    [{ DATABASE_URL: 'postgres://videoapi:videoapi@postgres:5432/videoapi' }, /^the password in DATABASE_URL is a well-known default/],
    [{ DATABASE_URL: 'postgres://videoapi:abc123@postgres:5432/videoapi' }, /^the password in DATABASE_URL is shorter than 16 characters/],
  ];
  for (const [change, expected] of cases) {
    const env = { ...good, ...change };
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, expected);
        assert.doesNotMatch(err.message, /\n/, 'one line');
        for (const v of Object.values(change)) assert.ok(!err.message.includes(v), 'the value is never printed');
        return true;
      },
    );
    assert.doesNotThrow(() => loadConfig({ ...env, NODE_ENV: 'development' }), 'development takes it');
  }
});

test("the production-topology tests set temporal-server up with compose's commands (test/helpers/server-infra.ts)", () => {
  const schema = (services['temporal-schema'].command as string[]).join('\n');
  assert.equal(envOf('temporal')['DB'], SQL_PLUGIN, 'the server and the tests use the same SQL plugin');
  for (const step of schemaSteps('"/etc/temporal/schema/postgresql/v12/$$dir/versioned"')) {
    assert.ok(
      schema.includes(`temporal-sql-tool --plugin ${SQL_PLUGIN} --ep postgres -p 5432 -u videoapi --db "$$db" ${step.join(' ')}`),
      `compose runs ${step[0]} as the tests do`,
    );
  }
  const setup = JSON.stringify(services['temporal-setup'].command);
  assert.ok(
    setup.includes(`namespace create --address temporal:7233 --namespace default --retention ${NAMESPACE_RETENTION}`),
    'the same namespace retention',
  );
  assert.ok(
    setup.includes('search-attribute create --address temporal:7233 --namespace default --name $$sa --type Keyword'),
    'the search attributes as Keyword',
  );
});

describe('optional mTLS between the services and Temporal (docker-compose.mtls.yml)', () => {
  const mtls = parse(fs.readFileSync('docker-compose.mtls.yml', 'utf8'), { merge: true }).services as Record<string, any>;
  /** A service's environment with the override applied (compose merges the maps). */
  const mergedEnv = (name: string): Record<string, string> => ({
    ...envOf(name),
    ...Object.fromEntries(Object.entries(mtls[name]?.environment ?? {}).map(([k, v]) => [k, interpolate(v)])),
  });
  /** Host directories of `name`'s bind mounts, by container path, the host side under `root` instead of ./certs/temporal. */
  const mounts = (name: string, root: string): [string, string][] =>
    ((mtls[name].volumes ?? []) as string[]).map((v) => {
      const [host, container] = v.split(':');
      return [container!, host!.replace(/^\.\/certs\/temporal/, root)];
    });
  const onHost = (name: string, root: string, file: string): string => {
    const m = mounts(name, root).find(([container]) => file.startsWith(`${container}/`));
    assert.ok(m, `${file} is under a mount of ${name}`);
    return path.join(m[1], file.slice(m[0].length + 1));
  };

  test("the services' TLS settings are Temporal's variables, the server requires client certificates, the certificates the script makes connect, and a new client certificate is picked up", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'mtls-'));
    execFileSync('scripts/temporal-mtls-certs.sh', [root], { stdio: 'ignore' });
    const server = mergedEnv('temporal');
    assert.equal(server['TEMPORAL_TLS_REQUIRE_CLIENT_AUTH'], 'true');
    for (const name of ['api', 'worker']) {
      const env = mergedEnv(name);
      for (const key of Object.keys(env)) assert.ok(ENV_VARS.includes(key), `${name}: ${key} is not read by src/config.ts`);
      for (const key of ['TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH'])
        env[key] = onHost(name, root, env[key]!);
      const config = loadConfig(env);
      const tls = config.temporal.connection.connect.tls;
      assert.ok(tls && typeof tls === 'object' && tls.clientCertPair && tls.serverRootCACertificate, `${name}: mTLS configured`);
      assert.equal(tls.serverNameOverride, 'temporal');
      assert.equal(describeSecurity(config.temporal.connection.connect), 'mTLS (client certificate)');

      // The handshake Temporal's frontend does: its certificate and key, client certificates from its CA required.
      const srv = tlsServer({
        cert: fs.readFileSync(onHost('temporal', root, server['TEMPORAL_TLS_FRONTEND_CERT']!)),
        key: fs.readFileSync(onHost('temporal', root, server['TEMPORAL_TLS_FRONTEND_KEY']!)),
        ca: fs.readFileSync(onHost('temporal', root, server['TEMPORAL_TLS_CLIENT1_CA_CERT']!)),
        requestCert: true,
        rejectUnauthorized: true,
      });
      const clientNames: string[] = [];
      srv.on('secureConnection', (s) => {
        clientNames.push(String(s.getPeerCertificate().subject.CN));
        s.end();
      });
      await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
      const handshake = (connect: typeof config.temporal.connection.connect) =>
        new Promise<void>((resolve, reject) => {
          const t = connect.tls as Exclude<typeof tls, boolean>;
          const socket = tlsConnect({
            host: '127.0.0.1',
            port: (srv.address() as { port: number }).port,
            servername: t.serverNameOverride!,
            ca: Buffer.from(t.serverRootCACertificate!),
            cert: Buffer.from(t.clientCertPair!.crt),
            key: Buffer.from(t.clientCertPair!.key),
          });
          socket.once('secureConnect', () => {
            socket.on('data', () => {});
            socket.once('close', () => resolve());
          });
          socket.once('error', reject);
        });
      try {
        await handshake(config.temporal.connection.connect);
        // Rotation: a new client certificate from the same CA changes what the services read, and connects.
        execFileSync('scripts/temporal-mtls-certs.sh', [root, '--client-only'], { stdio: 'ignore' });
        const rotated = loadTemporalSettings(temporalEnv(env));
        assert.notEqual(rotated.tlsDigest, config.temporal.connection.tlsDigest);
        await handshake(rotated.connect);
        assert.equal(clientNames.length, 2);
        assert.match(clientNames[0]!, /^video-voice-api-/);
      } finally {
        srv.close();
      }
    }
    // The CA's key is never mounted; the client's key never reaches the server, nor the server's the clients.
    for (const name of Object.keys(mtls))
      for (const [, host] of mounts(name, root)) assert.ok(!fs.existsSync(path.join(host, 'ca.key')), `${name} sees no CA key`);
    assert.ok(!fs.existsSync(path.join(root, 'server', 'client.key')) && !fs.existsSync(path.join(root, 'client', 'server.key')));
    assert.match(fs.readFileSync('.gitignore', 'utf8'), /^certs\/$/m, 'certificates and keys stay out of git');
    assert.match(fs.readFileSync('.dockerignore', 'utf8'), /^certs\/$/m, 'and out of the image');
  });
});
