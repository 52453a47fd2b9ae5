// The previous supported release's workflow code, for upgrade tests: the tree of the commit that
// recorded its histories (test/histories/<version>/); while this release is the only one supported,
// that is this release's own recording commit.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { HISTORIES_DIR, SUPPORTED_RELEASES } from './histories.js';

const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

export const PREVIOUS_RELEASE = SUPPORTED_RELEASES[0]!;

/** The commit that added the previous release's recordings (null outside a git checkout with history). */
export const previousReleaseCommit: string | null = (() => {
  try {
    return (
      git('log', '--diff-filter=A', '--format=%H', '--', path.join(HISTORIES_DIR, PREVIOUS_RELEASE, 'video-job-succeeded.json'))
        .split('\n')
        .filter(Boolean)
        .pop() ?? null
    );
  } catch {
    return null;
  }
})();

/**
 * The previous release's workflows/ folder, extracted inside the project (so its imports resolve to
 * this node_modules) and bundled. Call `cleanup` when done.
 */
export async function bundlePreviousRelease(): Promise<{ code: string; cleanup(): void }> {
  if (!previousReleaseCommit) throw new Error('not a git checkout with history');
  fs.mkdirSync('.data', { recursive: true });
  const extracted = fs.mkdtempSync(path.join('.data', 'release-'));
  try {
    execFileSync('sh', ['-c', `git archive ${previousReleaseCommit} workflows | tar -x -C ${extracted}`]);
    const { code } = await bundleWorkflowCode({ workflowsPath: path.resolve(extracted, 'workflows', 'index.ts'), ignoreModules: [] });
    return { code, cleanup: () => fs.rmSync(extracted, { recursive: true, force: true }) };
  } catch (err) {
    fs.rmSync(extracted, { recursive: true, force: true });
    throw err;
  }
}
