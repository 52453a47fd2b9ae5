// The Vertex AI Veo adapter against the fake when Vertex refuses or fails: what the fake refuses as
// Vertex does today, and every documented error answer (4xx, 401, 429 with and without Retry-After,
// 5xx, timeouts, malformed JSON, network errors, credentials), each retryable or not.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { googleError, VERTEX_MODELS } from '../fakes/vertex-veo-fake.js';
import { staticTokenSource } from '../../src/providers/video/vertex-veo-cache.js';
import { retryAfterMs } from '../../src/providers/http-body.js';
import { videoModelAliases, videoModels } from '../../src/models/catalog.js';
import type { VideoSubmission } from '../../src/providers/video/types.js';
import { pngImage, WEBP_IMAGE } from '../helpers/images.js';
import { TOKEN, MODEL_PATH, fake, provider, request, settle, rejectsWith, useVertexFake } from './vertex-veo.setup.js';

useVertexFake();

describe('the Vertex fake behaves like Vertex AI today', () => {
  // An adapter that sends any model id as it is, to see what Vertex answers.
  const raw = () => provider({ modelIdFor: (id) => id });

  for (const model of ['veo-3.0-generate-001', 'veo-3.0-fast-generate-001', 'veo-9.9-imaginary-001']) {
    test(`${model}: 404 NOT_FOUND (retired or unknown), not retryable`, async () => {
      await rejectsWith(raw().submit(request({ model })), {
        code: 'not_found',
        retryable: false,
        message: /HTTP 404 \(NOT_FOUND: Publisher Model .* was not found/,
      });
    });
  }

  test('the catalog and the fake agree: every Vertex model of the catalog is one Vertex serves, within its documented ranges', () => {
    const vertexModels = videoModels().filter((m) => m.backend === 'vertex');
    assert.deepEqual(vertexModels.map((m) => m.id).sort(), ['veo-3.1-fast-generate-001', 'veo-3.1-generate-001']);
    for (const m of vertexModels) {
      const spec = VERTEX_MODELS[m.provider_model_id];
      assert.ok(spec, `${m.id}: Vertex serves ${m.provider_model_id}`);
      for (const d of m.durations_seconds) assert.ok(spec.durationsSeconds.includes(d), `${m.id}: ${d} s`);
      for (const r of m.resolutions) assert.ok(spec.resolutions.includes(r), `${m.id}: ${r}`);
      for (const a of m.aspect_ratios) assert.ok(spec.aspectRatios.includes(a), `${m.id}: ${a}`);
      assert.ok(m.max_n <= spec.maxSampleCount, `${m.id}: max_n`);
      for (const t of m.inputs.image_mime_types) assert.ok(spec.imageMimeTypes.includes(t), `${m.id}: ${t}`);
      assert.ok(!spec.generateAudioRequired || m.audio.supported, `${m.id}: generateAudio is always sent`);
    }
    for (const a of videoModelAliases()) assert.equal(VERTEX_MODELS[a.id], undefined, `${a.id} is retired at Vertex`);
  });

  const png = { bytes: pngImage(), mime_type: 'image/png' as const };
  const refusals: [string, Partial<VideoSubmission>, RegExp][] = [
    [
      'a duration Veo 3.1 does not make',
      { params: { durationSeconds: 5, resolution: '720p', aspectRatio: '16:9', n: 1 } },
      /parameters\.durationSeconds/,
    ],
    [
      'a resolution it does not make',
      { params: { durationSeconds: 4, resolution: '480p' as never, aspectRatio: '16:9', n: 1 } },
      /parameters\.resolution/,
    ],
    [
      'an aspect ratio it does not make',
      { params: { durationSeconds: 4, resolution: '720p', aspectRatio: '1:1' as never, n: 1 } },
      /parameters\.aspectRatio/,
    ],
    ['more than 4 samples', { params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 5 } }, /parameters\.sampleCount/],
    ['no generateAudio (required for Veo 3 models)', { generate_audio: undefined }, /generateAudio is required/],
    [
      'a WebP image (image/jpeg and image/png only)',
      { image: { bytes: WEBP_IMAGE, mime_type: 'image/webp' } },
      /instances\[0\]\.image: mimeType/,
    ],
    ['a last frame without an image', { last_frame: png }, /lastFrame can only be used together with/],
  ];
  for (const [name, extra, message] of refusals) {
    test(`400 INVALID_ARGUMENT: ${name}`, async () => {
      const operations = fake.operations.size;
      await rejectsWith(raw().submit(request(extra)), { code: 'invalid_request', retryable: false, message });
      assert.equal(fake.operations.size, operations, 'no operation started');
    });
  }

  test('invalid base64 in an image is refused', async () => {
    const res = await fetch(`${fake.url}${MODEL_PATH}:predictLongRunning`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        instances: [{ prompt: 'p', image: { bytesBase64Encoded: 'not base64!', mimeType: 'image/png' } }],
        parameters: { generateAudio: true },
      }),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as any).error.message, /bytesBase64Encoded is not valid base64/);
  });
});

