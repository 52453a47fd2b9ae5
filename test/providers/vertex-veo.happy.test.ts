// The Vertex AI Veo adapter against a local fake of Vertex AI and Cloud Storage that reproduces their
// documented wire format (test/fakes/vertex-veo-fake.ts): what the adapter sends for each request
// shape, how it reads each successful operation (inline and Cloud Storage videos, partial deliveries),
// and its configuration and routing.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { VertexVeoProvider, vertexVeoDescriptor } from '../../src/providers/video/vertex-veo.js';
import { mergeVertexParameters } from '../../src/providers/video/vertex-veo-wire.js';
import { staticTokenSource } from '../../src/providers/video/vertex-veo-cache.js';
import { findVideoModel, providerModelIdFor, videoBackendFor, videoModels } from '../../src/models/catalog.js';
import { loadConfig } from '../../src/config.js';
import { jpegImage, pngImage } from '../helpers/images.js';
import { TOKEN, MODEL_PATH, PAYLOADS, fake, provider, request, settle, rejectsWith, useVertexFake } from './vertex-veo.setup.js';
import { settingsOf } from '../../src/providers/registry.js';

useVertexFake();

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
    assert.deepEqual(sent.json, {
      instances: [{ prompt: 'a lighthouse at dusk, waves crashing' }],
      parameters: { sampleCount: 2, durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', generateAudio: true },
    });
    // the operation id is the operation name, with the sample count the outputs are capped at
    assert.match(
      operation_id,
      /^projects\/test-project\/locations\/europe-west4\/publishers\/google\/models\/veo-3\.1-fast-generate-001\/operations\/[0-9a-f-]+#n=2$/,
    );
    assert.ok(fake.operations.has(operation_id.split('#')[0]!));
  });

  test('seed, the other model, 1080p portrait, and storageUri (one folder per job) when an output bucket is set', async () => {
    const p = provider({ outputGcsUri: 'gs://our-bucket/videos' });
    await p.submit(
      request({ model: 'veo-3.1-generate-001', seed: 42, params: { durationSeconds: 8, resolution: '4k', aspectRatio: '9:16', n: 4 } }),
    );
    const [sent] = fake.requestsTo('predictLongRunning');
    assert.equal(
      sent!.path,
      '/v1/projects/test-project/locations/europe-west4/publishers/google/models/veo-3.1-generate-001:predictLongRunning',
    );
    assert.deepEqual(sent!.json, {
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
    const us = new VertexVeoProvider({
      projectId: 'test-project',
      modelIdFor,
      location: 'us-central1',
      tokenSource: staticTokenSource(TOKEN),
    });
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
    assert.deepEqual((sent!.json as any).parameters, {
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
    assert.ok(!JSON.stringify(sent!.json).includes('someone-else'));
  });

  test('mergeVertexParameters reports what it dropped; no storageUri is sent without an output bucket', () => {
    const { parameters, dropped } = mergeVertexParameters(
      {
        negativePrompt: 'x',
        generate_audio: false,
        storageUri: 'gs://elsewhere/',
        webhookUrl: 'https://example.com',
        __proto__x: 1,
        fps: 24,
      },
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
    assert.deepEqual(sent!.json, { operationName: operation_id.split('#')[0] });
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
    assert.deepEqual(sent!.json, {
      instances: [
        {
          prompt: 'a lighthouse at dusk, waves crashing',
          image: { bytesBase64Encoded: first.toString('base64'), mimeType: 'image/png' },
          lastFrame: { bytesBase64Encoded: last.toString('base64'), mimeType: 'image/jpeg' },
        },
      ],
      parameters: {
        sampleCount: 2,
        durationSeconds: 4,
        resolution: '720p',
        aspectRatio: '16:9',
        generateAudio: false,
        negativePrompt: 'text overlays, watermarks',
      },
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
    assert.equal(
      fake.requestsTo('fetchPredictOperation').length,
      before,
      'a finished inline operation is not read again per output or per poll',
    );
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
    assert.equal(settingsOf(loadConfig({}).providers, vertexVeoDescriptor), null);
    const c = settingsOf(
      loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_ACCESS_TOKEN: 'ya29.secret' }).providers,
      vertexVeoDescriptor,
    )!;
    assert.equal(c.location, 'europe-west4');
    assert.equal(c.apiEndpoint, 'https://europe-west4-aiplatform.googleapis.com');
    assert.equal(c.gcsApiEndpoint, 'https://storage.googleapis.com');
    assert.equal(c.outputGcsUri, undefined);
    assert.equal(c.accessToken, 'ya29.secret');
    assert.ok(!JSON.stringify(c).includes('ya29.secret'));
    assert.equal(
      settingsOf(loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_LOCATION: 'us-central1' }).providers, vertexVeoDescriptor)!
        .apiEndpoint,
      'https://us-central1-aiplatform.googleapis.com',
    );
    assert.throws(
      () => loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_OUTPUT_GCS_URI: 'https://bucket/x' }),
      /VERTEX_OUTPUT_GCS_URI/,
    );
    assert.throws(() => loadConfig({ VERTEX_PROJECT_ID: 'my-project', VERTEX_API_ENDPOINT: 'http://vertex.example.com' }), /https/);
  });
});
