// Startup failures end with one line that says what to do, never a JavaScript error message: the
// builders of those lines, fed the failures seen in the field (initdb that could not even be spawned
// had null output and crashed the old builder with "Cannot read properties of null (reading 'trim')").
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { initdbFailureMessage } from '../../src/db/embedded.js';
import { startupFailureLine } from '../../src/process-lifecycle.js';
import { ConfigError, loadConfig } from '../../src/config.js';

const errno = (code: string, extra: Record<string, string> = {}) => Object.assign(new Error(`${code}: something`), { code, ...extra });
const oneLine = (s: string) => assert.ok(!s.includes('\n'), `one line: ${s}`);

describe('initdbFailureMessage', () => {
  test('initdb that could not be spawned (no output at all): says so and what to do', () => {
    const msg = initdbFailureMessage(
      '/root/app/.data/postgres',
      { error: errno('EACCES'), status: null, signal: null, stdout: null as unknown as string, stderr: null as unknown as string },
      'postgres',
    );
    oneLine(msg);
    assert.match(msg, /^cannot run initdb as user "postgres" \(permission denied\)/);
    assert.match(msg, /set DATA_DIR elsewhere or set DATABASE_URL$/);
    assert.doesNotMatch(msg, /null|undefined|Cannot read/);
    const missing = initdbFailureMessage(
      '/d',
      { error: errno('ENOENT'), status: null, signal: null, stdout: null as unknown as string, stderr: null as unknown as string },
      null,
    );
    assert.match(missing, /^cannot run initdb \(executable not found\); check that \/d is writable/);
  });

  test('initdb that failed: its error line, not its last line of chatter', () => {
    const stderr =
      'The files belonging to this database system will be owned by user "postgres".\ninitdb: error: could not create directory "/x/pg": Permission denied\n\n';
    const msg = initdbFailureMessage('/x/pg', { status: 1, signal: null, stdout: 'Fixing permissions ... ok\n', stderr }, 'postgres');
    oneLine(msg);
    assert.equal(
      msg,
      'initdb as user "postgres" failed for /x/pg: initdb: error: could not create directory "/x/pg": Permission denied; user "postgres" must be able to run the PostgreSQL binaries and write /x/pg: set DATA_DIR elsewhere or set DATABASE_URL',
    );
  });

  test('initdb killed, or silent', () => {
    assert.match(
      initdbFailureMessage('/d', { status: null, signal: 'SIGKILL', stdout: '', stderr: '' }, null),
      /^initdb was killed by SIGKILL while creating \/d; /,
    );
    assert.match(
      initdbFailureMessage('/d', { status: 2, signal: null, stdout: '', stderr: '' }, null),
      /^initdb failed for \/d: exit status 2; /,
    );
  });
});

describe('startupFailureLine', () => {
  test('a ConfigError is its own message', () => {
    assert.equal(startupFailureLine(new ConfigError('set PORT to a free port')), 'set PORT to a free port');
  });

  test('a file system error names the path, the reason in words and what to do', () => {
    const line = startupFailureLine(errno('EACCES', { syscall: 'mkdir', path: '/srv/data' }));
    assert.equal(
      line,
      'cannot mkdir /srv/data (permission denied): run as a user who may write there, or set DATA_DIR to a directory you own',
    );
    assert.match(
      startupFailureLine(errno('ENOSPC', { syscall: 'write', path: '/d/x' })),
      /no space left on device\): free some disk space/,
    );
  });

  test('anything unforeseen: no JavaScript message on the line; the details go to a file the line names', () => {
    let written = '';
    const bug = new TypeError("Cannot read properties of null (reading 'trim')");
    const line = startupFailureLine(bug, (text) => {
      written = text;
      return '/tmp/details.txt';
    });
    oneLine(line);
    assert.equal(line, 'could not start because of an unexpected internal error; please report it with /tmp/details.txt');
    assert.match(written, /TypeError: Cannot read properties of null/);
    assert.equal(
      startupFailureLine('a string', () => null),
      'could not start because of an unexpected internal error; please report it',
    );
  });
});

describe('worker limits in the configuration', () => {
  test('the polls a worker runs at once are bounded: at least one, at most 1,000', () => {
    assert.equal(loadConfig({}).workerConcurrentPollsMax, 50);
    assert.equal(loadConfig({ WORKER_MAX_CONCURRENT_POLLS: '1' }).workerConcurrentPollsMax, 1);
    for (const bad of ['0', '1001', 'many']) {
      assert.throws(
        () => loadConfig({ WORKER_MAX_CONCURRENT_POLLS: bad }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError);
          assert.match(err.message, /WORKER_MAX_CONCURRENT_POLLS/);
          return true;
        },
      );
    }
  });
});

describe('the task queue in the configuration', () => {
  test('is named in a visibility query, so only plain characters are taken: a quote is refused at startup', () => {
    assert.equal(loadConfig({ TEMPORAL_TASK_QUEUE: 'video-voice-api.eu:2' }).temporal.taskQueue, 'video-voice-api.eu:2');
    for (const bad of ["q' OR 'x' = 'x", 'a b', 'x'.repeat(201)]) {
      assert.throws(
        () => loadConfig({ TEMPORAL_TASK_QUEUE: bad }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError);
          assert.match(err.message, /TEMPORAL_TASK_QUEUE/);
          return true;
        },
      );
    }
  });
});
