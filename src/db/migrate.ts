// Versioned SQL migrations from src/db/migrations, applied in name order at start, each once,
// under an advisory lock so that several processes starting together apply them once.
import fs from 'node:fs/promises';
import path from 'node:path';
import { withClient, type Db } from './pool.js';
import { projectPath } from '../paths.js';

const MIGRATIONS_DIR = projectPath('src', 'db', 'migrations');
const LOCK_ID = 724_301_117;

export async function migrate(db: Db): Promise<string[]> {
  const files = (await fs.readdir(MIGRATIONS_DIR)).filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const applied: string[] = [];
  await withClient(db, async (client) => {
    try {
      await client.query('SELECT pg_advisory_lock($1)', [LOCK_ID]);
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
      const done = new Set((await client.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
      for (const file of files) {
        if (done.has(file)) continue;
        const sql = await fs.readFile(path.join(MIGRATIONS_DIR, file), 'utf8');
        await client.query('BEGIN');
        try {
          await client.query(sql);
          await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [file]);
          await client.query('COMMIT');
          applied.push(file);
        } catch (err) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${file} failed: ${(err as Error).message}`);
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [LOCK_ID]).catch(() => {});
    }
  });
  return applied;
}
