// GET /v2/files/{key}: its contract's schemas parse the key (the capture group of its path pattern),
// the expiry and the signature, and the document states exactly those schemas; a missing or malformed
// expiry or signature is refused as the signature check refuses it (403 invalid_signature), never with
// a 400. Checked on the route's own router over local storage, with the service's error handler.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import pino from 'pino';
import { FilePath, FileQuery, fileRoutes, getFile } from '../../src/video-jobs/file-routes.js';
import { bareJsonSchema } from '../../src/http/openapi.js';
import { errorHandler } from '../../src/http/errors.js';
import { LocalStorage } from '../../src/storage/local.js';
import { UrlSigner } from '../../src/storage/signed-urls.js';

const KEY = 'videos/0b6f3f4e-2f0b-4a57-9d0e-3b1f2c4d5e6f/0.mp4';
const BYTES = Buffer.from('not really an mp4');
const signer = new UrlSigner('s'.repeat(32), 3600);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'file-routes-'));
let server: Server;
let baseUrl: string;

before(async () => {
  const storage = new LocalStorage(root);
  await storage.put(KEY, BYTES);
  const app = express();
  app.set('query parser', 'simple');
  app.use(fileRoutes({ storage, signer }).router);
  app.use(errorHandler(pino({ level: 'silent' })));
  server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(root, { recursive: true, force: true });
});

async function get(pathAndQuery: string) {
  const r = await fetch(`${baseUrl}${pathAndQuery}`);
  const type = r.headers.get('content-type') ?? '';
  return {
    status: r.status,
    headers: r.headers,
    body: type.startsWith('application/json') ? ((await r.json()) as any) : Buffer.from(await r.arrayBuffer()),
  };
}

describe('the contract of GET /v2/files/{key}', () => {
  test('its schemas parse the key, expiry and signature, and are the schemas the document states', () => {
    assert.equal(getFile.requestParams.path, FilePath);
    assert.equal(getFile.requestParams.query, FileQuery);
    const schemas: Record<string, Record<string, unknown>> = { path: FilePath.shape, query: FileQuery.shape };
    assert.deepEqual(getFile.parameters.map((p) => `${p.in} ${p.name}`).sort(), ['path key', 'query expires', 'query signature']);
    for (const p of getFile.parameters) {
      const schema = schemas[p.in]![p.name] as Parameters<typeof bareJsonSchema>[0];
      assert.deepEqual(p.schema, bareJsonSchema(schema, 'input'), `${p.in} ${p.name}`);
      assert.equal(p.required, !schema.safeParse(undefined).success, `${p.in} ${p.name}`);
    }
  });
});

describe('GET /v2/files/{key}', () => {
  test('a valid signed URL: the file, with its type, length and caching', async () => {
    const r = await get(signer.sign(KEY).path);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, BYTES);
    assert.equal(r.headers.get('content-type'), 'video/mp4');
    assert.equal(r.headers.get('content-length'), String(BYTES.length));
    assert.equal(r.headers.get('cache-control'), 'private, max-age=300');
  });

  test('an expired URL: 403 url_expired', async () => {
    const r = await get(signer.sign(KEY, Math.floor(Date.now() / 1000) - 7200).path);
    assert.equal(r.status, 403);
    assert.equal(r.body.error.code, 'url_expired');
    assert.equal(r.body.error.message, 'this signed URL has expired; fetch the job again for a fresh one');
  });

  test('a validly signed URL of a file that is not stored: 404 file_not_found', async () => {
    const r = await get(signer.sign('videos/0b6f3f4e-2f0b-4a57-9d0e-3b1f2c4d5e6f/1.mp4').path);
    assert.equal(r.status, 404);
    assert.equal(r.body.error.code, 'file_not_found');
  });

  const signed = new URL(signer.sign(KEY).path, 'http://x');
  const expires = signed.searchParams.get('expires')!;
  const signature = signed.searchParams.get('signature')!;
  const refused: [string, string][] = [
    ['no query', ''],
    ['no expiry', `?signature=${signature}`],
    ['no signature', `?expires=${expires}`],
    ['an expiry that is no number', `?expires=soon&signature=${signature}`],
    ['an expiry of 13 digits', `?expires=1${expires.padStart(12, '0')}&signature=${signature}`],
    ['an expiry given twice', `?expires=${expires}&expires=${expires}&signature=${signature}`],
    ['a signature of 101 characters', `?expires=${expires}&signature=${'a'.repeat(101)}`],
    ['a signature given twice', `?expires=${expires}&signature=${signature}&signature=${signature}`],
    ['an empty signature', `?expires=${expires}&signature=`],
    ['another expiry', `?expires=${Number(expires) + 1}&signature=${signature}`],
  ];
  for (const [what, query] of refused)
    test(`${what}: 403 invalid_signature`, async () => {
      const r = await get(`/v2/files/${KEY}${query}`);
      assert.equal(r.status, 403);
      assert.deepEqual(r.body, {
        error: { type: 'permission_error', code: 'invalid_signature', message: 'this URL is not validly signed', param: null },
      });
    });

  test("another key with this key's signature: 403 invalid_signature", async () => {
    const r = await get(`/v2/files/${KEY.replace('0.mp4', '1.mp4')}${signed.search}`);
    assert.equal(r.status, 403);
    assert.equal(r.body.error.code, 'invalid_signature');
  });
});
