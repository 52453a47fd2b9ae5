// The production topology, on loopback: temporal-server (built by scripts/install-temporal-server.sh)
// with its default and visibility stores on PostgreSQL, the schema created and brought up to date by
// temporal-sql-tool with the commands docker-compose.yml's temporal-schema runs, the frontend requiring
// mTLS (a CA, a server and a client certificate generated for the run), the namespace and the search
// attributes registered with the commands of docker-compose.yml's temporal-setup; then, for the service,
// MinIO for the videos and any number of `npm run api` / `npm run worker` processes configured by
// Temporal's standard client variables (TEMPORAL_ADDRESS, TEMPORAL_TLS_*).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { Connection } from '@temporalio/client';
import { TEMPORAL_DYNAMIC_CONFIG_FILE } from '../../src/temporal/dynamic-config.js';
import { resolveTemporalCli } from '../../src/temporal/dev-server.js';
import { isProcessAlive } from '../../src/pids.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/messages.js';
import { cachedBuild } from './cached-build.js';
import { freePort } from './infra.js';
import { createTestCa, type CertPair, type TestCa } from './tls-certs.js';
import type { KillableServer } from './killable-infra.js';

const run = promisify(execFile);

/** The directory of the temporal-server build: TEMPORAL_SERVER_DIR (which must hold it: CI sets it), else the cache; null = not built. */
export function temporalServerDir(): string | null {
  const fromEnv = process.env['TEMPORAL_SERVER_DIR'];
  if (fromEnv) return fromEnv;
  const server = cachedBuild('install-temporal-server.sh', 'TEMPORAL_SERVER_CACHE_DIR', 'temporal-server', 'temporal-server');
  return server && path.dirname(server);
}

/** Why the production topology cannot run here, or null when it can (for `test(..., { skip })`). */
export function serverTopologyMissing(): string | null {
  if (!temporalServerDir()) return 'temporal-server is not built (bash scripts/install-temporal-server.sh builds it once)';
  return null;
}

export interface ServerCerts {
  ca: TestCa;
  /** The frontend's certificate (localhost, 127.0.0.1). */
  server: CertPair;
  /** A client certificate the frontend accepts. */
  client: CertPair;
}

/** Temporal's JWT authorizer with the default claim mapper, its keys from `jwksUrl`. */
export interface JwtAuthorization {
  jwksUrl: string;
  permissionsClaimName: string;
  /** A token with `temporal-system:admin` (the claim mapper's system scope), for registering the namespace and its search attributes. */
  adminApiKey: string;
}

export interface TemporalServer extends KillableServer {
  /** host:port of the frontend (mTLS). */
  address: string;
  namespace: string;
  certs: ServerCerts;
  /** Temporal's standard client variables for this server, with the client certificate. */
  clientEnv: Record<string, string>;
  /** Arguments of the `temporal` CLI reaching this server with the client certificate. */
  cliArgs: string[];
  logFile: string;
  /** Milliseconds each start-up step took (schema, server, namespace and search attributes). */
  timings_ms: Record<string, number>;
}

export interface TemporalServerOptions {
  /** Where the config, certificates and log go. */
  root: string;
  /** A PostgreSQL superuser URL; Temporal's databases are created on that server. */
  postgresUrl: string;
  /** Names of the two databases: `<prefix>` and `<prefix>_visibility` (default temporal, as compose). */
  databasePrefix?: string;
  namespace?: string;
  /** Certificates to use (a restart keeps them); else a CA and its leaves are generated in root. */
  certs?: ServerCerts;
  authorization?: JwtAuthorization;
}

/** temporal-sql-tool's plugin, and its steps for each database (test/platform/compose.test.ts checks compose runs the same). */
export const SQL_PLUGIN = 'postgres12';
export const schemaSteps = (versionedDir: string): string[][] => [
  ['create'],
  ['setup-schema', '-v', '0.0'],
  ['update-schema', '-d', versionedDir],
];
/** The namespace's retention, as compose's temporal-setup creates it. */
export const NAMESPACE_RETENTION = '72h';

