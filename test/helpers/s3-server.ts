// A real S3-compatible server for tests: MinIO, built by scripts/install-s3-server.sh (S3_SERVER_CMD,
// else its cache), run on a free loopback port with a data dir of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { cachedBuild } from './cached-build.js';
import { freePort } from './infra.js';

export const ACCESS_KEY = 'vva-test-access';
export const SECRET_KEY = 'vva-test-secret-0123456789';
export const REGION = 'us-east-1';

/**
 * The MinIO executable: S3_SERVER_CMD (which must exist: CI sets it), else the one
 * scripts/install-s3-server.sh cached; null = not installed.
 */
export function s3ServerCmd(): string | null {
  const fromEnv = process.env['S3_SERVER_CMD'];
  if (fromEnv) return fromEnv;
  return cachedBuild('install-s3-server.sh', 'S3_SERVER_CACHE_DIR', 'minio', 'minio');
}

export interface S3Server {
  endpoint: string;
  port: number;
  stop(): Promise<void>;
}

export async function startS3Server(cmd: string, parentDir: string): Promise<S3Server> {
  if (!fs.existsSync(cmd)) throw new Error(`S3_SERVER_CMD=${cmd} does not exist; run scripts/install-s3-server.sh or unset it`);
  const root = fs.mkdtempSync(path.join(parentDir, 's3-'));
  const [port, consolePort] = [await freePort(), await freePort()];
  const logFile = path.join(root, 'minio.log');
  const logFd = fs.openSync(logFile, 'a');
  const child: ChildProcess = spawn(
    cmd,
    ['server', '--quiet', '--address', `127.0.0.1:${port}`, '--console-address', `127.0.0.1:${consolePort}`, path.join(root, 'data')],
    {
      stdio: ['ignore', logFd, logFd],
      env: { ...process.env, MINIO_ROOT_USER: ACCESS_KEY, MINIO_ROOT_PASSWORD: SECRET_KEY, MINIO_BROWSER: 'off', MINIO_UPDATE: 'off' },
    },
  );
  fs.closeSync(logFd);
  let exited: string | null = null;
  child.once('exit', (code, signal) => {
    exited = `S3 server exited (${signal ?? code})`;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) throw new Error(`${exited} at start: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    const ready = await fetch(`${endpoint}/minio/health/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`S3 server not ready on ${endpoint} within 60 s: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    endpoint,
    port,
    async stop() {
      if (!exited) {
        const done = new Promise<void>((r) => child.once('exit', () => r()));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await done;
        clearTimeout(timer);
      }
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

export async function createBucket(endpoint: string, bucket: string): Promise<void> {
  const client = new S3Client({
    region: REGION,
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
  });
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } finally {
    client.destroy();
  }
}
