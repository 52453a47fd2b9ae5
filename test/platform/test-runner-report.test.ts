// Every verdict of every test file reaches the report: files whose processes would stay alive (a handle
// left open) and write far more than a pipe holds are run the way `npm test` runs files, at once, and the
// runner must count each of their tests, the failing one named with its error. Without the exit waiting
// for stdout (test/helpers/exit-after-report.mjs) some verdicts are lost on most runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_RUNNER_ARGS } from '../helpers/test-runner-args.js';

const FILES = 6;
const TESTS_PER_FILE = 40;
/** Long names make each verdict a few KiB, so a file's verdicts outgrow the pipe's 64 KiB buffer. */
const NAME_CHARACTERS = 4_000;

test('with forced exits, every test of every file is reported, and a failing last test is named with its error', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-report-'));
  try {
    const files = Array.from({ length: FILES }, (_, f) => {
      const file = path.join(dir, `f${f}.test.mjs`);
      fs.writeFileSync(
        file,
        [
          "import { test } from 'node:test';",
          `for (let i = 0; i < ${TESTS_PER_FILE}; i++) test('t' + i + ' ' + 'x'.repeat(${NAME_CHARACTERS}), () => {`,
          `  if (${f === FILES - 1} && i === ${TESTS_PER_FILE - 1}) throw new Error('the last test of the last file fails');`,
          '});',
          'setInterval(() => {}, 1000); // a handle left open: only the forced exit ends the process',
        ].join('\n'),
      );
      return file;
    });
    // This file runs as a test file itself: the runner started here must not take itself for one.
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const child = spawn(process.execPath, [...TEST_RUNNER_ARGS, '--test-reporter=tap', ...files], { env });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr.resume();
    // 'close', not 'exit': the child can exit before this process has read the last of its output.
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 1, 'the failing test fails the run');
    const total = FILES * TESTS_PER_FILE;
    assert.match(out, new RegExp(`^# tests ${total}$`, 'm'), `all ${total} tests counted`);
    assert.match(out, /^# fail 1$/m);
    assert.match(out, /the last test of the last file fails/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
