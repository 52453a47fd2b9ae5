// Vertex AI Veo end to end: jobs through the real workflow, the ledger and the HTTP API of a stack
// whose Vertex endpoints are the fake, when Vertex delivers, filters, refuses our credentials or is
// unavailable.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { googleError } from '../fakes/vertex-veo-fake.js';
import { assertAuditHolds, balanceMicro, http as api, newCustomer, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { imageField, jpegImage, pngImage } from '../helpers/images.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';
import { SUBMIT_ATTEMPTS_MAX as SUBMIT_ATTEMPTS_MAX } from '../../workflows/video-job.js';
import { loadVideoJobInputs } from '../../src/video-jobs/images.js';
import { LocalStorage } from '../../src/storage/local.js';
import path from 'node:path';
import { TOKEN, MODEL_PATH, PAYLOADS, fake, useVertexFake } from './vertex-veo.setup.js';

useVertexFake();

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
    fake.fault({
      route: 'fetchPredictOperation',
      status: 429,
      headers: { 'retry-after': '1' },
      body: googleError(429, 'Resource exhausted'),
    });
    const c = await newCustomer(stack, 10);
    const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: {
        prompt: 'a lighthouse at dusk, waves crashing',
        model: 'veo-3.1-fast-generate-001',
        durationSeconds: 4,
        resolution: '720p',
        aspectRatio: '16:9',
        n: 4,
      },
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
    assert.deepEqual(submitted!.json, {
      instances: [{ prompt: 'a lighthouse at dusk, waves crashing' }],
      parameters: {
        sampleCount: 4,
        durationSeconds: 4,
        resolution: '720p',
        aspectRatio: '16:9',
        generateAudio: true,
        storageUri: `gs://our-bucket/videos/${created.body.id}/`,
      },
    });
    assert.equal(fake.requestsTo('download').length, 3);
    await assertAuditHolds(stack);
  });

  test('n=4 cancelled while the 1 video Vertex made is being copied: neither delivered nor charged, refunded in full', async () => {
    fake.scenario = { pollsUntilDone: 1, videos: 1, filtered: 3, payloads: PAYLOADS };
    fake.fault({ route: 'download', delay_ms: 5_000 });
    const c = await newCustomer(stack, 10);
    const created = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: {
        prompt: 'a lighthouse at dusk',
        model: 'veo-3.1-fast-generate-001',
        durationSeconds: 4,
        resolution: '720p',
        aspectRatio: '16:9',
        n: 4,
      },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    for (let i = 0; fake.requestsTo('download').length === 0; i++) {
      assert.ok(i < 300, 'the copy never started');
      await new Promise((res) => setTimeout(res, 50));
    }
    const r = await api(stack.baseUrl, 'POST', `/v2/videos/generations/${created.body.id}/cancel`, { token: c.key });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'failed');
    assert.equal(r.body.error.code, 'cancelled');
    assert.deepEqual(r.body.videos, []);
    assert.deepEqual([r.body.cost_in_euro, r.body.refunded_in_euro], [0, 3.2]);
    const rec = await stack.db.query('SELECT cancel_billed, cancel_billed_units, cancel_answer FROM video_jobs WHERE id = $1', [
      created.body.id,
    ]);
    assert.deepEqual([rec.rows[0].cancel_billed, rec.rows[0].cancel_billed_units], [false, null]);
    assert.match(rec.rows[0].cancel_answer, /had already finished with 1 video\(s\), billed; none delivered or charged/);
    assert.equal(fake.requestsTo('cancel').length, 1);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
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
      const body = sent.json as any;
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
    assert.ok(
      fake.requests.every((r) => !r.path.includes('veo-3.0')),
      'no request names a retired model',
    );
    assert.equal(fake.requestsTo('predictLongRunning')[0]!.path, `${MODEL_PATH}:predictLongRunning`);
    await assertAuditHolds(stack);
  });

  test('a key permitted only the retired id may use its replacement', async () => {
    const c = await newCustomer(stack, 10, ['veo-3.0-fast-generate-001']);
    const models = await api(stack.baseUrl, 'GET', '/v2/models', { token: c.key });
    assert.deepEqual(
      models.body.data.map((m: any) => m.id),
      ['veo-3.1-fast-generate-001'],
    );
    const other = await api(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'p', model: 'veo-3.1-generate-001', durationSeconds: 4 },
    });
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

  test("Vertex refusing our credentials: the job fails, refunded in full, without the provider's text", async () => {
    fake.scenario = { payloads: PAYLOADS };
    fake.fault({
      route: 'predictLongRunning',
      status: 403,
      body: googleError(403, "Permission 'aiplatform.endpoints.predict' denied on resource projects/test-project"),
    });
    const { c, job } = await oneFastJob();
    assert.equal(job.status, 'failed');
    assert.equal(job.error.code, 'provider_permission_denied');
    assert.doesNotMatch(job.error.message, /aiplatform|test-project/);
    assert.equal(job.refunded_in_euro, 0.8);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
    await assertAuditHolds(stack);
  });
  test("Vertex unavailable on every submit: the job submits SUBMIT_ATTEMPTS_MAX times, then fails with the provider's code, refunded in full", async () => {
    fake.scenario = { payloads: PAYLOADS };
    fake.fault({
      route: 'predictLongRunning',
      status: 503,
      body: googleError(503, 'The service is currently unavailable.'),
      times: SUBMIT_ATTEMPTS_MAX + 1,
    });
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
