// The S3 storage backend against a real S3-compatible server: MinIO, built by
// scripts/install-s3-server.sh (S3_SERVER_CMD, else its cache), run here on a free loopback port with
// a temporary data dir. Presigned URLs are checked by the server itself: exact bytes, content type,
// expiry, tampering; then one video job end to end through the workflow with STORAGE_BACKEND=s3.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { ConfigError, loadConfig } from '../../src/config.js';
import { S3Storage } from '../../src/storage/s3.js';
import { checkStorage } from '../../src/runtime/storage.js';
import { inspectMp4 } from '../helpers/mp4.js';
import { ACCESS_KEY, REGION, SECRET_KEY, createBucket, s3ServerCmd, startS3Server, type S3Server } from '../helpers/s3-server.js';
import { assertAuditHolds, http as api, infra, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** GET through node:http, so the Host header can name another endpoint than the one connected to. */
function getWithHost(url: URL, connectPort: number, host: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: connectPort, path: url.pathname + url.search, headers: { host } }, (res) => {
      readAll(res).then((body) => resolve({ status: res.statusCode ?? 0, body }), reject);
    });
    req.on('error', reject);
    req.end();
  });
}

test('STORAGE_BACKEND=s3 needs S3_BUCKET; credentials stay out of anything serialised', () => {
  assert.throws(
    () => loadConfig({ STORAGE_BACKEND: 's3' }),
    (err: Error) => err instanceof ConfigError && /S3_BUCKET must be set/.test(err.message),
  );
  assert.throws(() => loadConfig({ STORAGE_BACKEND: 's3', S3_BUCKET: 'b-1', AWS_ACCESS_KEY_ID: 'x' }), ConfigError);
  assert.throws(() => loadConfig({ STORAGE_BACKEND: 'gcs' }), ConfigError);
  assert.equal(loadConfig({}).storageBackend, 'local');
  assert.equal(loadConfig({}).s3, null);
  const config = loadConfig({
    STORAGE_BACKEND: 's3',
    S3_BUCKET: 'videos',
    AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'very-secret-key-material',
  });
  assert.equal(config.s3?.bucket, 'videos');
  assert.equal(config.s3?.region, 'us-east-1');
  assert.equal(config.s3?.forcePathStyle, false);
  assert.equal(config.s3?.credentials?.secretAccessKey, 'very-secret-key-material');
  assert.doesNotMatch(JSON.stringify(config), /very-secret-key-material|AKIDEXAMPLE/);
  // without AWS_* in the config the SDK's default chain applies
  assert.equal(loadConfig({ STORAGE_BACKEND: 's3', S3_BUCKET: 'videos' }).s3?.credentials, undefined);
});

const serverCmd = s3ServerCmd();
const notInstalled =
  'no S3-compatible server installed: run `bash scripts/install-s3-server.sh` (builds MinIO from the Go module proxy) or set S3_SERVER_CMD';

