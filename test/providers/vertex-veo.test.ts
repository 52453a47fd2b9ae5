// The Vertex AI Veo adapter against a local fake of Vertex AI and Cloud Storage that reproduces their
// documented wire format (test/fakes/vertex-veo-fake.ts): what the adapter sends for each request shape,
// how it handles every documented answer, and one job end to end through the real workflow.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { googleError, VERTEX_MODELS, VertexVeoFake } from '../fakes/vertex-veo-fake.js';
import { LARGE_OPERATION_BYTES, CONCURRENT_LARGE_OPERATION_READS_MAX, VertexVeoProvider, type VertexVeoOptions } from '../../src/providers/video/vertex-veo.js';
import { mergeVertexParameters } from '../../src/providers/video/vertex-veo-wire.js';
import { staticTokenSource } from '../../src/providers/video/vertex-veo-cache.js';
import { findVideoModel, providerModelIdFor, videoBackendFor, videoModelAliases, videoModels } from '../../src/models/catalog.js';
import { ProviderError, type VideoSubmission } from '../../src/providers/video/types.js';
import { retryAfterMs } from '../../src/providers/http-body.js';
import { loadConfig } from '../../src/config.js';
import { projectPath } from '../../src/paths.js';
import { assertAuditHolds, balanceMicro, http as api, newCustomer, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { imageField, jpegImage, pngImage, WEBP_IMAGE } from '../helpers/images.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';
import { SUBMIT_ATTEMPTS_MAX as SUBMIT_ATTEMPTS_MAX } from '../../workflows/video-job.js';
import { loadVideoJobInputs } from '../../src/video-jobs/images.js';
import { LocalStorage } from '../../src/storage/local.js';
import path from 'node:path';

const TOKEN = 'test-token';
const MODEL_PATH = '/v1/projects/test-project/locations/europe-west4/publishers/google/models/veo-3.1-fast-generate-001';
const asset = (name: string) => fs.readFileSync(projectPath('assets', 'sim-video', name));
const PAYLOADS = [asset('16x9-4s.mp4'), asset('16x9-6s.mp4'), asset('16x9-8s.mp4')];

let fake: VertexVeoFake;
before(async () => {
  fake = await new VertexVeoFake().start();
});
after(async () => {
  await fake.stop();
});
beforeEach(() => fake.reset());

function provider(opts: Partial<VertexVeoOptions> = {}): VertexVeoProvider {
  return new VertexVeoProvider({
    projectId: 'test-project',
    apiEndpoint: fake.url,
    gcsApiEndpoint: fake.url,
    tokenSource: staticTokenSource(TOKEN),
    modelIdFor: (id) => providerModelIdFor(id, 'vertex'),
    requestTimeoutMs: 2_000,
    ...opts,
  });
}

function request(extra: Partial<VideoSubmission> = {}): VideoSubmission {
  return {
    request_id: '7d0f2a8e-0000-4000-8000-000000000001',
    model: 'veo-3.1-fast-generate-001',
    prompt: 'a lighthouse at dusk, waves crashing',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 2 },
    generate_audio: true,
    ...extra,
  };
}

/** Polls until the operation is no longer running. */
async function settle(p: VertexVeoProvider, operation_id: string) {
  for (let i = 0; i < 20; i++) {
    const status = await p.poll(operation_id);
    if (status.state !== 'running') return status;
  }
  throw new Error('operation still running');
}

async function rejectsWith(promise: Promise<unknown>, expected: { code: string; retryable: boolean; message?: RegExp; retry_after_ms?: number }) {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ProviderError, `a ProviderError, got ${String(err)}`);
    assert.equal(err.opts.code, expected.code, err.message);
    assert.equal(err.opts.retryable, expected.retryable, `${expected.code} retryable`);
    if (expected.message) assert.match(err.message, expected.message);
    if ('retry_after_ms' in expected) assert.equal(err.opts.retry_after_ms, expected.retry_after_ms);
    assert.ok(!err.message.includes(TOKEN), 'the access token never appears in an error');
    return true;
  });
}

