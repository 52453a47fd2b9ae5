// A credential rotation whose check fails for a passing reason (Temporal unreachable, slow) is tried
// again, with backoff, at every check interval while the configuration on disk differs from the one in
// use, and applied once Temporal accepts it; the log names the kind of failure. A connection replaced by
// a rotation (the API's and the worker's alike) is drained: closed after a grace, not at once.
// Rotations through a real TLS front: test/platform/temporal-tls.test.ts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { CredentialWatcher, RetiredConnections, type CredentialChange } from '../../src/temporal/credentials.js';
import { loadTemporalSettings, type TemporalConnectOptions } from '../../src/temporal/connection-config.js';
import { temporalFailureKind, TemporalConnectError } from '../../src/temporal/startup-errors.js';
import { verifyCredentials } from '../../src/temporal/client.js';

let dir: string;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-credentials-'));
});
after(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A logger whose lines are kept (parsed), for assertions. */
function capturedLogger() {
  const lines: { msg: string; kind?: string; retry_in_ms?: number }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as (typeof lines)[number]);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

const profile = (toml: string, key: string) =>
  fs.writeFileSync(toml, `[profile.default]\naddress = "127.0.0.1:7233"\napi_key = "${key}"\n`);

async function waitFor(check: () => boolean, timeout_ms: number, what: string) {
  const until = Date.now() + timeout_ms;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A watcher over a profile file with key `tk-old`, whose checks answer what `verify` says. */
function watcherOf(name: string, verify: (connect: TemporalConnectOptions) => Promise<void>) {
  const toml = path.join(dir, `${name}.toml`);
  profile(toml, 'tk-old');
  const env = { TEMPORAL_CONFIG_FILE: toml };
  const { logger, lines } = capturedLogger();
  const applied: CredentialChange[] = [];
  const watcher = new CredentialWatcher({
    env,
    settings: loadTemporalSettings(env),
    intervalMs: 100,
    logger,
    verify: (connect) => verify(connect),
    apply: async (change) => {
      applied.push(change);
    },
  });
  return { toml, watcher, lines, applied };
}

describe('credential rotation retried', () => {
  test('Temporal unreachable at the rotation: tried again with backoff until it answers, then applied; the log says unreachable', async () => {
    const attempts: number[] = [];
    const w = watcherOf('unreachable', async (connect) => {
      attempts.push(Date.now());
      assert.equal(connect.apiKey, 'tk-new');
      if (attempts.length <= 3) throw new TemporalConnectError('cannot reach the Temporal server at x (ECONNREFUSED)', 'unreachable');
    });
    // The new key is on disk before the watcher looks, so its own poll sees no change: the one check
    // below is the rotation's (as the watcher makes it), and every attempt after it is a retry.
    profile(w.toml, 'tk-new');
    w.watcher.start();
    try {
      // One check, as the file watcher makes; no further change on disk, no SIGHUP.
      await w.watcher.check('file changed');
      assert.equal(w.applied.length, 0);
      assert.equal(w.watcher.retrying, true);
      await waitFor(() => w.applied.length === 1, 10_000, 'the rotation to be applied');
      assert.equal(attempts.length, 4);
      assert.equal(w.applied[0]!.next.connect.apiKey, 'tk-new');
      // One interval, then two, then four.
      const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
      assert.ok(gaps[1]! >= 190 && gaps[2]! >= 390, `backoff between attempts: ${gaps.join(', ')} ms`);
      const failures = w.lines.filter((l) => /not rotated/.test(l.msg));
      assert.equal(failures.length, 3);
      for (const f of failures) {
        assert.equal(f.kind, 'unreachable');
        assert.match(f.msg, /\(unreachable\)/);
        assert.doesNotMatch(f.msg, /refuses/);
      }
      assert.ok(w.lines.some((l) => l.msg === 'Temporal credentials rotated'));
      assert.equal(w.watcher.retrying, false);
      // Nothing else to do: no more attempts.
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(attempts.length, 4);
    } finally {
      w.watcher.stop();
    }
  });

  test('a refusal is logged as one, and tried again too; undoing the change on disk stops the attempts', async () => {
    let attempts = 0;
    const w = watcherOf('refused', async () => {
      attempts++;
      throw new TemporalConnectError('the Temporal server at x refused this process credentials (UNAUTHENTICATED: bad key)', 'refused');
    });
    w.watcher.start();
    try {
      profile(w.toml, 'tk-new');
      await w.watcher.check('SIGHUP');
      await waitFor(() => attempts >= 2, 5_000, 'a second attempt');
      assert.match(w.lines.find((l) => /not rotated/.test(l.msg))!.msg, /Temporal refuses the new ones/);
      assert.equal(w.lines.find((l) => /not rotated/.test(l.msg))!.kind, 'refused');
      profile(w.toml, 'tk-old');
      await w.watcher.check('file changed');
      assert.equal(w.watcher.retrying, false);
      const after = attempts;
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(attempts, after, 'no attempt once the configuration on disk is the one in use');
      assert.equal(w.applied.length, 0);
    } finally {
      w.watcher.stop();
    }
  });

  test('the kinds of real failures: a closed port is unreachable, a server that never answers is a timeout', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const closedPort = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const unreachable = await verifyCredentials({ address: `127.0.0.1:${closedPort}` }, 'default').catch((e: unknown) => e);
    assert.equal(temporalFailureKind(unreachable), 'unreachable', String(unreachable));

    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (silent.address() as net.AddressInfo).port;
      const timedOut = await verifyCredentials({ address: `127.0.0.1:${port}` }, 'default').catch((e: unknown) => e);
      assert.equal(temporalFailureKind(timedOut), 'timeout', String(timedOut));
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });
});

describe('connections a rotation replaced', () => {
  test('are closed after the grace, not at once; all of them when the process closes', async () => {
    const closed: string[] = [];
    const conn = (name: string) => ({ close: async () => void closed.push(name) });
    const retired = new RetiredConnections(300);
    retired.retire(conn('first'));
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(closed, [], 'still open for the calls begun on it');
    await waitFor(() => closed.length === 1, 2_000, 'the first to close');
    retired.retire(conn('second'));
    assert.equal(retired.size, 1);
    await retired.closeAll();
    assert.deepEqual(closed, ['first', 'second']);
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(closed, ['first', 'second'], 'closed once');
  });
});
