// `npm start` as a user runs it (src/main.ts with its own embedded PostgreSQL and Temporal dev
// server under DATA_DIR): the whole process tree killed with SIGKILL mid-job, started again, and the
// job completes with exact billing. Also: graceful SIGTERM, and one-line errors for broken pieces.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { freePort } from '../helpers/infra.js';
import { infra } from '../helpers/stack.js';
import { killGroup, spawnTree, untilStarted } from '../helpers/processes.js';

const started: ChildProcess[] = [];
after(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) killGroup(c, 'SIGKILL');
});

const spawnMain = (env: Record<string, string>) => spawnTree(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env, track: started });

async function portsEnv(dataDir: string) {
  return {
    DATA_DIR: dataDir,
    PORT: String(await freePort()),
    EMBEDDED_PG_PORT: String(await freePort()),
    TEMPORAL_DEV_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(await freePort()),
    VIDEO_POLL_INTERVAL_MS: '200',
    VIDEO_POLL_MAX_INTERVAL_MS: '500',
  };
}

async function call(base: string, token: string, method: string, p: string, json?: unknown) {
  const res = await fetch(base + p, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('npm start', () => {
  test('kill -9 of the whole process tree mid-job, start again: the job completes, billing exact', async () => {
    const dataDir = fs.mkdtempSync(path.join(infra().tmp, 'start-'));
    fs.chmodSync(dataDir, 0o755);
    // A killed worker's job is taken over once its heartbeat timeout passes: short here, to keep the test short.
    const env = await portsEnv(dataDir);
    const base = `http://127.0.0.1:${env.PORT}`;

    const first = spawnMain(env);
    await untilStarted(first);
    assert.match(first.output(), new RegExp(`API: +${base}`));
    assert.match(first.output(), /Temporal UI: +http:\/\/127\.0\.0\.1:\d+/);
    assert.match(first.output(), new RegExp(`Console: +${base}/console`));
    const consolePage = await fetch(`${base}/console`);
    assert.equal(consolePage.status, 200);
    assert.match(consolePage.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.equal((await fetch(`${base}/console/app.js`)).status, 200, 'the console is bundled by npm start, offline');
    const admin = JSON.parse(fs.readFileSync(path.join(dataDir, 'secrets.json'), 'utf8')).admin_token as string;
    assert.ok(first.output().includes(admin), 'prints how to get a first key (the admin token)');

    const ws = await call(base, admin, 'POST', '/admin/v1/workspaces', { name: 'restart', credits_in_euro: 10 });
    const key = await call(base, admin, 'POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, {});
    const job = await call(base, key.body.key, 'POST', '/v2/videos/generations', {
      prompt: 'survives a crash',
      model: 'sim-video-1',
      durationSeconds: 4,
      n: 2,
      parameters: { simulate: { delay_ms: 6_000, videos: 1 } },
    });
    assert.equal(job.status, 202);

    killGroup(first.child, 'SIGKILL');
    await first.exited;
    await new Promise((r) => setTimeout(r, 500));

    const second = spawnMain(env);
    await untilStarted(second);
    let final: any;
    for (let i = 0; ; i++) {
      final = await call(base, key.body.key, 'GET', `/v2/videos/generations/${job.body.id}`);
      assert.equal(final.status, 200);
      if (final.body.status !== 'pending') break;
      assert.ok(i < 600, 'job still pending a minute after the restart');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(final.body.status, 'succeeded');
    assert.equal(final.body.cost_in_euro, 0.2);
    assert.equal(final.body.refunded_in_euro, 0.2);
    const balance = await call(base, admin, 'GET', `/admin/v1/workspaces/${ws.body.id}`);
    assert.equal(balance.body.balance_in_euro, 9.8);
    const audit = await call(base, admin, 'GET', '/admin/v1/ledger/audit');
    assert.equal(audit.body.ok, true, JSON.stringify(audit.body));

    // The job is found in Temporal by its workspace (search attribute).
    const { Connection, Client } = await import('@temporalio/client');
    const connection = await Connection.connect({ address: `127.0.0.1:${env.TEMPORAL_DEV_PORT}` });
    const client = new Client({ connection });
    let found: string[] = [];
    for (let i = 0; i < 50 && found.length === 0; i++) {
      found = [];
      for await (const wf of client.workflow.list({ query: `WorkspaceId = '${ws.body.id}'` })) found.push(wf.workflowId);
      if (found.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    await connection.close();
    assert.deepEqual(found, [`video-job-${job.body.id}`]);

    // Graceful stop: SIGTERM ends the tree with exit 0, the servers with it.
    const pgPid = Number(fs.readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const temporalPid = Number(fs.readFileSync(path.join(dataDir, 'temporal', 'server.pid'), 'utf8'));
    killGroup(second.child, 'SIGTERM');
    assert.equal(await second.exited, 0);
    assert.match(second.output(), /SIGTERM received, shutting down gracefully/);
    await new Promise((r) => setTimeout(r, 500));
    assert.throws(() => process.kill(temporalPid, 0), 'the dev server was stopped');
    assert.throws(() => process.kill(pgPid, 0), 'PostgreSQL was stopped');
    assert.ok(!fs.existsSync(path.join(dataDir, 'postgres', 'postmaster.pid')), 'PostgreSQL shut down cleanly');
  });

  test('broken pieces end with one clear line, not a stack trace', async () => {
    const dataDir = fs.mkdtempSync(path.join(infra().tmp, 'broken-'));
    fs.chmodSync(dataDir, 0o755);
    const notADir = path.join(dataDir, 'a-file');
    fs.writeFileSync(notADir, '');
    const cases: [Record<string, string>, RegExp][] = [
      [{ TEMPORAL_CLI_PATH: '/nonexistent/temporal' }, /TEMPORAL_CLI_PATH=\/nonexistent\/temporal does not exist/],
      [{ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }, /cannot reach PostgreSQL at postgres:\/\/nobody@127\.0\.0\.1:1\/none/],
      [{ VIDEO_POLL_INTERVAL_MS: 'soon' }, /invalid environment variable VIDEO_POLL_INTERVAL_MS/],
      [
        { DATA_DIR: path.join(notADir, 'data') },
        new RegExp(`^video-voice-api: cannot mkdir ${notADir}/data \\(a part of the path is not a directory\\): check DATA_DIR$`),
      ],
    ];
    for (const [extra, expected] of cases) {
      const s = spawnMain({ ...(await portsEnv(dataDir)), ...extra });
      assert.equal(await s.exited, 1, s.output());
      const lines = s.output().trim().split('\n');
      assert.equal(lines.length, 1, `one line, got: ${s.output()}`);
      assert.match(lines[0]!, expected);
    }
    // A taken port.
    const env = await portsEnv(dataDir);
    const blocker = (await import('node:net')).createServer().listen(Number(env.PORT), '127.0.0.1');
    try {
      const s = spawnMain({ ...env, DATABASE_URL: infra().databaseUrl, TEMPORAL_ADDRESS: infra().temporalAddress });
      assert.equal(await s.exited, 1, s.output());
      assert.match(s.output().trim(), new RegExp(`^video-voice-api: port ${env.PORT} is already in use; set PORT to a free port$`));
    } finally {
      blocker.close();
    }
  });
});