describe('Vertex AI Veo adapter: what it sends', () => {
  test('submit: POST :predictLongRunning on the regional endpoint, bearer token, the request mapped', async () => {
    const p = provider();
    const { operation_id } = await p.submit(request());
    const [sent] = fake.requestsTo('predictLongRunning');
    assert.ok(sent);
    assert.equal(sent.method, 'POST');
    assert.equal(sent.path, `${MODEL_PATH}:predictLongRunning`);
    assert.equal(sent.headers['authorization'], `Bearer ${TOKEN}`);
    assert.match(String(sent.headers['content-type']), /^application\/json/);
    assert.deepEqual(sent.body, {
      instances: [{ prompt: 'a lighthouse at dusk, waves crashing' }],
      parameters: { sampleCount: 2, durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', generateAudio: true },
    });
    // the operation id is the operation name, with the sample count the outputs are capped at
    assert.match(operation_id, /^projects\/test-project\/locations\/europe-west4\/publishers\/google\/models\/veo-3\.1-fast-generate-001\/operations\/[0-9a-f-]+#n=2$/);
    assert.ok(fake.operations.has(operation_id.split('#')[0]!));
  });

  test('seed, the other model, 1080p portrait, and storageUri (one folder per job) when an output bucket is set', async () => {
    const p = provider({ outputGcsUri: 'gs://our-bucket/videos' });
    await p.submit(request({ model: 'veo-3.1-generate-001', seed: 42, params: { durationSeconds: 8, resolution: '4k', aspectRatio: '9:16', n: 4 } }));
    const [sent] = fake.requestsTo('predictLongRunning');
    assert.equal(sent!.path, '/v1/projects/test-project/locations/europe-west4/publishers/google/models/veo-3.1-generate-001:predictLongRunning');
    assert.deepEqual(sent!.body, {
      instances: [{ prompt: 'a lighthouse at dusk, waves crashing' }],
      parameters: {
        sampleCount: 4,
        durationSeconds: 8,
        resolution: '4k',
        aspectRatio: '9:16',
        generateAudio: true,
        seed: 42,
        storageUri: 'gs://our-bucket/videos/7d0f2a8e-0000-4000-8000-000000000001/',
      },
    });
  });

  test('the location picks the default regional endpoint; a configured endpoint overrides it', () => {
    const modelIdFor = (id: string) => providerModelIdFor(id, 'vertex');
    const eu = new VertexVeoProvider({ projectId: 'test-project', modelIdFor, tokenSource: staticTokenSource(TOKEN) });
    assert.equal((eu as any).apiEndpoint, 'https://europe-west4-aiplatform.googleapis.com');
    const us = new VertexVeoProvider({ projectId: 'test-project', modelIdFor, location: 'us-central1', tokenSource: staticTokenSource(TOKEN) });
    assert.equal((us as any).apiEndpoint, 'https://us-central1-aiplatform.googleapis.com');
    assert.equal((us as any).gcsApiEndpoint, 'https://storage.googleapis.com');
  });

  test('parameters passthrough: merged in, never overriding controlled fields nor redirecting outputs', async () => {
    const p = provider({ outputGcsUri: 'gs://our-bucket/videos/' });
    await p.submit(
      request({
        seed: 7,
        parameters: {
          negativePrompt: 'blurry, text',
          personGeneration: 'allow_adult',
          generateAudio: false,
          enhancePrompt: false,
          sampleCount: 4,
          sample_count: 4,
          durationSeconds: 8,
          resolution: '1080p',
          aspectRatio: '9:16',
          seed: 1,
          storageUri: 'gs://someone-else/',
          storage_uri: 'gs://someone-else/',
          outputGcsUri: 'gs://someone-else/',
          pubsubTopic: 'projects/x/topics/y',
        },
      }),
    );
    const [sent] = fake.requestsTo('predictLongRunning');
    // generateAudio (it sets the price) and negativePrompt come from the job's own fields only
    assert.deepEqual((sent!.body as any).parameters, {
      personGeneration: 'allow_adult',
      enhancePrompt: false,
      sampleCount: 2,
      durationSeconds: 4,
      resolution: '720p',
      aspectRatio: '16:9',
      generateAudio: true,
      seed: 7,
      storageUri: 'gs://our-bucket/videos/7d0f2a8e-0000-4000-8000-000000000001/',
    });
    assert.ok(!JSON.stringify(sent!.body).includes('someone-else'));
  });

  test('mergeVertexParameters reports what it dropped; no storageUri is sent without an output bucket', () => {
    const { parameters, dropped } = mergeVertexParameters(
      { negativePrompt: 'x', generate_audio: false, storageUri: 'gs://elsewhere/', webhookUrl: 'https://example.com', __proto__x: 1, fps: 24 },
      { sampleCount: 1, seed: undefined, storageUri: undefined },
    );
    assert.deepEqual(parameters, { __proto__x: 1, fps: 24, sampleCount: 1 });
    assert.deepEqual(dropped.sort(), ['generate_audio', 'negativePrompt', 'storageUri', 'webhookUrl']);
  });

  test('poll: POST :fetchPredictOperation with the operation name, bearer token', async () => {
    const p = provider();
    const { operation_id } = await p.submit(request());
    assert.deepEqual(await p.poll(operation_id), { state: 'running' });
    const [sent] = fake.requestsTo('fetchPredictOperation');
    assert.equal(sent!.method, 'POST');
    assert.equal(sent!.path, `${MODEL_PATH}:fetchPredictOperation`);
    assert.equal(sent!.headers['authorization'], `Bearer ${TOKEN}`);
    assert.deepEqual(sent!.body, { operationName: operation_id.split('#')[0] });
  });

  test('a model outside the Vertex mapping is refused before any request', async () => {
    await rejectsWith(provider().submit(request({ model: 'sim-video-1' })), { code: 'model_not_supported', retryable: false });
    assert.equal(fake.requests.length, 0);
  });

  test('image to video: first and last frame as instances[0].image / lastFrame (base64, type); audio off and a negative prompt as parameters', async () => {
    const first = pngImage(64, 36, 1);
    const last = jpegImage(2);
    const { operation_id } = await provider().submit(
      request({
        image: { bytes: first, mime_type: 'image/png' },
        last_frame: { bytes: last, mime_type: 'image/jpeg' },
        generate_audio: false,
        negative_prompt: 'text overlays, watermarks',
      }),
    );
    const [sent] = fake.requestsTo('predictLongRunning');
    assert.deepEqual(sent!.body, {
      instances: [
        {
          prompt: 'a lighthouse at dusk, waves crashing',
          image: { bytesBase64Encoded: first.toString('base64'), mimeType: 'image/png' },
          lastFrame: { bytesBase64Encoded: last.toString('base64'), mimeType: 'image/jpeg' },
        },
      ],
      parameters: { sampleCount: 2, durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', generateAudio: false, negativePrompt: 'text overlays, watermarks' },
    });
    const name = operation_id.split('#')[0]!;
    assert.deepEqual(fake.receivedImage(name, 'image'), first, 'the first frame arrives byte for byte');
    assert.deepEqual(fake.receivedImage(name, 'lastFrame'), last, 'the last frame arrives byte for byte');
  });

  test('a retired id is sent as its replacement: Vertex never sees it', async () => {
    assert.equal(providerModelIdFor('veo-3.0-fast-generate-001', 'vertex'), 'veo-3.1-fast-generate-001');
    assert.equal(providerModelIdFor('veo-3.0-generate-001', 'vertex'), 'veo-3.1-generate-001');
    await provider().submit(request({ model: 'veo-3.0-fast-generate-001' }));
    const [sent] = fake.requestsTo('predictLongRunning');
    assert.equal(sent!.path, `${MODEL_PATH}:predictLongRunning`);
  });
});

describe('the Vertex fake behaves like Vertex AI today', () => {
  // An adapter that sends any model id as it is, to see what Vertex answers.
  const raw = () => provider({ modelIdFor: (id) => id });

  for (const model of ['veo-3.0-generate-001', 'veo-3.0-fast-generate-001', 'veo-9.9-imaginary-001']) {
    test(`${model}: 404 NOT_FOUND (retired or unknown), not retryable`, async () => {
      await rejectsWith(raw().submit(request({ model })), { code: 'not_found', retryable: false, message: /HTTP 404 \(NOT_FOUND: Publisher Model .* was not found/ });
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
    ['a duration Veo 3.1 does not make', { params: { durationSeconds: 5, resolution: '720p', aspectRatio: '16:9', n: 1 } }, /parameters\.durationSeconds/],
    ['a resolution it does not make', { params: { durationSeconds: 4, resolution: '480p' as never, aspectRatio: '16:9', n: 1 } }, /parameters\.resolution/],
    ['an aspect ratio it does not make', { params: { durationSeconds: 4, resolution: '720p', aspectRatio: '1:1' as never, n: 1 } }, /parameters\.aspectRatio/],
    ['more than 4 samples', { params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 5 } }, /parameters\.sampleCount/],
    ['no generateAudio (required for Veo 3 models)', { generate_audio: undefined }, /generateAudio is required/],
    ['a WebP image (image/jpeg and image/png only)', { image: { bytes: WEBP_IMAGE, mime_type: 'image/webp' } }, /instances\[0\]\.image: mimeType/],
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
      body: JSON.stringify({ instances: [{ prompt: 'p', image: { bytesBase64Encoded: 'not base64!', mimeType: 'image/png' } }], parameters: { generateAudio: true } }),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as any).error.message, /bytesBase64Encoded is not valid base64/);
  });
});

describe('Vertex AI Veo adapter: every documented answer', () => {
  test('success, inline videos: running until done, one output per video, bytes decoded from the operation', async () => {
    fake.scenario = { pollsUntilDone: 2, payloads: PAYLOADS };
    const p = provider();
    const { operation_id } = await p.submit(request());
    assert.deepEqual(await p.poll(operation_id), { state: 'running' });
    assert.deepEqual(await p.poll(operation_id), { state: 'running' });
    const status = await p.poll(operation_id);
    assert.deepEqual(status, {
      state: 'succeeded',
      outputs: [
        { ref: 'inline:0', content_type: 'video/mp4' },
        { ref: 'inline:1', content_type: 'video/mp4' },
      ],
    });
    const before = fake.requestsTo('fetchPredictOperation').length;
    assert.deepEqual(await p.fetchOutput(operation_id, { ref: 'inline:1', content_type: 'video/mp4' }), PAYLOADS[1]);
    assert.deepEqual(await p.fetchOutput(operation_id, { ref: 'inline:0', content_type: 'video/mp4' }), PAYLOADS[0]);
    // the finished operation is read once: its outputs, and a poll again (a completion lost in a Temporal outage), reuse it
    assert.deepEqual(await p.poll(operation_id), status);
    assert.equal(fake.requestsTo('fetchPredictOperation').length, before, 'a finished inline operation is not read again per output or per poll');
    // another process (nothing cached) reads the operation once for all its outputs
    const other = provider();
    assert.deepEqual(await other.fetchOutput(operation_id, { ref: 'inline:0', content_type: 'video/mp4' }), PAYLOADS[0]);
    assert.deepEqual(await other.fetchOutput(operation_id, { ref: 'inline:1', content_type: 'video/mp4' }), PAYLOADS[1]);
    assert.equal(fake.requestsTo('fetchPredictOperation').length, before + 1);
    await rejectsWith(p.fetchOutput(operation_id, { ref: 'inline:2', content_type: 'video/mp4' }), { code: 'not_found', retryable: false });
  });

  test('success, Cloud Storage videos: gs:// refs, downloaded through the JSON API media endpoint with the bearer token', async () => {
    fake.scenario = { payloads: PAYLOADS };
    const p = provider({ outputGcsUri: 'gs://our-bucket/videos/' });
    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 3 } }));
    const status = await settle(p, operation_id);
    assert.equal(status.state, 'succeeded');
    if (status.state !== 'succeeded') return;
    assert.equal(status.outputs.length, 3);
    for (const [i, out] of status.outputs.entries()) {
      assert.match(out.ref, /^gs:\/\/our-bucket\/videos\/7d0f2a8e-0000-4000-8000-000000000001\/[0-9a-f-]+\/sample_\d\.mp4$/);
      assert.deepEqual(await p.fetchOutput(operation_id, out), PAYLOADS[i]);
    }
    const downloads = fake.requestsTo('download');
    assert.equal(downloads.length, 3);
    const object = status.outputs[0]!.ref.slice('gs://our-bucket/'.length);
    assert.equal(downloads[0]!.method, 'GET');
    assert.equal(downloads[0]!.path, `/storage/v1/b/our-bucket/o/${encodeURIComponent(object)}?alt=media`);
    assert.equal(downloads[0]!.headers['authorization'], `Bearer ${TOKEN}`);
  });

  test('partial: Responsible AI filtered some videos: only the delivered ones are outputs (a shortfall)', async () => {
    fake.scenario = { videos: 3, filtered: 1, filteredReasons: ['Unable to show generated videos: content filtered'] };
    const p = provider();
    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 4 } }));
    const status = await settle(p, operation_id);
    assert.equal(status.state, 'succeeded');
    assert.deepEqual(status.state === 'succeeded' && status.outputs.map((o) => o.ref), ['inline:0', 'inline:1', 'inline:2']);
  });

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

  test('never more outputs than n, whatever the provider returns', async () => {
    fake.scenario = { videos: 4 };
    const p = provider();
    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 2 } }));
    const status = await settle(p, operation_id);
    assert.equal(status.state === 'succeeded' && status.outputs.length, 2);
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

  test('Cloud Storage URIs outside the service-owned prefix are never fetched', async () => {
    fake.scenario = { gcsUriOverride: 'gs://someone-else/videos/sample_0.mp4' };
    const p = provider({ outputGcsUri: 'gs://our-bucket/videos' });
    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    const status = await settle(p, operation_id);
    assert.equal(status.state, 'succeeded');
    const out = status.state === 'succeeded' ? status.outputs[0]! : { ref: '', content_type: '' };
    await rejectsWith(p.fetchOutput(operation_id, out), { code: 'untrusted_output_location', retryable: false });
    // a sibling folder sharing the prefix's spelling is not under it
    await rejectsWith(p.fetchOutput(operation_id, { ref: 'gs://our-bucket/videos-other/x.mp4', content_type: 'video/mp4' }), {
      code: 'untrusted_output_location',
      retryable: false,
    });
    // without an output bucket configured, no gs:// URI is trusted
    await rejectsWith(provider().fetchOutput(operation_id, { ref: 'gs://our-bucket/videos/x.mp4', content_type: 'video/mp4' }), {
      code: 'untrusted_output_location',
      retryable: false,
    });
    assert.equal(fake.requestsTo('download').length, 0);
  });

  test(`finished operations with large inline videos are read at most ${CONCURRENT_LARGE_OPERATION_READS_MAX} at once per process; small answers never wait`, async () => {
    const big = Buffer.concat([PAYLOADS[0]!, Buffer.alloc(LARGE_OPERATION_BYTES)]);
    fake.scenario = { pollsUntilDone: 0, payloads: [big] };
    const p = provider();
    const ops = [];
    for (let i = 0; i < 6; i++) ops.push((await p.submit(request({ request_id: `7d0f2a8e-0000-4000-8000-00000000010${i}`, params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }))).operation_id);
    const statuses = await Promise.all(ops.map((id) => p.poll(id)));
    for (const st of statuses) assert.equal(st.state, 'succeeded');
    assert.equal(p.largeReadStats.in_flight_max, CONCURRENT_LARGE_OPERATION_READS_MAX, 'large answers queued for a slot');
    assert.equal(p.largeReadStats.in_flight, 0, 'every slot given back');
    const copies = await Promise.all(ops.map((id) => p.fetchOutput(id, { ref: 'inline:0', content_type: 'video/mp4' })));
    for (const c of copies) assert.ok(c.equals(big));
    fake.scenario = { pollsUntilDone: 5 };
    const running = await p.submit(request());
    const before = p.largeReadStats.in_flight_max;
    await Promise.all(Array.from({ length: 5 }, () => p.poll(running.operation_id)));
    assert.equal(p.largeReadStats.in_flight_max, before, 'a running operation is a small answer');
  });

  test('outputs larger than the limit are refused while reading (download and inline)', async () => {
    fake.scenario = { payloads: PAYLOADS };
    const small = provider({ outputGcsUri: 'gs://our-bucket/videos/', outputBytesMax: 10_000 });
    const { operation_id } = await small.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    const status = await settle(small, operation_id);
    const out = status.state === 'succeeded' ? status.outputs[0]! : { ref: '', content_type: '' };
    await rejectsWith(small.fetchOutput(operation_id, out), { code: 'output_too_large', retryable: false });

    const inline = provider({ outputBytesMax: 10_000 });
    const second = await inline.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    await settle(inline, second.operation_id);
    await rejectsWith(inline.fetchOutput(second.operation_id, { ref: 'inline:0', content_type: 'video/mp4' }), { code: 'output_too_large', retryable: false });
  });

  for (const [status, code, message] of [
    [400, 'invalid_request', 'Invalid value at parameters.durationSeconds'],
    [401, 'provider_unauthenticated', 'Request had invalid authentication credentials.'],
    [403, 'provider_permission_denied', "Permission 'aiplatform.endpoints.predict' denied"],
    [404, 'not_found', 'Publisher Model was not found or your project does not have access to it.'],
  ] as const) {
    test(`${status}: fails fast (not retryable) with the provider's message`, async () => {
      fake.fault({ route: 'predictLongRunning', status, body: googleError(status, message) });
      await rejectsWith(provider().submit(request()), { code, retryable: false, message: new RegExp(`HTTP ${status}.*${message.slice(0, 20)}`) });
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
    fake.fault({ route: 'predictLongRunning', status: 429, headers: { 'retry-after': '7' }, body: googleError(429, 'Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model') });
    await rejectsWith(provider().submit(request()), { code: 'rate_limited', retryable: true, retry_after_ms: 7_000, message: /HTTP 429.*Quota exceeded.*retry after 7 s/ });
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
    fake.fault({ route: 'predictLongRunning', status: 502, body: '<html><body>Bad Gateway</body></html>', headers: { 'content-type': 'text/html' } });
    await rejectsWith(provider().submit(request()), { code: 'provider_unavailable', retryable: true });
  });

  test('timeouts: no answer within the request timeout is retryable (submit, poll, download)', async () => {
    const p = provider({ requestTimeoutMs: 200, downloadTimeoutMs: 200, outputGcsUri: 'gs://our-bucket/videos/' });
    fake.fault({ route: 'predictLongRunning', delayMs: 2_000 });
    await rejectsWith(p.submit(request()), { code: 'provider_timeout', retryable: true, message: /within 200 ms/ });

    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    fake.fault({ route: 'fetchPredictOperation', delayMs: 2_000 });
    await rejectsWith(p.poll(operation_id), { code: 'provider_timeout', retryable: true });

    const status = await settle(p, operation_id);
    const out = status.state === 'succeeded' ? status.outputs[0]! : { ref: '', content_type: '' };
    fake.fault({ route: 'download', delayMs: 2_000 });
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
    await rejectsWith(provider({ apiEndpoint: `http://127.0.0.1:${port}` }).submit(request()), { code: 'provider_unreachable', retryable: true });
  });

  test('credentials: missing Application Default Credentials fail fast; a transient token error is retryable', async () => {
    const missing = provider({
      tokenSource: { getAccessToken: () => Promise.reject(new Error('Could not load the default credentials. Browse to https://cloud.google.com/docs/authentication')) },
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

describe('Vertex AI Veo: config and routing', () => {
  test('routing: with Vertex configured the reference family goes to Vertex, each with a Vertex model id; else the simulator', () => {
    for (const m of videoModels()) {
      const withVertex = videoBackendFor(m, { simulator: true, vertex: true });
      // sim-video-1, and the models only fal or Replicate serve (neither configured here): the simulator
      if (!m.backends.some((b) => b.backend === 'vertex')) assert.equal(withVertex, 'simulator', m.id);
      else {
        assert.equal(withVertex, 'vertex', m.id);
        assert.equal(providerModelIdFor(m.id, 'vertex'), m.id, `${m.id} is its own Vertex model id`);
      }
      assert.equal(videoBackendFor(m, { simulator: true, vertex: false }), 'simulator');
      assert.equal(videoBackendFor(m, { simulator: false, vertex: false }), null);
    }
    assert.equal(videoBackendFor(findVideoModel('sim-video-1')!, { simulator: false, vertex: true }), null);
    assert.equal(providerModelIdFor('sim-video-1', 'vertex'), undefined);
  });

  test('VERTEX_PROJECT_ID enables it with EU defaults; the token is never enumerable', () => {
    assert.equal(loadConfig({}).vertex, null);
    const c = loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_ACCESS_TOKEN: 'ya29.secret' }).vertex!;
    assert.equal(c.location, 'europe-west4');
    assert.equal(c.apiEndpoint, 'https://europe-west4-aiplatform.googleapis.com');
    assert.equal(c.gcsApiEndpoint, 'https://storage.googleapis.com');
    assert.equal(c.outputGcsUri, undefined);
    assert.equal(c.accessToken, 'ya29.secret');
    assert.ok(!JSON.stringify(c).includes('ya29.secret'));
    assert.equal(loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_LOCATION: 'us-central1' }).vertex!.apiEndpoint, 'https://us-central1-aiplatform.googleapis.com');
    assert.throws(() => loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_OUTPUT_GCS_URI: 'https://bucket/x' }), /VERTEX_OUTPUT_GCS_URI/);
    assert.throws(() => loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_API_ENDPOINT: 'http://vertex.example.com' }), /https/);
  });
});

