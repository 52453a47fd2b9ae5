// The arguments `npm test` gives Node's test runner (test/run-tests.ts), in one place so the check of the
// runner's reporting (test/platform/test-runner-report.test.ts) runs them exactly.
import { fileURLToPath } from 'node:url';

/** Test files run at once, each in a process of its own. */
export const TEST_FILES_AT_ONCE = 2;

/**
 * --test-force-exit: a test file whose tests have all finished exits even if something it started still
 * holds the event loop (a leak then costs nothing but is no hang of the whole run). exit-after-report
 * makes that exit wait until the file's verdicts have reached the runner.
 */
export const TEST_RUNNER_ARGS = [
  '--import',
  'tsx',
  '--import',
  fileURLToPath(new URL('./exit-after-report.mjs', import.meta.url)),
  '--test',
  `--test-concurrency=${TEST_FILES_AT_ONCE}`,
  '--test-force-exit',
];
