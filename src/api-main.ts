// `npm run api`: an API process (scale out: run any number) against an existing Temporal
// (TEMPORAL_ADDRESS) and PostgreSQL (DATABASE_URL).
// Tracing starts before the service's modules are imported (it patches express, pg and http as they load).
import { shutdownTelemetry, startTelemetry } from './telemetry/index.js';

await startTelemetry('api');
const { ConfigError, loadConfig } = await import('./config.js');
const { createLogger } = await import('./logger.js');
const { loadSecrets } = await import('./runtime/secrets.js');
const { openDatabase } = await import('./runtime/database.js');
const { startApi } = await import('./runtime/api.js');
const { runMain } = await import('./process-lifecycle.js');

runMain('api', async () => {
  const config = loadConfig();
  if (!config.databaseUrl) throw new ConfigError('DATABASE_URL is required for an API process (npm start runs an embedded one)');
  if (!config.temporal.address) throw new ConfigError('TEMPORAL_ADDRESS is required for an API process (npm start runs a dev server)');
  const logger = createLogger(config.logLevel, 'api');
  const secrets = loadSecrets(config);
  const db = await openDatabase(config.databaseUrl, config);
  const api = await startApi({ config, db, temporalAddress: config.temporal.address, secrets, logger });
  logger.info({ url: api.url, pid: process.pid }, 'api listening');
  return async () => {
    await api.close();
    await db.end();
    await shutdownTelemetry();
  };
});
