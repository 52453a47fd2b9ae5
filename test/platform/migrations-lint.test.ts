// squawk, a linter of PostgreSQL migrations, passes every migration added after the released ones
// (.squawk.toml lists those it skips: they are applied by deployed databases and never edited), and
// fails on one that would lock or break a live table (a required column added, an index built without
// CONCURRENTLY). A migration must also suit the release before it: test/platform/upgrade-schema.test.ts.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runTool, toolPath } from '../helpers/tools.js';

const MIGRATIONS = 'src/db/migrations';
const CONFIG = '.squawk.toml';

/** Without squawk (and no python3 to install it) these tests skip, saying why; CI (.ci/run) installs it. */
const TOOL_MISSING =
  process.env['SQUAWK_PATH'] || !spawnSync('python3', ['--version']).error
    ? undefined
    : 'python3 is needed to install squawk (run bash .ci/run, or set SQUAWK_PATH)';
let squawk: string;
before(() => {
  if (TOOL_MISSING) return;
  squawk = toolPath('SQUAWK_PATH', 'scripts/install-squawk.sh');
});

const excluded = (): string[] => {
  const text = fs.readFileSync(CONFIG, 'utf8');
  const list = /excluded_paths\s*=\s*\[([^\]]*)\]/.exec(text)?.[1] ?? '';
  return [...list.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
};
const migrations = () =>
  fs
    .readdirSync(MIGRATIONS)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => `${MIGRATIONS}/${f}`);
const lint = (cwd = process.cwd()) => runTool(squawk, ['--reporter', 'gcc', `${MIGRATIONS}/*.sql`], { cwd });

describe('migration lint (squawk)', { skip: TOOL_MISSING }, () => {
  test('every migration after the released ones passes', () => {
    const r = lint();
    assert.equal(r.status, 0, r.output);
  });

  test('the skipped ones are the oldest migrations, each of them exists, and at least the newest is linted', () => {
    const all = migrations();
    const skipped = excluded();
    assert.ok(skipped.length > 0);
    assert.deepEqual(skipped, all.slice(0, skipped.length), 'only a prefix of the migrations, in order, is skipped');
    assert.ok(skipped.length < all.length, 'the newest migration is linted');
    const checked = runTool(squawk, ['--verbose', '--reporter', 'gcc', `${MIGRATIONS}/*.sql`]).output;
    for (const file of all.slice(skipped.length)) assert.ok(checked.includes(`checking file path: ${file}`), `${file} is linted`);
  });

  test('a new migration that would lock or break a live table fails the lint', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-squawk-'));
    try {
      fs.mkdirSync(path.join(dir, MIGRATIONS), { recursive: true });
      for (const f of migrations()) fs.copyFileSync(f, path.join(dir, f));
      fs.copyFileSync(CONFIG, path.join(dir, CONFIG));
      assert.equal(lint(dir).status, 0, 'the copy passes as it is');
      fs.writeFileSync(
        path.join(dir, MIGRATIONS, '999_bad.sql'),
        "SET LOCAL lock_timeout = '5s';\nSET LOCAL statement_timeout = '30s';\nALTER TABLE video_jobs ADD COLUMN region text NOT NULL;\n",
      );
      const r = lint(dir);
      assert.notEqual(r.status, 0, r.output);
      assert.match(r.output, /999_bad\.sql.*adding-required-field/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
