// The process's PostgreSQL pool: reachable (else one line at startup) and migrated.
import { ConfigError, type Config } from '../config.js';
import { createPool, type Db } from '../db/pool.js';
import { migrate } from '../db/migrate.js';
import { registerDatabaseGauges } from '../metrics.js';

export async function openDatabase(url: string, config: Config): Promise<Db> {
  const db = createPool(url, config.databasePoolMax, { 'video_api.max_pending_jobs': config.maxPendingJobsPerWorkspace });
  try {
    await db.query('SELECT 1');
  } catch (err) {
    await db.end().catch(() => {});
    throw new ConfigError(`cannot reach PostgreSQL at ${redactUrl(url)}: ${(err as Error).message}`);
  }
  await migrate(db);
  registerDatabaseGauges(db);
  return db;
}

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
