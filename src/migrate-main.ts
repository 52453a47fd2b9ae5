// `npm run migrate` (built: `node dist/src/migrate-main.js`): applies the pending schema migrations
// (src/db/migrations) to DATABASE_URL, prints what it applied, and exits. Deployments run it once per
// release before the new processes start (the Helm chart's migration Job); every API and worker
// process also migrates at startup, which is then a no-op check under the same advisory lock.
import { ConfigError } from './config-error.js';
import { createPool } from './db/pool.js';
import { migrate } from './db/migrate.js';
import { redactUrl } from './runtime/database.js';
import { startupFailureLine } from './process-lifecycle.js';

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL;
  if (!url) throw new ConfigError('DATABASE_URL is required: the PostgreSQL to migrate');
  const db = createPool(url, 1);
  try {
    await db.query('SELECT 1').catch((err: Error) => {
      throw new ConfigError(`cannot reach PostgreSQL at ${redactUrl(url)}: ${err.message}`);
    });
    const applied = await migrate(db);
    process.stdout.write(`migrate: ${applied.length === 0 ? 'the schema is up to date' : `applied ${applied.join(', ')}`}\n`);
  } finally {
    await db.end().catch(() => {});
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`migrate: ${startupFailureLine(err)}\n`);
    process.exit(1);
  },
);