describe('S3 storage against a real S3 server', { skip: serverCmd ? false : notInstalled }, () => {
  let server: S3Server;
  let bucket: string;
  let storage: S3Storage;
  before(async () => {
    server = await startS3Server(serverCmd!, infra().tmp);
    bucket = `vva-${randomUUID().slice(0, 8)}`;
    await createBucket(server.endpoint, bucket);
    storage = new S3Storage({
      bucket,
      region: REGION,
      endpoint: server.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
      urlTtlS: 600,
    });
  });
  after(async () => {
    storage?.destroy();
    await server?.stop();
  });

  test('put/open round trip; missing and invalid keys', async () => {
    await checkStorage(storage);
    const body = randomBytes(300_000);
    const key = `videos/${randomUUID()}/0.mp4`;
    await storage.put(key, body);
    const opened = await storage.open(key);
    assert.ok(opened);
    assert.equal(opened.bytes, body.length);
    assert.ok((await readAll(opened.stream)).equals(body));
    // a retried write overwrites
    const again = randomBytes(1000);
    await storage.put(key, again);
    assert.ok((await readAll((await storage.open(key))!.stream)).equals(again));
    assert.equal(await storage.open(`videos/${randomUUID()}/0.mp4`), null);
    assert.equal(await storage.open('../etc/passwd'), null);
    await assert.rejects(storage.put('videos/../x', body), /invalid storage key/);
  });

  test('a presigned URL downloads the exact bytes with the content type', async () => {
    const body = randomBytes(123_457);
    const key = `videos/${randomUUID()}/1.mp4`;
    await storage.put(key, body, 'video/mp4');
    const now = Math.floor(Date.now() / 1000);
    const signed = await storage.downloadUrl(key, 'http://api.example.test');
    assert.ok(signed.url.startsWith(`${server.endpoint}/${bucket}/${key}?`), signed.url);
    // Signed at the start of the current step of 600 s (the TTL), for that step and the TTL after it.
    assert.ok(signed.expires_at >= now + 600 && signed.expires_at <= now + 1200, String(signed.expires_at - now));
    const url = new URL(signed.url);
    assert.equal(url.searchParams.get('X-Amz-Expires'), '1200');
    assert.ok(!url.searchParams.has('X-Amz-Security-Token'));
    assert.doesNotMatch(signed.url, new RegExp(SECRET_KEY));
    const res = await fetch(signed.url);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'video/mp4');
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(body));
    // without the signature the private bucket refuses
    assert.equal((await fetch(`${url.origin}${url.pathname}`)).status, 403);
  });

  test('an expired presigned URL is refused', async () => {
    const key = `videos/${randomUUID()}/0.mp4`;
    await storage.put(key, randomBytes(100));
    const signed = await storage.presign(key, 1);
    await new Promise((r) => setTimeout(r, 2_500));
    const res = await fetch(signed.url);
    assert.equal(res.status, 403);
    assert.match(await res.text(), /expired/i);
  });

  test('a tampered presigned URL is refused', async () => {
    const key = `videos/${randomUUID()}/0.mp4`;
    const other = key.replace('/0.mp4', '/1.mp4');
    await storage.put(key, randomBytes(100));
    await storage.put(other, randomBytes(100));
    const url = new URL((await storage.presign(key, 600)).url);
    assert.equal((await fetch(url)).status, 200);
    const longer = new URL(url);
    longer.searchParams.set('X-Amz-Expires', '604800');
    assert.equal((await fetch(longer)).status, 403);
    const otherObject = new URL(url.toString().replace('/0.mp4', '/1.mp4'));
    assert.equal((await fetch(otherObject)).status, 403);
    const sig = url.searchParams.get('X-Amz-Signature')!;
    const badSig = new URL(url);
    badSig.searchParams.set('X-Amz-Signature', (sig[0] === 'a' ? 'b' : 'a') + sig.slice(1));
    const res = await fetch(badSig);
    assert.equal(res.status, 403);
    assert.match(await res.text(), /SignatureDoesNotMatch/);
  });

  test('S3_PUBLIC_ENDPOINT: URLs are signed for the host customers reach', async () => {
    const publicEndpoint = `http://files.example.test:${server.port}`;
    const viaPublic = new S3Storage({
      bucket,
      region: REGION,
      endpoint: server.endpoint,
      publicEndpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
      urlTtlS: 600,
    });
    try {
      const key = `videos/${randomUUID()}/0.mp4`;
      const body = randomBytes(5000);
      await viaPublic.put(key, body); // through the internal endpoint
      const url = new URL((await viaPublic.downloadUrl(key, 'http://ignored')).url);
      assert.equal(url.origin, publicEndpoint);
      const ok = await getWithHost(url, server.port, url.host);
      assert.equal(ok.status, 200);
      assert.ok(ok.body.equals(body));
      // the same URL sent to another host does not verify: the signature covers the public host
      assert.equal((await getWithHost(url, server.port, `127.0.0.1:${server.port}`)).status, 403);
    } finally {
      viaPublic.destroy();
    }
  });

  test('a bucket that does not exist fails the startup check with a ConfigError', async () => {
    const missing = new S3Storage({
      bucket: 'no-such-bucket-here',
      region: REGION,
      endpoint: server.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
      urlTtlS: 600,
    });
    try {
      await assert.rejects(
        checkStorage(missing),
        (err: Error) => err instanceof ConfigError && /no-such-bucket-here.*no such bucket/.test(err.message),
      );
    } finally {
      missing.destroy();
    }
  });

  describe('a video job with STORAGE_BACKEND=s3', () => {
    let stack: Stack;
    before(async () => {
      stack = await startStack({
        env: {
          STORAGE_BACKEND: 's3',
          S3_ENDPOINT: server.endpoint,
          S3_BUCKET: bucket,
          S3_REGION: REGION,
          S3_FORCE_PATH_STYLE: 'true',
          AWS_ACCESS_KEY_ID: ACCESS_KEY,
          AWS_SECRET_ACCESS_KEY: SECRET_KEY,
          SIGNED_URL_TTL_S: '900',
        },
      });
    });
    after(async () => {
      await stack?.stop();
    });

    test('the videos are stored in the bucket and handed out as presigned URLs that play', async () => {
      const c = await newCustomer(stack, 10);
      const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({}, { n: 2 }) });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const job = await waitForJob(stack, c.key, created.body.id);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.videos.length, 2);
      assert.equal(job.cost_in_euro, 0.4);
      for (const [i, v] of (job.videos as Array<{ url: string; expires_at: number; content_type: string }>).entries()) {
        const url = new URL(v.url);
        assert.equal(url.origin, server.endpoint, 'served by the bucket, not the API');
        assert.equal(url.pathname, `/${bucket}/videos/${job.id}/${i}.mp4`);
        // Signed at the start of the current step of 900 s, for that step and SIGNED_URL_TTL_S after it.
        assert.equal(url.searchParams.get('X-Amz-Expires'), '1800');
        assert.ok(url.searchParams.get('X-Amz-Signature'));
        const now_s = Date.now() / 1000;
        assert.ok(v.expires_at >= now_s + 900 - 60 && v.expires_at <= now_s + 1800, String(v.expires_at - now_s));
        assert.equal(v.content_type, 'video/mp4');
        const res = await fetch(v.url);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), 'video/mp4');
        const info = inspectMp4(Buffer.from(await res.arrayBuffer()));
        assert.ok(Math.abs(info.duration_seconds - 4) < 0.05);
        assert.ok(info.width > info.height, '16:9 is landscape');
      }
      // nothing went to the local disk, and /v2/files is not served with S3
      assert.equal(fs.existsSync(path.join(stack.config.dataDir, 'storage')), false);
      const files = await fetch(`${stack.baseUrl}/v2/files/videos/${job.id}/0.mp4?expires=9999999999&signature=x`);
      assert.equal(files.status, 404);
      await assertAuditHolds(stack);
    });
  });
});
