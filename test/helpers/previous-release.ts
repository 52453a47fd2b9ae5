// The previous supported release's workflow code, for upgrade tests: the tree of the commit that
// recorded its histories (test/histories/<version>/); while this release is the only one supported,
// that is this release's own recording commit.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
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

/**
 * The previous release's whole tree (its src/, activities/, workflows/, config/, assets/ and package.json),
 * extracted inside the project so its imports resolve to this node_modules: its entry points run as
 * they ran in that release. Call `cleanup` when done.
 */
export function extractPreviousRelease(): { dir: string; cleanup(): void } {
  if (!previousReleaseCommit) throw new Error('not a git checkout with history');
  fs.mkdirSync('.data', { recursive: true });
  const dir = path.resolve(fs.mkdtempSync(path.join('.data', 'release-tree-')));
  const cleanup = () => fs.rmSync(dir, { recursive: true, force: true });
  try {
    const parts = ['src', 'activities', 'workflows', 'config', 'assets', 'package.json', 'tsconfig.json'].filter((p) => {
      try {
        git('cat-file', '-e', `${previousReleaseCommit}:${p}`);
        return true;
      } catch {
        return false;
      }
    });
    execFileSync('sh', ['-c', `git archive ${previousReleaseCommit} ${parts.join(' ')} | tar -x -C ${dir}`]);
    return { dir, cleanup };
  } catch (err) {
    cleanup();
    throw err;
  }
}

/**
 * Starts one of the previous release's entry points (`api` or `worker`) from its extracted tree, with
 * `env`; resolves with the process and its output so far once it says it is ready (the API with its URL).
 */
export async function startPreviousReleaseProcess(
  dir: string,
  entry: 'api' | 'worker',
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string | null; output: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(dir, 'src', `${entry}-main.ts`)], {
    cwd: dir,
    env: { ...process.env, ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const ready = entry === 'api' ? 'api listening' : 'worker running';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the previous release's ${entry} did not start: ${output}`));
    }, 90_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const line = output.split('\n').find((l) => l.includes(ready));
      if (!line) return;
      clearTimeout(timer);
      const url = entry === 'api' ? ((JSON.parse(line) as { url?: string }).url ?? null) : null;
      resolve({ child, url, output: () => output });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the previous release's ${entry} exited (${code}): ${output}`));
    });
  });
}
