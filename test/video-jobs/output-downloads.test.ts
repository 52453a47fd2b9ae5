// Output downloads (fal's and Replicate's video URLs) obey the address policy of webhook targets: in
// production a loopback or private address is refused before any connection, also when a redirect
// leads there; redirects are followed by hand, each hop checked, at most OUTPUT_REDIRECTS_MAX of them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { downloadOutput, OUTPUT_REDIRECTS_MAX } from '../../src/providers/video/http.js';
import { ProviderError } from '../../src/providers/video/types.js';

let server: http.Server;
let base: string;
const hits: string[] = [];
before(async () => {
  server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/video.mp4') return void res.end(Buffer.from('not really an mp4, but bytes'));
    if (req.url === '/relative') return void res.writeHead(302, { location: '/video.mp4' }).end();
    if (req.url === '/to-private') return void res.writeHead(302, { location: 'http://10.255.255.1:9/video.mp4' }).end();
    if (req.url === '/to-metadata') return void res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    if (req.url?.startsWith('/loop')) return void res.writeHead(302, { location: `/loop${hits.length}` }).end();
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

const dev = { production: false };
const production = { production: true };
const refused = (err: unknown) => err instanceof ProviderError && err.opts.code === 'invalid_response' && !err.opts.retryable;

describe('output downloads', () => {
  test('development: loopback is allowed, and a relative redirect is followed', async () => {
    hits.length = 0;
    const bytes = await downloadOutput(`${base}/relative`, 'download', 5_000, 1024, dev);
    assert.equal(bytes.toString(), 'not really an mp4, but bytes');
    assert.deepEqual(hits, ['/relative', '/video.mp4']);
  });

  test('production: a loopback URL, or a name resolving to loopback, is refused before any request', async () => {
    hits.length = 0;
    await assert.rejects(downloadOutput(`${base}/video.mp4`, 'download', 5_000, 1024, production), refused);
    await assert.rejects(downloadOutput('http://localhost:9/video.mp4', 'download', 5_000, 1024, production), refused);
    const resolver = async () => [{ address: '127.0.0.1', family: 4 as const }];
    await assert.rejects(
      downloadOutput('https://cdn.example.test/video.mp4', 'download', 5_000, 1024, { ...production, resolver }),
      refused,
    );
    assert.deepEqual(hits, []);
  });

  test('a redirect to a private or link-local address is refused without connecting to it', async () => {
    for (const path of ['/to-private', '/to-metadata']) {
      const started = Date.now();
      await assert.rejects(downloadOutput(`${base}${path}`, 'download', 3_000, 1024, dev), refused);
      assert.ok(Date.now() - started < 1_000, `${path}: refused at once, not after a connection attempt`);
    }
  });

  test(`at most ${OUTPUT_REDIRECTS_MAX} redirects are followed`, async () => {
    hits.length = 0;
    await assert.rejects(
      downloadOutput(`${base}/loop`, 'download', 5_000, 1024, dev),
      (err: unknown) => refused(err) && /redirects/.test((err as Error).message),
    );
    assert.equal(hits.length, OUTPUT_REDIRECTS_MAX + 1);
  });
});