describe('Vertex AI Veo adapter: every documented answer', () => {
  test('every video filtered: a failure carrying the filter reasons', async () => {
    fake.scenario = { videos: 0, filtered: 2, filteredReasons: ['The prompt could not be submitted: it may violate our policies'] };
    const p = provider();
    const { operation_id } = await p.submit(request());
    const status = await settle(p, operation_id);
    assert.equal(status.state, 'failed');
    if (status.state !== 'failed') return;
    assert.equal(status.code, 'content_filtered');
    assert.match(status.message, /all 2 videos were filtered.*may violate our policies/);
  });

  test('operation error: a failure with the provider message and the google.rpc code', async () => {
    fake.scenario = { error: { code: 3, message: 'Veo could not generate videos: the prompt was blocked' } };
    const p = provider();
    const { operation_id } = await p.submit(request());
    assert.deepEqual(await settle(p, operation_id), {
      state: 'failed',
      code: 'invalid_argument',
      message: 'Veo could not generate videos: the prompt was blocked',
    });
    fake.scenario = { error: { code: 13, message: 'Internal error encountered.' } };
    const second = await p.submit(request());
    assert.deepEqual(await settle(p, second.operation_id), { state: 'failed', code: 'internal', message: 'Internal error encountered.' });
  });

  for (const [status, code, message] of [
    [400, 'invalid_request', 'Invalid value at parameters.durationSeconds'],
    [401, 'provider_unauthenticated', 'Request had invalid authentication credentials.'],
    [403, 'provider_permission_denied', "Permission 'aiplatform.endpoints.predict' denied"],
    [404, 'not_found', 'Publisher Model was not found or your project does not have access to it.'],
  ] as const) {
    test(`${status}: fails fast (not retryable) with the provider's message`, async () => {
      fake.fault({ route: 'predictLongRunning', status, body: googleError(status, message) });
      await rejectsWith(provider().submit(request()), {
        code,
        retryable: false,
        message: new RegExp(`HTTP ${status}.*${message.slice(0, 20)}`),
      });
    });
  }

  test('a wrong token is the provider 401 (not retryable)', async () => {
    await rejectsWith(provider({ tokenSource: staticTokenSource('some-other-token') }).submit(request()), {
      code: 'provider_unauthenticated',
      retryable: false,
      message: /invalid authentication credentials/,
    });
  });

  test('429 with Retry-After: retryable, the delay carried', async () => {
    fake.fault({
      route: 'predictLongRunning',
      status: 429,
      headers: { 'retry-after': '7' },
      body: googleError(429, 'Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model'),
    });
    await rejectsWith(provider().submit(request()), {
      code: 'rate_limited',
      retryable: true,
      retry_after_ms: 7_000,
      message: /HTTP 429.*Quota exceeded.*retry after 7 s/,
    });
  });

  test('429 without Retry-After: retryable, no delay given (the retry policy backs off)', async () => {
    fake.fault({ route: 'fetchPredictOperation', status: 429, body: googleError(429, 'Resource exhausted') });
    const p = provider();
    const { operation_id } = await p.submit(request());
    await rejectsWith(p.poll(operation_id), { code: 'rate_limited', retryable: true, retry_after_ms: undefined });
    assert.deepEqual(await p.poll(operation_id), { state: 'running' }, 'the next poll works');
  });

  test('Retry-After as an HTTP date', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    assert.equal(retryAfterMs('Wed, 01 Jan 2025 00:00:30 GMT', now), 30_000);
    assert.equal(retryAfterMs('120', now), 120_000);
    assert.equal(retryAfterMs('soon', now), undefined);
  });

  for (const status of [500, 502, 503, 504]) {
    test(`${status}: retryable`, async () => {
      fake.fault({ route: 'fetchPredictOperation', status, body: googleError(status, 'The service is currently unavailable.') });
      const p = provider();
      const { operation_id } = await p.submit(request());
      await rejectsWith(p.poll(operation_id), { code: 'provider_unavailable', retryable: true, message: new RegExp(`HTTP ${status}`) });
    });
  }

  test('5xx with a non-JSON body (a proxy page) is still retryable', async () => {
    fake.fault({
      route: 'predictLongRunning',
      status: 502,
      body: '<html><body>Bad Gateway</body></html>',
      headers: { 'content-type': 'text/html' },
    });
    await rejectsWith(provider().submit(request()), { code: 'provider_unavailable', retryable: true });
  });

  test('timeouts: no answer within the request timeout is retryable (submit, poll, download)', async () => {
    const p = provider({ requestTimeoutMs: 200, downloadTimeoutMs: 200, outputGcsUri: 'gs://our-bucket/videos/' });
    fake.fault({ route: 'predictLongRunning', delay_ms: 2_000 });
    await rejectsWith(p.submit(request()), { code: 'provider_timeout', retryable: true, message: /within 200 ms/ });

    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    fake.fault({ route: 'fetchPredictOperation', delay_ms: 2_000 });
    await rejectsWith(p.poll(operation_id), { code: 'provider_timeout', retryable: true });

    const status = await settle(p, operation_id);
    const out = status.state === 'succeeded' ? status.outputs[0]! : { ref: '', content_type: '' };
    fake.fault({ route: 'download', delay_ms: 2_000 });
    await rejectsWith(p.fetchOutput(operation_id, out), { code: 'provider_timeout', retryable: true });
    assert.ok((await p.fetchOutput(operation_id, out)).length > 0, 'the next attempt downloads');
  });

  test('408 is retryable', async () => {
    fake.fault({ route: 'predictLongRunning', status: 408, body: googleError(408, 'Request timeout') });
    await rejectsWith(provider().submit(request()), { code: 'provider_timeout', retryable: true });
  });

  test('malformed JSON on a 2xx is a non-retryable invalid_response', async () => {
    fake.fault({ route: 'predictLongRunning', status: 200, body: '{"name": "projects/test-project/locations/eu' });
    await rejectsWith(provider().submit(request()), { code: 'invalid_response', retryable: false, message: /malformed JSON/ });
    fake.fault({ route: 'predictLongRunning', status: 200, body: { done: true } });
    await rejectsWith(provider().submit(request()), { code: 'invalid_response', retryable: false, message: /operation name/ });
    const p = provider();
    const { operation_id } = await p.submit(request());
    fake.fault({ route: 'fetchPredictOperation', status: 200, body: 'not json at all' });
    await rejectsWith(p.poll(operation_id), { code: 'invalid_response', retryable: false });
  });

  test('network errors (nothing listening) are retryable', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    await rejectsWith(provider({ apiEndpoint: `http://127.0.0.1:${port}` }).submit(request()), {
      code: 'provider_unreachable',
      retryable: true,
    });
  });

  test('credentials: missing Application Default Credentials fail fast; a transient token error is retryable', async () => {
    const missing = provider({
      tokenSource: {
        getAccessToken: () =>
          Promise.reject(new Error('Could not load the default credentials. Browse to https://cloud.google.com/docs/authentication')),
      },
    });
    await rejectsWith(missing.submit(request()), { code: 'provider_auth_failed', retryable: false });
    const flaky = provider({ tokenSource: { getAccessToken: () => Promise.reject(new Error('metadata server timed out')) } });
    await rejectsWith(flaky.submit(request()), { code: 'provider_auth_failed', retryable: true });
    assert.equal(fake.requests.length, 0);
  });

  test('an operation id that is not a Vertex operation name is not_found', async () => {
    await rejectsWith(provider().poll('simop_123'), { code: 'not_found', retryable: false });
  });
});
