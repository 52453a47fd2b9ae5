// What the provider callback route checks before it reads a body: backend, signature headers,
// compression and declared length; bodies cut at the limit, sources rate limited per address (an IPv6
// /64 as one), bodies read at once capped per process and per source.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { FAL_USER_ID } from '../fakes/fal-fake.js';
import { FalVideoProvider } from '../../src/providers/video/fal.js';
import { videoModelBackendFor } from '../../src/models/catalog.js';
import { callbackSourceOf } from '../../src/video-jobs/callback-routes.js';
import { FAL_CALLBACK_BODY_BYTES_MAX } from '../../src/providers/video/fal.js';
import { JOB_ID, fal, falCallback, callbackServer, partialRequest, useProviderFakes } from './provider-callbacks.setup.js';

useProviderFakes();

describe("what is checked before a callback's body is read", () => {
  const path = `/v2/provider-callbacks/fal/${JOB_ID}`;
  const falHeaders = () => fal.signCallback(randomUUID(), Buffer.from('{}'));

  test("an unknown backend (404), missing signature headers (401), a compressed body (415), another fal account (401), a declared length above the backend's limit (413): answered without reading the body, the connection closed", async () => {
    const s = await callbackServer({
      providerFor: (b) =>
        b === 'fal'
          ? new FalVideoProvider({
              key: fal.key,
              queueUrl: fal.url,
              jwksUrl: fal.jwksUrl,
              userId: FAL_USER_ID,
              backendFor: (id) => videoModelBackendFor(id, 'fal'),
            })
          : undefined,
    });
    try {
      const cases: [string, Record<string, string>, number, number][] = [
        [`/v2/provider-callbacks/runway/${JOB_ID}`, falHeaders(), 10_000_000, 404],
        [path, {}, 10_000_000, 401],
        [path, { ...falHeaders(), 'content-encoding': 'gzip' }, 23_000, 415],
        [path, { ...falHeaders(), 'content-encoding': 'deflate, identity' }, 23_000, 415],
        [path, fal.signCallback(randomUUID(), Buffer.from('{}'), { user_id: 'someone-else' }), 100, 401],
        [path, falHeaders(), FAL_CALLBACK_BODY_BYTES_MAX + 1, 413],
      ];
      for (const [p, headers, length, status] of cases) {
        const r = partialRequest(s.port, p, headers, length);
        const answer = await r.answered;
        assert.equal(answer.status, status, `${p} ${JSON.stringify(headers)}: ${answer.head}`);
        assert.match(answer.head, /connection: close/);
        r.release();
      }
      assert.deepEqual(s.nudged, []);
      assert.equal(fal.requestsTo('jwks').length, 0, 'nothing was verified: the keys were never needed');
    } finally {
      await s.close();
    }
  });

  test('a body above the limit that declares no length (chunked) is cut at the limit: 413', async () => {
    const s = await callbackServer();
    try {
      const res = await fetch(`${s.base}${path}`, {
        method: 'POST',
        headers: falHeaders(),
        body: new ReadableStream({
          start(c) {
            for (let i = 0; i < 20; i++) c.enqueue(new Uint8Array(16 * 1024));
            c.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
      assert.equal(res.status, 413);
    } finally {
      await s.close();
    }
  });

  test('a source is an IPv4 address (also IPv4-mapped), or an IPv6 /64: a host cannot escape its limits by sending from each of its IPv6 addresses', () => {
    assert.equal(callbackSourceOf('203.0.113.7'), '203.0.113.7');
    assert.equal(callbackSourceOf('::ffff:203.0.113.7'), '203.0.113.7');
    assert.notEqual(callbackSourceOf('203.0.113.7'), callbackSourceOf('203.0.113.8'));
    const net64 = callbackSourceOf('2001:db8:1:2::1');
    for (const a of [
      '2001:db8:1:2::2',
      '2001:0db8:0001:0002:ffff:ffff:ffff:ffff',
      '2001:db8:1:2:a:b:c:d',
      '2001:db8:1:2::10.0.0.1',
      '2001:db8:1:2::1%eth0',
    ])
      assert.equal(callbackSourceOf(a), net64, a);
    for (const a of ['2001:db8:1:3::1', '2001:db8::1:2:0:1', '::1']) assert.notEqual(callbackSourceOf(a), net64, a);
    assert.equal(callbackSourceOf(undefined), 'unknown');
  });

  test('callbacks per source address are rate limited: 429 with Retry-After, before anything else', async () => {
    const s = await callbackServer({ limits: { per_source_per_minute: 5 } });
    try {
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 8; i++) {
        const res = await fetch(`${s.base}/v2/provider-callbacks/runway/${JOB_ID}`, { method: 'POST', body: '{}' });
        statuses.push(res.status);
        if (res.status === 429) retryAfter = res.headers.get('retry-after');
        await res.arrayBuffer();
      }
      assert.deepEqual(statuses, [404, 404, 404, 404, 404, 429, 429, 429]);
      assert.ok(Number(retryAfter) >= 1, `Retry-After: ${retryAfter}`);
    } finally {
      await s.close();
    }
  });

  test('bodies being read at once are capped in the process (503 server_busy) and per source address (429); a slow body is cut after the read timeout (408) and frees its slot', async () => {
    const s = await callbackServer({ limits: { reads_max: 2, reads_per_source_max: 3, read_timeout_ms: 1_500 } });
    try {
      const slow = [
        partialRequest(s.port, path, falHeaders(), 1000, Buffer.alloc(10)),
        partialRequest(s.port, path, falHeaders(), 1000, Buffer.alloc(10)),
      ];
      await new Promise((r) => setTimeout(r, 200));
      const third = partialRequest(s.port, path, falHeaders(), 1000, Buffer.alloc(10));
      const busy = await third.answered;
      assert.equal(busy.status, 503, busy.head);
      assert.match(busy.head, /retry-after: 1/);
      third.release();
      // the slow ones are cut by the read timeout; their slots are free again
      for (const r of slow) assert.equal((await r.answered).status, 408);
      const f = await falCallback(s.base);
      assert.equal(f.answered, 200);
    } finally {
      await s.close();
    }
    const t = await callbackServer({ limits: { reads_max: 10, reads_per_source_max: 1 } });
    try {
      const first = partialRequest(t.port, path, falHeaders(), 1000, Buffer.alloc(10));
      await new Promise((r) => setTimeout(r, 200));
      const second = partialRequest(t.port, path, falHeaders(), 1000, Buffer.alloc(10));
      const limited = await second.answered;
      assert.equal(limited.status, 429, limited.head);
      first.release();
      second.release();
    } finally {
      await t.close();
    }
  });
});