/**
 * The schema steps of docker-compose.yml's temporal-schema, for both databases: create (an existing one
 * is fine), setup-schema -v 0.0, update-schema to the server version's schema.
 */
export async function setUpTemporalSchema(dir: string, postgres: URL, databasePrefix: string): Promise<void> {
  const sqlTool = path.join(dir, 'temporal-sql-tool');
  const common = [
    '--plugin',
    SQL_PLUGIN,
    '--ep',
    postgres.hostname,
    '-p',
    postgres.port || '5432',
    '-u',
    decodeURIComponent(postgres.username),
  ];
  const env = { ...process.env, SQL_PASSWORD: decodeURIComponent(postgres.password) };
  for (const [db, schemaDir] of [
    [databasePrefix, 'temporal'],
    [`${databasePrefix}_visibility`, 'visibility'],
  ] as const) {
    const [create, ...rest] = schemaSteps(path.join(dir, 'schema', 'postgresql', 'v12', schemaDir, 'versioned'));
    await run(sqlTool, [...common, '--db', db, ...create!], { env }).catch((err: { stderr?: string }) => {
      if (!/already exists/.test(err.stderr ?? '')) throw new Error(`temporal-sql-tool create ${db}: ${err.stderr}`);
    });
    for (const step of rest) await run(sqlTool, [...common, '--db', db, ...step], { env });
  }
}

interface Ports {
  frontend: number;
  frontendMembership: number;
  internalFrontend: number;
  internalFrontendMembership: number;
  history: number;
  historyMembership: number;
  matching: number;
  matchingMembership: number;
  worker: number;
  workerMembership: number;
  metrics: number;
}

/**
 * The server's configuration, after the server's own config/development-postgres12.yaml: the same
 * persistence (fewer connections: one PostgreSQL hosts everything here), cluster metadata and services,
 * on free loopback ports; the frontend serving TLS and requiring a client certificate of the CA; an
 * internal-frontend for the server's own system workers (so an authorizer applies to clients only, as
 * Temporal recommends); this project's dynamic config file.
 */
function serverConfig(opts: {
  postgres: URL;
  databasePrefix: string;
  ports: Ports;
  certs: ServerCerts;
  authorization?: JwtAuthorization;
}): object {
  const { postgres, ports, certs } = opts;
  const sql = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${postgres.hostname}:${postgres.port || '5432'}`,
      connectProtocol: 'tcp',
      user: decodeURIComponent(postgres.username),
      password: decodeURIComponent(postgres.password),
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const rpc = (grpcPort: number, membershipPort: number) => ({ rpc: { grpcPort, membershipPort, bindOnLocalHost: true } });
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: 4,
      datastores: {
        'postgres-default': sql(opts.databasePrefix, 10),
        'postgres-visibility': sql(`${opts.databasePrefix}_visibility`, 2),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${ports.metrics}` } },
      tls: {
        frontend: {
          server: {
            certFile: certs.server.certPath,
            keyFile: certs.server.keyPath,
            clientCaFiles: [certs.ca.certPath],
            requireClientAuth: true,
          },
          client: { serverName: 'localhost', rootCaFiles: [certs.ca.certPath] },
        },
        // Certificates are files: re-read every minute, so a rotated one is served without a restart.
        refreshInterval: '1m',
      },
      ...(opts.authorization
        ? {
            authorization: {
              jwtKeyProvider: { keySourceURIs: [opts.authorization.jwksUrl], refreshInterval: '1m' },
              permissionsClaimName: opts.authorization.permissionsClaimName,
              authorizer: 'default',
              claimMapper: 'default',
            },
          }
        : {}),
    },
    services: {
      frontend: rpc(ports.frontend, ports.frontendMembership),
      'internal-frontend': rpc(ports.internalFrontend, ports.internalFrontendMembership),
      history: rpc(ports.history, ports.historyMembership),
      matching: rpc(ports.matching, ports.matchingMembership),
      worker: rpc(ports.worker, ports.workerMembership),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `localhost:${ports.frontend}` },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
    namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
    dynamicConfigClient: { filepath: TEMPORAL_DYNAMIC_CONFIG_FILE, pollInterval: '10s' },
  };
}

