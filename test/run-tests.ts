// `npm test`: starts one real PostgreSQL (embedded) and one real Temporal dev server for the whole
// run, then Node's test runner over test/*.test.ts. Each test file makes its own database, task
// queue and storage directory on them, so files never see each other's data.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { resolveTemporalCli, startDevServer } from '../src/temporal/dev-server.js';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

async function main(): Promise<number> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-test-'));
  fs.chmodSync(root, 0o755);
  const files = process.argv.slice(2).length
    ? process.argv.slice(2)
    : fs.readdirSync('test').filter((f) => f.endsWith('.test.ts')).sort().map((f) => path.join('test', f));
  const started = Date.now();
  const pg = await startEmbeddedPostgres({ pgdata: path.join(root, 'pg'), port: await freePort(), logFile: path.join(root, 'postgres.log') });
  const temporal = await startDevServer({
    cliPath: resolveTemporalCli(process.env['TEMPORAL_CLI_PATH']),
    namespace: 'default',
    port: await freePort(),
    uiPort: await freePort(),
    logFile: path.join(root, 'temporal.log'),
  });
  process.stderr.write(`test infrastructure up in ${Date.now() - started} ms: postgres ${pg.url}, temporal ${temporal.address}\n`);
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
      stdio: 'inherit',
      env: { ...process.env, TEST_DATABASE_URL: pg.url, TEST_TEMPORAL_ADDRESS: temporal.address, TEST_TMP_DIR: root },
    });
    return await new Promise<number>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
  } finally {
    await temporal.stop();
    await pg.stop();
    if (!process.env['KEEP_TEST_DATA']) fs.rmSync(root, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`test run failed to start: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
