// `npm run api`: an API process (scale out: run any number) against an existing Temporal
// (TEMPORAL_ADDRESS) and PostgreSQL (DATABASE_URL).
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { loadSecrets } from './runtime/secrets.js';
import { openDatabase } from './runtime/database.js';
import { startApi } from './runtime/api.js';
import { runMain } from './process-lifecycle.js';

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
  };
});
