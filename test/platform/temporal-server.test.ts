// The service on the production topology (test/helpers/server-infra.ts, through the soak's cluster):
// temporal-server on PostgreSQL with its frontend requiring mTLS, two `npm run api` and two
// `npm run worker` processes configured only by Temporal's standard client variables, the videos on
// MinIO. Jobs of every outcome; a worker, an API, the Temporal server and PostgreSQL killed with SIGKILL
// mid-job; the previous release's workers beside this one's; a process without a client certificate
// refused at startup. After each: every job terminal, the balance exact, the ledger audit ok.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from '@temporalio/client';
import { startCluster, SOAK_ADMIN_TOKEN as ADMIN_TOKEN, type Cluster, type Target } from '../../soak/cluster.js';
import { connectWithCert, serverTopologyMissing } from '../helpers/server-infra.js';
import { s3ServerCmd } from '../helpers/s3-server.js';
import { startEntryProcess } from '../helpers/processes.js';
import { http, simJob } from '../helpers/stack.js';
import { bundlePreviousRelease, previousReleaseCommit } from '../helpers/previous-release.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createPool, type Db } from '../../src/db/pool.js';
import { startWorker, type RunningWorker } from '../../src/runtime/worker.js';
import { readVideoJob } from '../../src/video-jobs/records.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';
import { resolveTemporalCli } from '../../src/temporal/dev-server.js';

const run = promisify(execFile);
const missing = serverTopologyMissing() ?? (s3ServerCmd() ? null : 'MinIO is not built (bash scripts/install-s3-server.sh builds it once)');

/** sim-video-1, 4 s at 720p with audio: 0.2 EUR per video. */
const VIDEO_MICRO_EUR = 200_000;

let root: string;
let cluster: Cluster;
let temporal: Client;
let db: Db;

async function customer(credits_in_euro: number) {
  const api = cluster.apiBases[0]!;
  const ws = await http(api, 'POST', '/admin/v1/workspaces', {
    token: ADMIN_TOKEN,
    json: { name: `topology-${Date.now()}`, credits_in_euro },
  });
  assert.equal(ws.status, 201, JSON.stringify(ws.body));
  const key = await http(api, 'POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, { token: ADMIN_TOKEN, json: {} });
  assert.equal(key.status, 201, JSON.stringify(key.body));
  return { id: ws.body.id as string, key: key.body.key as string, credits_micro: credits_in_euro * 1_000_000 };
}

async function create(api: string, key: string, simulate: Record<string, unknown>, n = 2): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const r = await http(api, 'POST', '/v2/videos/generations', {
      token: key,
      json: simJob(simulate, { n, prompt: `topology ${Math.random()}` }),
    });
    if (r.status === 202) return r.body.id;
    assert.ok(r.status === 503 && attempt < 20, `create: ${r.status} ${JSON.stringify(r.body)}`);
    await new Promise((res) => setTimeout(res, 1_000));
  }
}

/** Waits until the job is terminal, reading it through any API that answers. */
async function settled(key: string, id: string, timeout_ms = 150_000): Promise<any> {
  const deadline = Date.now() + timeout_ms;
  for (let i = 0; ; i++) {
    const r = await http(cluster.apiBases[i % cluster.apiBases.length]!, 'GET', `/v2/videos/generations/${id}`, { token: key }).catch(
      () => null,
    );
    if (r?.status === 200 && r.body.status !== 'pending') return r.body;
    assert.ok(Date.now() < deadline, `job ${id} still pending after ${timeout_ms} ms`);
    await new Promise((res) => setTimeout(res, 250));
  }
}

async function balanceMicro(workspaceId: string): Promise<number> {
  const r = await http(cluster.apiBases[0]!, 'GET', `/admin/v1/workspaces/${workspaceId}`, { token: ADMIN_TOKEN });
  assert.equal(r.status, 200);
  return Math.round(r.body.balance_in_euro * 1_000_000);
}

/** The ledger audit through the admin CLI (`npm run admin -- ledger audit`), as an operator runs it. */
async function assertAuditHolds(): Promise<void> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/admin-cli.ts', 'ledger', 'audit'], {
    env: { ...process.env, API_URL: cluster.apiBases[1]!, ADMIN_TOKEN },
    encoding: 'utf8',
  });
  assert.equal(JSON.parse(stdout).ok, true, stdout);
}

const target = (name: string): Target => cluster.targets.find((t) => t.name === name)!;

