// The providers' signing keys when their endpoints fail: fal's JWKS and Replicate's signing secret are
// served stale while a refresh fails and fetched again only after a backoff, however many callbacks
// arrive.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { FalVideoProvider } from '../../src/providers/video/fal.js';
import { REPLICATE_SECRET_MIN_REFRESH_MS, ReplicateVideoProvider } from '../../src/providers/video/replicate.js';
import { KEY_FETCH_BACKOFF_MS } from '../../src/providers/video/key-cache.js';
import { videoModelBackendFor } from '../../src/models/catalog.js';
import { http as api } from '../helpers/stack.js';
import { JOB_ID, fal, replicate, falProvider, callbackServer, useProviderFakes } from './provider-callbacks.setup.js';

useProviderFakes();

describe("the providers' keys when their endpoint fails", () => {
  test('fal: the JWKS held is served stale while a refresh fails, and a failed fetch is not tried again before its backoff, however many callbacks arrive', async () => {
    let offset_ms = 0;
    const now_ms = () => Date.now() + offset_ms;
    // The keys expire at once: every callback wants them fetched again.
    const adapter = new FalVideoProvider({
      key: fal.key,
      queueUrl: fal.url,
      jwksUrl: fal.jwksUrl,
      backendFor: (id) => videoModelBackendFor(id, 'fal'),
      jwksCacheMs: 0,
      now_ms,
    });
    const s = await callbackServer({ providerFor: (b) => (b === 'fal' ? adapter : undefined) });
    try {
      const post = (headers: Record<string, string>, body: Buffer) =>
        api(s.base, 'POST', `/v2/provider-callbacks/fal/${JOB_ID}`, { headers, rawBody: body });
      const body = Buffer.from('{"request_id":"r","status":"OK","payload":{}}');
      const genuine = () => fal.signCallback('4a1b2c3d-0000-4000-8000-000000000001', body, { timestamp_s: Math.floor(now_ms() / 1000) });
      assert.equal((await post(genuine(), body)).status, 200);
      assert.equal(fal.requestsTo('jwks').length, 1);
      fal.fault({ route: 'jwks', status: 503, body: { detail: 'down' }, times: 1000 });
      const forger = generateKeyPairSync('ed25519').privateKey;
      for (let i = 0; i < 10; i++) {
        assert.equal((await post(genuine(), body)).status, 200, 'verified with the keys held');
        assert.equal(
          (
            await post(
              fal.signCallback('4a1b2c3d-0000-4000-8000-000000000001', body, { key: forger, timestamp_s: Math.floor(now_ms() / 1000) }),
              body,
            )
          ).status,
          401,
        );
      }
      assert.equal(fal.requestsTo('jwks').length, 2, 'one failed fetch; none other within its backoff');
      offset_ms += KEY_FETCH_BACKOFF_MS + 1_000;
      for (let i = 0; i < 5; i++) assert.equal((await post(genuine(), body)).status, 200);
      assert.equal(fal.requestsTo('jwks').length, 3, 'one more once the backoff has passed');
      offset_ms += KEY_FETCH_BACKOFF_MS + 1_000;
      for (let i = 0; i < 5; i++) assert.equal((await post(genuine(), body)).status, 200);
      assert.equal(fal.requestsTo('jwks').length, 3, 'the backoff doubled after a second failure');
    } finally {
      await s.close();
    }
  });

  test('fal: with no keys held, a failing JWKS answers 503 and is fetched once per backoff', async () => {
    const adapter = falProvider();
    const s = await callbackServer({ providerFor: (b) => (b === 'fal' ? adapter : undefined) });
    try {
      fal.fault({ route: 'jwks', status: 500, body: {}, times: 1000 });
      const body = Buffer.from('{}');
      for (let i = 0; i < 10; i++) {
        const res = await api(s.base, 'POST', `/v2/provider-callbacks/fal/${JOB_ID}`, {
          headers: fal.signCallback('4a1b2c3d-0000-4000-8000-000000000001', body),
          rawBody: body,
        });
        assert.equal(res.status, 503);
        assert.ok(res.headers.get('retry-after'));
      }
      assert.equal(fal.requestsTo('jwks').length, 1);
    } finally {
      await s.close();
    }
  });

  test('Replicate: a failed fetch of the signing secret is not retried (with our token) on every forged callback; the secret held is served stale while a refresh fails', async () => {
    let offset_ms = 0;
    const now_ms = () => Date.now() + offset_ms;
    const adapter = new ReplicateVideoProvider({
      token: replicate.token,
      apiUrl: replicate.url,
      backendFor: (id) => videoModelBackendFor(id, 'replicate'),
      now_ms,
    });
    const s = await callbackServer({ providerFor: (b) => (b === 'replicate' ? adapter : undefined) });
    const post = (headers: Record<string, string>, body: Buffer) =>
      api(s.base, 'POST', `/v2/provider-callbacks/replicate/${JOB_ID}`, { headers, rawBody: body });
    const body = Buffer.from('{"id":"abcdefabcdef","status":"succeeded"}');
    const forged = () =>
      replicate.signCallback(body, {
        secret: `whsec_${Buffer.from('not-the-secret-0123456789').toString('base64')}`,
        at: new Date(now_ms()),
        id: `msg_${randomUUID()}`,
      });
    try {
      replicate.fault({ route: 'secret', status: 500, body: { title: 'down' }, times: 1000 });
      for (let i = 0; i < 10; i++) assert.equal((await post(forged(), body)).status, 503);
      assert.equal(replicate.requestsTo('secret').length, 1, 'one failed fetch, then its backoff');
      offset_ms += KEY_FETCH_BACKOFF_MS + 1_000;
      replicate.reset();
      const genuine = replicate.signCallback(body, { at: new Date(now_ms()) });
      assert.equal((await post(genuine, body)).status, 200);
      assert.equal(replicate.requestsTo('secret').length, 1, 'fetched again once the backoff had passed');
      // Held: a forged callback asks for a refresh (rotation) at most once per minimum interval; when that refresh fails the held secret goes on verifying.
      offset_ms += REPLICATE_SECRET_MIN_REFRESH_MS + 1_000;
      replicate.fault({ route: 'secret', status: 500, body: { title: 'down' }, times: 1000 });
      for (let i = 0; i < 10; i++) assert.equal((await post(forged(), body)).status, 401);
      assert.equal((await post(replicate.signCallback(body, { at: new Date(now_ms()) }), body)).status, 200);
      assert.equal(replicate.requestsTo('secret').length, 2, 'one refresh tried (it failed), none other within its backoff');
    } finally {
      await s.close();
    }
  });
});
