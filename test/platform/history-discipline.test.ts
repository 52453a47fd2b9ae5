// Recorded histories of supported releases are append-only: they are what running jobs of those releases
// look like, so within the window a recording is never changed or deleted (a changed path is recorded
// under a new name). Checked two ways: every recording is in test/histories/MANIFEST with its SHA-256,
// and, with git, no manifest entry of a supported release ever committed was changed or removed since.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { historyFiles, MANIFEST, readManifest, releaseOf, sha256Of, SUPPORTED_RELEASES } from '../helpers/histories.js';

const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
const gitAvailable = (() => {
  try {
    return git('rev-parse', '--is-inside-work-tree') === 'true';
  } catch {
    return false;
  }
})();

test('every recorded history is in the manifest with its SHA-256, and every manifest entry is a file', () => {
  const manifest = readManifest();
  const files = historyFiles();
  assert.ok(files.length > 0);
  for (const f of files) {
    assert.ok(manifest.has(f), `${f} is not in ${MANIFEST}: record histories with npm run record-histories`);
    assert.equal(sha256Of(fs.readFileSync(f)), manifest.get(f), `${f} was changed: recordings are append-only`);
  }
  for (const f of manifest.keys()) assert.ok(fs.existsSync(f), `${f} is in ${MANIFEST} but was deleted`);
});

test(
  'no manifest entry of a supported release ever committed was changed or removed',
  { skip: !gitAvailable && 'not a git checkout' },
  () => {
    const current = readManifest();
    const commits = git('log', '--format=%H', '--', MANIFEST).split('\n').filter(Boolean);
    for (const c of commits) {
      let committed: string;
      try {
        committed = git('show', `${c}:${MANIFEST}`);
      } catch {
        continue; // the commit that removed the manifest of releases out of the window
      }
      for (const [f, sha] of readManifest(committed)) {
        if (!SUPPORTED_RELEASES.includes(releaseOf(f))) continue;
        assert.equal(current.get(f), sha, `${f} (recorded by ${c.slice(0, 8)}) was changed or removed`);
      }
    }
  },
);