describe('Vertex AI Veo: a job end to end through the workflow', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      env: {
        VERTEX_PROJECT_ID: 'test-project',
        VERTEX_API_ENDPOINT: fake.url,
        GCS_API_ENDPOINT: fake.url,
        VERTEX_OUTPUT_GCS_URI: 'gs://our-bucket/videos/',
        VERTEX_ACCESS_TOKEN: TOKEN,
      },
    });
  });
  after(async () => {
    await stack?.stop();
  });

  test('/v2/models/all says Vertex serves the reference family; the retired ids are listed as deprecated with replaced_by', async () => {
    const c = await newCustomer(stack, 1);
    const r = await api(stack.baseUrl, 'GET', '/v2/models/all', { token: c.key });
    assert.equal(r.status, 200);
    const model = (id: string) => r.body.data.find((m: any) => m.id === id);
    for (const id of ['veo-3.1-fast-generate-001', 'veo-3.1-generate-001']) {
      assert.equal(model(id).backend, 'vertex');
      assert.equal(model(id).simulated, false);
      assert.equal(model(id).available, true);
      assert.equal(model(id).deprecated, false);
      assert.deepEqual(model(id).resolutions, ['720p', '1080p', '4k']);
      assert.equal(model(id).supports_image, true);
      assert.equal(model(id).supports_audio, true);
    }
    for (const [retired, replacement] of [
      ['veo-3.0-fast-generate-001', 'veo-3.1-fast-generate-001'],
      ['veo-3.0-generate-001', 'veo-3.1-generate-001'],
    ] as const) {
      assert.equal(model(retired).deprecated, true);
      assert.equal(model(retired).replaced_by, replacement);
      assert.deepEqual(model(retired).pricing, model(replacement).pricing, 'priced as its replacement');
    }
    assert.equal(model('sim-video-1').backend, 'simulator');
    const usable = await api(stack.baseUrl, 'GET', '/v2/models', { token: c.key });
    assert.ok(!usable.body.data.some((m: any) => m.deprecated), '/v2/models offers no retired id');
  });

  // veo-3.1-fast-generate-001 at 720p, 4 s: 0.20 EUR/s with audio (800_000 micro-euros a video), 0.15 without (600_000).
  const WITH_AUDIO = 800_000;
  const WITHOUT_AUDIO = 600_000;

  test('n=4, 3 delivered + 1 filtered by Responsible AI: succeeded with 3 videos, charged 4 units, refunded exactly 1', async () => {
    fake.scenario = { pollsUntilDone: 2, videos: 3, filtered: 1, filteredReasons: ['content filtered'], payloads: PAYLOADS };
    // one transient 429 with Retry-After on the first poll: retried by the activity, invisible to the job
    fake.fault({ route: 'fetchPredictOperation', status: 429, headers: { 'retry-after': '1' }, body: googleError(429, 'Resource exhausted') });
    const c = await newCustomer(stack, 10);
    const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'a lighthouse at dusk, waves crashing', model: 'veo-3.1-fast-generate-001', durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 4 },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal(created.body.estimated_cost_in_euro, 3.2);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 4 * WITH_AUDIO);

    const job = await waitForJob(stack, c.key, created.body.id, 60_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.videos.length, 3);
    assert.equal(job.cost_in_euro, 2.4);
    assert.equal(job.refunded_in_euro, 0.8);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 3 * WITH_AUDIO);
    for (const [i, v] of job.videos.entries()) {
      const res = await fetch(v.url);
      assert.equal(res.status, 200);
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), PAYLOADS[i], `video ${i} is the bytes the provider served`);
    }

    const [submitted] = fake.requestsTo('predictLongRunning');
    assert.equal(submitted!.headers['authorization'], `Bearer ${TOKEN}`);
    assert.deepEqual(submitted!.body, {
      instances: [{ prompt: 'a lighthouse at dusk, waves crashing' }],
      parameters: { sampleCount: 4, durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', generateAudio: true, storageUri: `gs://our-bucket/videos/${created.body.id}/` },
    });
    assert.equal(fake.requestsTo('download').length, 3);
    await assertAuditHolds(stack);
  });

  test('image to video with a last frame, audio off, a negative prompt: the bytes reach Vertex intact, priced without audio; kept with the job, not in workflow history', async () => {
    fake.scenario = { payloads: PAYLOADS };
    // Vertex is briefly unavailable: the submit is retried, and the retry sends the same bytes.
    fake.fault({ route: 'predictLongRunning', status: 503, body: googleError(503, 'The service is currently unavailable.') });
    const first = pngImage(320, 180, 7);
    const last = jpegImage(9);
    const c = await newCustomer(stack, 10);
    const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: {
        prompt: 'the lighthouse lights up as night falls',
        model: 'veo-3.1-fast-generate-001',
        durationSeconds: 4,
        n: 2,
        image: imageField(first, 'image/png'),
        lastFrame: imageField(last, 'image/jpeg'),
        generateAudio: false,
        negativePrompt: 'people, text',
      },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal(created.body.estimated_cost_in_euro, 1.2, 'the estimate is what is charged: 2 x 4 s x 0.15 EUR/s without audio');
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 2 * WITHOUT_AUDIO);

    const job = await waitForJob(stack, c.key, created.body.id, 60_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.cost_in_euro, 1.2);

    const submits = fake.requestsTo('predictLongRunning');
    assert.equal(submits.length, 2, 'refused once (503), then accepted');
    for (const sent of submits) {
      const body = sent.body as any;
      assert.deepEqual(Buffer.from(body.instances[0].image.bytesBase64Encoded, 'base64'), first);
      assert.equal(body.instances[0].image.mimeType, 'image/png');
      assert.deepEqual(Buffer.from(body.instances[0].lastFrame.bytesBase64Encoded, 'base64'), last);
      assert.equal(body.instances[0].lastFrame.mimeType, 'image/jpeg');
      assert.equal(body.parameters.generateAudio, false);
      assert.equal(body.parameters.negativePrompt, 'people, text');
    }

    // The images are kept with the job (in storage, named by its row), and the workflow history carries only a flag.
    const kept = await loadVideoJobInputs(stack.db, new LocalStorage(path.join(stack.env['DATA_DIR']!, 'storage')), created.body.id);
    assert.deepEqual(kept?.image.bytes, first);
    assert.equal(kept?.last_frame?.mime_type, 'image/jpeg');
    const history = JSON.stringify(await stack.api.temporal.workflow.getHandle(videoJobWorkflowId(created.body.id)).fetchHistory());
    assert.ok(!history.includes(first.toString('base64').slice(0, 64)), 'no image bytes in the workflow history');
    assert.ok(history.length < 64 * 1024, `history of ${history.length} bytes`);
    await assertAuditHolds(stack);
  });

  test('a retired id: accepted, run and priced as its replacement, reported as it; Vertex never sees the retired id', async () => {
    fake.scenario = { payloads: PAYLOADS };
    const c = await newCustomer(stack, 10);
    const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'a fox in snow', model: 'veo-3.0-fast-generate-001', durationSeconds: 4, n: 1 },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal(created.body.model, 'veo-3.1-fast-generate-001');
    assert.equal(created.body.estimated_cost_in_euro, 0.8);
    const job = await waitForJob(stack, c.key, created.body.id, 60_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.model, 'veo-3.1-fast-generate-001');
    assert.ok(fake.requests.every((r) => !r.path.includes('veo-3.0')), 'no request names a retired model');
    assert.equal(fake.requestsTo('predictLongRunning')[0]!.path, `${MODEL_PATH}:predictLongRunning`);
    await assertAuditHolds(stack);
  });

  test('a key permitted only the retired id may use its replacement', async () => {
    const c = await newCustomer(stack, 10, ['veo-3.0-fast-generate-001']);
    const models = await api(stack.baseUrl, 'GET', '/v2/models', { token: c.key });
    assert.deepEqual(models.body.data.map((m: any) => m.id), ['veo-3.1-fast-generate-001']);
    const other = await api(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: { prompt: 'p', model: 'veo-3.1-generate-001', durationSeconds: 4 } });
    assert.equal(other.status, 403);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
  });

  /** A customer with 10 EUR creates one 4 s Veo 3.1 Fast job (0.8 EUR) and waits for its end. */
  const oneFastJob = async () => {
    const c = await newCustomer(stack, 10);
    const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'p', model: 'veo-3.1-fast-generate-001', durationSeconds: 4, n: 1 },
    });
    assert.equal(created.status, 202);
    return { c, job: await waitForJob(stack, c.key, created.body.id, 60_000) };
  };

  test('Vertex refusing our credentials: the job fails, refunded in full, without the provider\'s text', async () => {
    fake.scenario = { payloads: PAYLOADS };
    fake.fault({ route: 'predictLongRunning', status: 403, body: googleError(403, "Permission 'aiplatform.endpoints.predict' denied on resource projects/test-project") });
    const { c, job } = await oneFastJob();
    assert.equal(job.status, 'failed');
    assert.equal(job.error.code, 'provider_permission_denied');
    assert.doesNotMatch(job.error.message, /aiplatform|test-project/);
    assert.equal(job.refunded_in_euro, 0.8);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
    await assertAuditHolds(stack);
  });
  test('Vertex unavailable on every submit: the job submits SUBMIT_ATTEMPTS_MAX times, then fails with the provider\'s code, refunded in full', async () => {
    fake.scenario = { payloads: PAYLOADS };
    fake.fault({ route: 'predictLongRunning', status: 503, body: googleError(503, 'The service is currently unavailable.'), times: SUBMIT_ATTEMPTS_MAX + 1 });
    const { c, job } = await oneFastJob();
    assert.equal(job.status, 'failed', JSON.stringify(job));
    assert.equal(job.error.code, 'provider_unavailable');
    assert.equal(job.refunded_in_euro, 0.8);
    assert.equal(fake.requestsTo('predictLongRunning').length, SUBMIT_ATTEMPTS_MAX, 'bounded submits, none after the job failed');
    assert.equal(fake.requestsTo('fetchPredictOperation').length, 0, 'nothing to poll');
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
    await assertAuditHolds(stack);
  });
});
