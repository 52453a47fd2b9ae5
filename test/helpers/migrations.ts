// A database migrated as a previous release left it: every migration before `version`, applied and
// recorded as src/db/migrate.ts records them, so a test can write rows as the old schema had them and
// then run `migrate` (which applies `version` first, then any later one).
import fs from 'node:fs';
import path from 'node:path';
import type { Db } from '../../src/db/pool.js';
import { projectPath } from '../../src/paths.js';

export async function migrateBefore(db: Db, version: string): Promise<void> {
  const dir = projectPath('src', 'db', 'migrations');
  await db.query('CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
  for (const f of fs
    .readdirSync(dir)
    .filter((f) => /^\d{3}_.*\.sql$/.test(f) && f < version)
    .sort()) {
    await db.query(fs.readFileSync(path.join(dir, f), 'utf8'));
    await db.query('INSERT INTO schema_migrations (version) VALUES ($1)', [f]);
  }
}
