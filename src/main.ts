// `npm start`: the whole service on one machine. Embedded PostgreSQL unless DATABASE_URL is set, a
// local Temporal dev server (with its Web UI) unless TEMPORAL_ADDRESS is set, the worker and the API.
// All state lives under DATA_DIR and survives a restart, including a kill -9 of the whole tree.
import fs from 'node:fs';
import path from 'node:path';
// Tracing starts before the service's modules are imported (it patches express, pg and http as they
// load). The one process runs the API and the worker: its spans are the service video-voice-api's.
import { shutdownTelemetry, startTelemetry } from './telemetry/index.js';

await startTelemetry('all');
const { loadConfig } = await import('./config.js');
const { createLogger } = await import('./logger.js');
const { startEmbeddedPostgres } = await import('./db/embedded.js');
const { resolveTemporalCli, startDevServer } = await import('./temporal/dev-server.js');
const { loadSecrets } = await import('./runtime/secrets.js');
const { openDatabase, redactUrl } = await import('./runtime/database.js');
const { startApi } = await import('./runtime/api.js');
const { startWorker } = await import('./runtime/worker.js');
const { runMain } = await import('./process-lifecycle.js');

runMain('video-voice-api', async () => {
  // The Temporal CLI's profile file in the user's home may name a production namespace: npm start leaves
  // its dev server only for a Temporal named here (TEMPORAL_ADDRESS, TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE).
  const config = loadConfig(process.env, { userTemporalProfile: false });
  const logger = createLogger(config.logLevel, 'video-voice-api');
  fs.mkdirSync(config.dataDir, { recursive: true });
  const logDir = path.join(config.dataDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const secrets = loadSecrets(config);
  const stops: (() => Promise<void>)[] = [];

  try {
    let databaseUrl = config.databaseUrl;
    let postgresLine = `PostgreSQL:   ${redactUrl(databaseUrl ?? '')} (DATABASE_URL)`;
    if (!databaseUrl) {
      const pg = await startEmbeddedPostgres({
        pgdata: path.join(config.dataDir, 'postgres'),
        port: config.embeddedPgPort,
        logFile: path.join(logDir, 'postgres.log'),
      });
      stops.unshift(pg.stop);
      databaseUrl = pg.url;
      postgresLine = `PostgreSQL:   embedded on port ${config.embeddedPgPort}, data in ${pg.pgdata}${pg.moved ? ` (${pg.moved})` : ''}`;
    }
    let temporalAddress = config.temporal.address;
    let temporalUi = "your Temporal deployment's Web UI";
    if (!temporalAddress) {
      const dev = await startDevServer({
        cliPath: resolveTemporalCli(config.temporal.cliPath),
        namespace: config.temporal.namespace,
        port: config.temporal.devPort,
        uiPort: config.temporal.uiPort,
        dbFile: path.join(config.dataDir, 'temporal', 'temporal.db'),
        logFile: path.join(logDir, 'temporal.log'),
        pidFile: path.join(config.dataDir, 'temporal', 'server.pid'),
      });
      stops.unshift(dev.stop);
      temporalAddress = dev.address;
      temporalUi = dev.uiUrl;
    }
    const db = await openDatabase(databaseUrl, config);
    stops.unshift(() => db.end());
    const worker = await startWorker({ config, db, temporalAddress, logger, urlSigningSecret: secrets.urlSigningSecret });
    stops.unshift(worker.shutdown);
    const api = await startApi({ config, db, temporalAddress, secrets, logger });
    stops.unshift(api.close);

    const adminHint = secrets.adminTokenGenerated
      ? `admin token (generated, kept in ${path.join(config.dataDir, 'secrets.json')}): ${secrets.adminToken}`
      : 'admin token: the ADMIN_TOKEN you set';
    process.stdout.write(
      [
        '',
        `  API:          ${api.url}`,
        `  Console:      ${api.url}/console   (sign in with an API key)`,
        `  Temporal UI:  ${temporalUi}`,
        `  ${postgresLine}`,
        `  ${adminHint}`,
        '  first API key:',
        `    npm run --silent admin -- workspace create --name demo --credits 10`,
        `    npm run --silent admin -- key create --workspace <id from above>`,
        `  data:         ${config.dataDir}`,
        '',
      ].join('\n') + '\n',
    );
  } catch (err) {
    for (const stop of stops) await stop().catch(() => {});
    throw err;
  }
  // Stop in reverse order of start: API stops accepting, worker drains, then the servers.
  return async () => {
    for (const stop of stops) await stop();
    await shutdownTelemetry();
  };
});