export const SERVER_SERVICES = ['frontend', 'internal-frontend', 'history', 'matching', 'worker'];
const STARTUP_TIMEOUT_MS = 90_000;

/** A client connection to `address` with the client certificate (and an API key, if given). */
export function connectWithCert(address: string, certs: ServerCerts, apiKey?: string): Promise<Connection> {
  return Connection.connect({
    address,
    connectTimeout: 2_000,
    tls: {
      serverNameOverride: 'localhost',
      serverRootCACertificate: Buffer.from(certs.ca.cert),
      clientCertPair: { crt: Buffer.from(certs.client.cert), key: Buffer.from(certs.client.key) },
    },
    ...(apiKey ? { apiKey } : {}),
  });
}

/**
 * Starts temporal-server on `postgresUrl`'s server and waits until its frontend answers; then
 * registers the namespace and the search attributes (an existing one is fine). SIGKILL and restart keep
 * the same configuration, data and ports.
 */
export async function startTemporalServer(opts: TemporalServerOptions): Promise<TemporalServer> {
  const dir = temporalServerDir();
  if (!dir) throw new Error(serverTopologyMissing()!);
  for (const file of ['temporal-server', 'temporal-sql-tool']) {
    if (!fs.existsSync(path.join(dir, file)))
      throw new Error(`no ${file} in ${dir} (TEMPORAL_SERVER_DIR); run scripts/install-temporal-server.sh, or unset it`);
  }
  const timings_ms: Record<string, number> = {};
  const namespace = opts.namespace ?? 'default';
  const databasePrefix = opts.databasePrefix ?? 'temporal';
  const postgres = new URL(opts.postgresUrl);
  const root = path.join(opts.root, `temporal-server-${databasePrefix}`);
  fs.mkdirSync(root, { recursive: true });

  let t = Date.now();
  const certs =
    opts.certs ??
    (() => {
      const ca = createTestCa(path.join(root, 'certs'), 'temporal test CA');
      return { ca, server: ca.server('localhost'), client: ca.client('video-api') };
    })();
  timings_ms['certificates'] = Date.now() - t;

  t = Date.now();
  await setUpTemporalSchema(dir, postgres, databasePrefix);
  timings_ms['schema'] = Date.now() - t;

  const ports: Ports = {
    frontend: await freePort(),
    frontendMembership: await freePort(),
    internalFrontend: await freePort(),
    internalFrontendMembership: await freePort(),
    history: await freePort(),
    historyMembership: await freePort(),
    matching: await freePort(),
    matchingMembership: await freePort(),
    worker: await freePort(),
    workerMembership: await freePort(),
    metrics: await freePort(),
  };
  const configDir = path.join(root, 'config');
  fs.mkdirSync(configDir, { recursive: true });
  fs.writeFileSync(
    path.join(configDir, 'production.yaml'),
    stringify(
      serverConfig({ postgres, databasePrefix, ports, certs, ...(opts.authorization ? { authorization: opts.authorization } : {}) }),
    ),
  );
  const address = `127.0.0.1:${ports.frontend}`;
  const logFile = path.join(root, 'temporal-server.log');
  const args = [
    '--root',
    root,
    '--config',
    'config',
    '--env',
    'production',
    ...(opts.authorization ? [] : ['--allow-no-auth']),
    'start',
    ...SERVER_SERVICES.flatMap((s) => ['--service', s]),
  ];

  let child: ChildProcess | null = null;
  let exited: string | null = null;
  const spawnServer = async () => {
    const logFd = fs.openSync(logFile, 'a');
    const c = spawn(path.join(dir, 'temporal-server'), args, { stdio: ['ignore', logFd, logFd] });
    fs.closeSync(logFd);
    child = c;
    exited = null;
    c.once('exit', (code, signal) => {
      if (child === c) exited = `temporal-server exited (${signal ?? code})`;
    });
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    for (;;) {
      if (exited) throw new Error(`${exited} at start: ${fs.readFileSync(logFile, 'utf8').slice(-3000)}`);
      try {
        const conn = await connectWithCert(address, certs);
        try {
          const health = await conn.healthService.check({});
          if (health.status === 1) return; // SERVING
        } finally {
          await conn.close();
        }
      } catch {
        // not up yet
      }
      if (Date.now() > deadline) {
        c.kill('SIGKILL');
        throw new Error(
          `temporal-server did not serve on ${address} within ${STARTUP_TIMEOUT_MS / 1000} s: ${fs.readFileSync(logFile, 'utf8').slice(-3000)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  t = Date.now();
  await spawnServer();
  timings_ms['server'] = Date.now() - t;

  const cliArgs = [
    '--address',
    address,
    '--tls-ca-path',
    certs.ca.certPath,
    '--tls-cert-path',
    certs.client.certPath,
    '--tls-key-path',
    certs.client.keyPath,
    '--tls-server-name',
    'localhost',
  ];
  const clientEnv: Record<string, string> = {
    TEMPORAL_ADDRESS: address,
    TEMPORAL_NAMESPACE: namespace,
    TEMPORAL_TLS: 'true',
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: certs.ca.certPath,
    TEMPORAL_TLS_CLIENT_CERT_PATH: certs.client.certPath,
    TEMPORAL_TLS_CLIENT_KEY_PATH: certs.client.keyPath,
    TEMPORAL_TLS_SERVER_NAME: 'localhost',
  };
  t = Date.now();
  await registerNamespace(cliArgs, namespace, opts.authorization ? ['--api-key', opts.authorization.adminApiKey] : []);
  timings_ms['namespace'] = Date.now() - t;

  const kill = async () => {
    const c = child as ChildProcess | null;
    if (!c || exited) return;
    const pid = c.pid!;
    child = null;
    c.kill('SIGKILL');
    const deadline = Date.now() + 10_000;
    while (isProcessAlive(pid)) {
      if (Date.now() > deadline) throw new Error(`temporal-server ${pid} survived SIGKILL`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return {
    address,
    namespace,
    certs,
    clientEnv,
    cliArgs,
    logFile,
    timings_ms,
    kill,
    restart: spawnServer,
    async stop() {
      const c = child as ChildProcess | null;
      if (!c || exited) return;
      const done = new Promise<void>((r) => c.once('exit', () => r()));
      c.kill('SIGTERM');
      const timer = setTimeout(() => c.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(timer);
      child = null;
    },
  };
}

/**
 * docker-compose.yml's temporal-setup, through the same CLI commands: the namespace (72 h retention)
 * unless it exists, then each search attribute the workflows write, unless it exists; with mTLS.
 * Waits until the frontend sees the namespace and every attribute (its namespace cache refreshes on a timer).
 */
export async function registerNamespace(cliArgs: string[], namespace: string, extraArgs: string[] = []): Promise<void> {
  const cli = resolveTemporalCli(process.env['TEMPORAL_CLI_PATH']);
  const temporal = (...args: string[]) => run(cli, [...args, ...cliArgs, ...extraArgs], { encoding: 'utf8' });
  await temporal('operator', 'namespace', 'describe', '--namespace', namespace).catch(() =>
    temporal('operator', 'namespace', 'create', '--namespace', namespace, '--retention', NAMESPACE_RETENTION),
  );
  const deadline = Date.now() + 60_000;
  for (const sa of SEARCH_ATTRIBUTES) {
    for (;;) {
      try {
        await temporal('operator', 'search-attribute', 'create', '--namespace', namespace, '--name', sa.name, '--type', 'Keyword');
        break;
      } catch (err) {
        const listed = await temporal('operator', 'search-attribute', 'list', '--namespace', namespace).then(
          (r) => r.stdout,
          () => '',
        );
        if (listed.includes(sa.name)) break;
        // A namespace just created is unknown to the frontend until its namespace cache refreshes.
        if (Date.now() > deadline)
          throw new Error(`cannot register search attribute ${sa.name}: ${(err as { stderr?: string }).stderr ?? err}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }
}
