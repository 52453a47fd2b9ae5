// Recorded histories are append-only: they are what running jobs of a released version look like, so a
// recording is never changed or deleted (a changed path is recorded under a new name). Checked three
// ways: every recording is in test/histories/MANIFEST with its SHA-256; with git, no history of a
// released commit differs from the working tree; and no manifest entry ever committed was changed or
// removed since. So CI fails if a history committed at an earlier commit is modified or deleted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { historyFiles, MANIFEST, readManifest, sha256Of } from './helpers/histories.js';

/** The commits that released a version (what CI landed): their recordings are running jobs' histories. */
const RELEASED: Record<string, string> = {
  '0.1.0': '8b4531cbff3c7fe09239fbc5b44ae1a87060cb14',
  '0.2.0': '68c1373f13f9d5a09a12897aff9f1c568f74af15',
  '0.3.0': '9b6a3293dac6f11a7b453312f1e9e14be13cbabc',
  // 0.3.1 changed no workflow code and recorded nothing new: its commit holds the histories above.
  '0.3.1': '2b215e4a1564eab5dd907857b9cf9f6c07aefe38',
  '0.4.0': 'd7eb41547b791b3be964a57136fd009d925eaa71',
  '0.5.0': 'd934245354e4b9bc75842a34caad29596db2e071',
  // 0.5.1, like 0.3.1, changed no workflow code and recorded nothing new.
  '0.5.1': 'd44fdfa7b2c4e8166b65a8daf43efb1272267511',
  '0.6.0': '1d3548ef0837e2cef3c28605364a85512daaf480',
  // 0.6.1 (bench and docs) changed no workflow code and recorded nothing new.
  '0.6.1': '72fcc575ac405a9ee0dbb0728d93f75d401b8a3c',
  // 0.7.0 (the stateless poller of pending jobs) changed no workflow code and recorded nothing new.
  '0.7.0': 'ee0125740ec871dc1b745fbe77081129a7491055',
  // 0.7.1 (create path: one statement fewer, stackless async-completion error) changed no workflow code
  // and recorded nothing new.
  '0.7.1': 'f10438edcd324e19a0b473546a6baaa473f12b4a',
};

const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
const hasCommit = (c: string) => {
  try {
    git('cat-file', '-e', `${c}^{commit}`);
    return true;
  } catch {
    return false;
  }
};
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
  for (const f of manifest.keys()) assert.ok(fs.existsSync(f), `${f} is in ${MANIFEST} but was deleted: recordings are append-only`);
});

test('no history of a released version was changed or deleted', { skip: !gitAvailable && 'not a git checkout' }, () => {
  for (const [version, commit] of Object.entries(RELEASED)) {
    if (!hasCommit(commit)) assert.fail(`release ${version} (${commit}) is not in this clone's history; clone with history`);
    const files = git('ls-tree', '-r', '--name-only', commit, 'test/histories').split('\n').filter((f) => f.endsWith('.json'));
    assert.ok(files.length > 0, `release ${version} recorded histories`);
    for (const f of files) {
      assert.ok(fs.existsSync(f), `${f} of release ${version} was deleted`);
      assert.equal(git('hash-object', f), git('rev-parse', `${commit}:${f}`), `${f} of release ${version} was changed`);
    }
  }
});

test('no manifest entry ever committed was changed or removed', { skip: !gitAvailable && 'not a git checkout' }, () => {
  const current = readManifest();
  const commits = git('log', '--format=%H', '--', MANIFEST).split('\n').filter(Boolean);
  for (const c of commits) {
    for (const [f, sha] of readManifest(git('show', `${c}:${MANIFEST}`))) {
      assert.equal(current.get(f), sha, `${f} (recorded by ${c.slice(0, 8)}) was changed or removed`);
    }
  }
});