describe('the production topology: temporal-server on PostgreSQL with mTLS', { skip: missing ?? false }, () => {
  before(async () => {
    root = fs.mkdtempSync(path.join(process.env['TEST_TMP_DIR'] ?? os.tmpdir(), 'topology-'));
    const started = Date.now();
    cluster = await startCluster({
      root,
      apis: 2,
      workers: 2,
      temporal: 'server',
      env: {
        VIDEO_POLL_INTERVAL_MS: '200',
        VIDEO_POLL_MAX_INTERVAL_MS: '500',
        RECONCILE_INTERVAL_MS: '5000',
        RATE_LIMIT_PER_MINUTE: '100000',
        RATE_LIMIT_READS_PER_MINUTE: '1000000',
        LOG_LEVEL: 'info',
      },
    });
    process.stderr.write(
      `production topology up in ${Date.now() - started} ms: ${JSON.stringify({ ...cluster.timings_ms, ...cluster.temporalServer!.timings_ms })}\n`,
    );
    temporal = new Client({
      connection: await connectWithCert(cluster.temporalServer!.address, cluster.temporalServer!.certs),
      namespace: 'default',
    });
    db = createPool(cluster.env['DATABASE_URL']!, 3);
  });
  after(async () => {
    await temporal?.connection.close();
    await db?.end();
    await cluster?.stop();
    if (!process.env['KEEP_TEST_DATA']) fs.rmSync(root, { recursive: true, force: true });
  });

  test('jobs of every outcome through both APIs: succeeded (videos on MinIO), failed, shortfall, cancelled; billing exact', async () => {
    const c = await customer(10);
    const [api1, api2] = cluster.apiBases as [string, string];
    const ok = await create(api1, c.key, { delay_ms: 500 });
    const failed = await create(api2, c.key, { outcome: 'fail', delay_ms: 500, message: 'the provider refused' });
    const shortfall = await create(api1, c.key, { videos: 1, delay_ms: 500 });
    const cancelled = await create(api2, c.key, { delay_ms: 60_000 });
    const cancel = await http(api1, 'POST', `/v2/videos/generations/${cancelled}/cancel`, { token: c.key });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));

    const job = await settled(c.key, ok);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos.length, 2);
    const video = await fetch(job.videos[0].url);
    assert.equal(video.status, 200, 'the presigned MinIO URL serves the video');
    assert.ok(new URL(job.videos[0].url).searchParams.has('X-Amz-Signature'), 'a presigned S3 URL');
    assert.ok((await video.arrayBuffer()).byteLength > 1_000);
    const f = await settled(c.key, failed);
    assert.equal(f.status, 'failed');
    assert.equal(f.error.code, 'generation_failed');
    assert.equal(f.refunded_in_euro, 0.4);
    const s = await settled(c.key, shortfall);
    assert.equal(s.status, 'succeeded');
    assert.equal(s.videos.length, 1);
    assert.equal(s.refunded_in_euro, 0.2);
    const x = await settled(c.key, cancelled);
    assert.equal(x.status, 'failed');
    assert.equal(x.error.code, 'cancelled');
    assert.equal(x.refunded_in_euro, 0.4);

    assert.equal(await balanceMicro(c.id), c.credits_micro - 3 * VIDEO_MICRO_EUR);
    await assertAuditHolds();
  });

  test('a worker, an API, the Temporal server and PostgreSQL killed with SIGKILL mid-job: every job completes, billed exactly', async () => {
    const c = await customer(20);
    const api2 = cluster.apiBases[1]!;
    const jobs: { id: string; videos: number }[] = [];
    for (const [i, name] of ['worker-1', 'api-1', 'temporal', 'postgres'].entries()) {
      for (let j = 0; j < 2; j++) {
        const videos = j === 0 ? 2 : 1;
        jobs.push({ id: await create(api2, c.key, { delay_ms: 2_500, videos }), videos });
      }
      const t = target(name);
      await t.kill();
      // Down for a few seconds; the jobs in flight wait (activities retry, the APIs answer 503 meanwhile).
      await new Promise((r) => setTimeout(r, 3_000));
      // The killed worker stays down: the other one takes its jobs over.
      if (name !== 'worker-1') await t.restart();
      process.stderr.write(`topology fault ${i + 1}: ${name} killed and ${name === 'worker-1' ? 'left down' : 'restarted'}\n`);
    }
    let cost = 0;
    for (const job of jobs) {
      const body = await settled(c.key, job.id);
      assert.equal(body.status, 'succeeded', JSON.stringify(body));
      assert.equal(body.videos.length, job.videos);
      cost += job.videos * VIDEO_MICRO_EUR;
    }
    assert.equal(await balanceMicro(c.id), c.credits_micro - cost);
    await assertAuditHolds();
  });

  /** How long the jobs started on the previous release run: longer than a worker process takes to start. */
  const JOB_MS = 45_000;

  test(
    "the previous release's workers beside this release's: jobs started on the old code finish on the new, billed once",
    { skip: previousReleaseCommit === null && 'not a git checkout with history' },
    async () => {
      const release = await bundlePreviousRelease();
      let oldWorker: RunningWorker | null = null;
      try {
        // Only the previous release polls at first: the jobs start on its code. This release's worker
        // process starts meanwhile (it bundles its workflow code first); the jobs outlast that.
        await target('worker-1').kill();
        await target('worker-2').kill();
        const config = loadConfig({ ...cluster.env, LOG_LEVEL: 'silent' });
        oldWorker = await startWorker({
          config,
          db,
          temporalAddress: cluster.env['TEMPORAL_ADDRESS']!,
          logger: createLogger('silent', 'old-release'),
          workflowBundle: { code: release.code },
        });
        const c = await customer(5);
        const ids = [
          await create(cluster.apiBases[0]!, c.key, { delay_ms: JOB_MS }),
          await create(cluster.apiBases[1]!, c.key, { delay_ms: JOB_MS, videos: 1 }),
        ];
        const joined = target('worker-2').restart();
        for (const id of ids) {
          for (let i = 0; !(await readVideoJob(db, id))?.operation_id; i++) {
            assert.ok(i < 300, 'the previous release never submitted the job');
            await new Promise((r) => setTimeout(r, 50));
          }
        }
        // This release's worker joins (side by side), then the previous release's leaves mid-job.
        await joined;
        const during = await create(cluster.apiBases[0]!, c.key, { delay_ms: 1_000 });
        for (const id of ids)
          assert.equal(
            (await readVideoJob(db, id))!.status,
            'pending',
            `job ${id} ended before this release's worker joined; JOB_MS is too short for this machine`,
          );
        await oldWorker.shutdown();
        oldWorker = null;
        await target('worker-1').restart();
        const bodies = [await settled(c.key, ids[0]!), await settled(c.key, ids[1]!), await settled(c.key, during)];
        for (const b of bodies) assert.equal(b.status, 'succeeded', JSON.stringify(b));
        assert.deepEqual(
          bodies.map((b) => b.videos.length),
          [2, 1, 2],
        );
        // Each of the first jobs had workflow tasks completed by the old release's worker (this process)
        // and, after it left, by a worker process of this release.
        for (const id of ids) {
          const history = await temporal.workflow.getHandle(videoJobWorkflowId(id)).fetchHistory();
          const identities = (history.events ?? [])
            .map((e) => e.workflowTaskCompletedEventAttributes?.identity)
            .filter((x): x is string => !!x);
          const mine = `${process.pid}@${os.hostname()}`;
          assert.equal(identities[0], mine, `the job started on the previous release: ${identities.join(', ')}`);
          assert.ok(
            identities.some((i) => i !== mine),
            `the job finished on this release: ${identities.join(', ')}`,
          );
        }
        assert.equal(await balanceMicro(c.id), c.credits_micro - 5 * VIDEO_MICRO_EUR);
        await assertAuditHolds();
      } finally {
        await oldWorker?.shutdown();
        release.cleanup();
      }
    },
  );

  test('a process without the client certificate stops at startup with one line; the frontend refuses the CLI too', async () => {
    // NODE_NO_WARNINGS: the AWS SDK's warning about this Node version is not the process's refusal.
    const env: Record<string, string> = { ...cluster.env, PORT: '0', NODE_NO_WARNINGS: '1' };
    delete env['TEMPORAL_TLS_CLIENT_CERT_PATH'];
    delete env['TEMPORAL_TLS_CLIENT_KEY_PATH'];
    const failed = await startEntryProcess({ env }, 'worker', { track: [] }).then(
      (child) => {
        child.kill('SIGKILL');
        return null;
      },
      (err: Error) => err.message,
    );
    assert.ok(failed, 'a worker without a client certificate must not start');
    const lines = failed.split('\n').filter((l) => l.trim() !== '' && !l.includes(' WARN '));
    assert.equal(lines.length, 1, failed);
    assert.match(lines[0]!, /requires a client certificate \(mTLS\): set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/);
    // The server's side: the CLI without a certificate is refused, with one it is served.
    const cli = resolveTemporalCli(process.env['TEMPORAL_CLI_PATH']);
    const args = cluster.temporalServer!.cliArgs;
    const withoutCert = args.filter(
      (a, i) => !['--tls-cert-path', '--tls-key-path'].includes(a) && !['--tls-cert-path', '--tls-key-path'].includes(args[i - 1]!),
    );
    await assert.rejects(run(cli, ['operator', 'namespace', 'describe', '--namespace', 'default', ...withoutCert]));
    const { stdout } = await run(cli, ['operator', 'namespace', 'describe', '--namespace', 'default', ...args], { encoding: 'utf8' });
    assert.match(stdout, /default/);
  });
});
