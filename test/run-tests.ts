// `npm test`: starts one real PostgreSQL (embedded) and one real Temporal dev server for the whole
// run, then Node's test runner over the *.test.ts files under test/ (one folder per feature; a directory
// given as an argument stands for the test files under it). Each test file makes its own database, task
// queue and storage directory on them, so files never see each other's data. A run whose files reach
// none of that (nothing they import, directly or not, reads the TEST_* variables the infrastructure
// sets) starts neither server.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startInfra } from './helpers/infra.js';
import { TEST_RUNNER_ARGS } from './helpers/test-runner-args.js';

/** Folders of test/ that hold what the tests use, not tests. */
const NOT_TESTS = new Set(['helpers', 'fakes', 'histories']);

/** Names of the variables the run's infrastructure sets; a module that mentions one needs it. */
const INFRA_VARIABLE = /\bTEST_[A-Z_]+/;
/** Relative module specifiers of static and dynamic imports. */
const RELATIVE_IMPORT = /(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g;

/** Whether a module, or anything it imports from this repository, reads the infrastructure's variables. */
function needsInfra(file: string, seen = new Set<string>()): boolean {
  if (seen.has(file)) return false;
  seen.add(file);
  const text = fs.readFileSync(file, 'utf8');
  if (INFRA_VARIABLE.test(text)) return true;
  for (const [, spec] of text.matchAll(RELATIVE_IMPORT)) {
    const target = path.resolve(path.dirname(file), spec!.replace(/\.js$/, '.ts'));
    if (fs.existsSync(target) && target.endsWith('.ts') && needsInfra(target, seen)) return true;
  }
  return false;
}

/** The *.test.ts files under a directory, in path order. */
function testFilesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts') && !NOT_TESTS.has(f.split(path.sep)[0]!))
    .sort()
    .map((f) => path.join(dir, f));
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const files = (args.length ? args : ['test']).flatMap((arg) => (fs.statSync(arg).isDirectory() ? testFilesUnder(arg) : [arg]));
  if (!files.some((f) => needsInfra(f))) {
    process.stderr.write('no selected test file needs PostgreSQL or Temporal: starting neither\n');
    return runTests(files, {});
  }
  const started = Date.now();
  const infra = await startInfra('vva-test-');
  process.stderr.write(
    `test infrastructure up in ${Date.now() - started} ms: postgres ${infra.databaseUrl}, temporal ${infra.temporalAddress}\n`,
  );
  try {
    return await runTests(files, infra.env);
  } finally {
    await infra.stop();
  }
}

/** Node's test runner over `files`, with `env` added to this process's environment. */
async function runTests(files: string[], env: Record<string, string>): Promise<number> {
  const child = spawn(process.execPath, [...TEST_RUNNER_ARGS, ...files], {
    stdio: 'inherit',
    env: { ...process.env, ...env },
  });
  return await new Promise<number>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`test run failed to start: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
