// The fal adapter against a local fake of fal's queue API written from fal's public documentation
// (test/fakes/fal-fake.ts): what it submits for each model and input, the states it reads from the
// status URL (queue position), the result and the video, cancellation, n > 1 as n requests (all or
// nothing at submission, settled per video), fal's refusals and failures, and callback verification
// (ED25519 over fal's documented message, keys from the JWKS, timestamp tolerance).
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { FAL_ENDPOINTS, FalFake } from '../fakes/fal-fake.js';
import { checkInput } from '../fakes/fake-http.js';
import { FalVideoProvider, type FalOptions } from '../../src/providers/video/fal.js';
import { findVideoModel, videoModelBackendFor, videoModels } from '../../src/models/catalog.js';
import { mappedInput } from '../../src/providers/video/mapped-input.js';
import {
  CallbackRejected,
  OPERATION_ID_CHARS_MAX,
  ProviderError,
  type VideoOperationStatus,
  type VideoSubmission,
} from '../../src/providers/video/types.js';
import { jpegImage, pngImage } from '../helpers/images.js';

let fake: FalFake;
before(async () => {
  fake = await new FalFake().start();
});
after(async () => {
  await fake.stop();
});
beforeEach(() => fake.reset());

function provider(opts: Partial<FalOptions> = {}): FalVideoProvider {
  return new FalVideoProvider({
    key: fake.key,
    queueUrl: fake.url,
    jwksUrl: fake.jwksUrl,
    backendFor: (id) => videoModelBackendFor(id, 'fal'),
    requestTimeoutMs: 2_000,
    ...opts,
  });
}

function request(extra: Partial<VideoSubmission> = {}): VideoSubmission {
  return {
    request_id: '7d0f2a8e-0000-4000-8000-000000000001',
    model: 'veo-3.1-fast-generate-001',
    prompt: 'a lighthouse at dusk',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
    generate_audio: true,
    ...extra,
  };
}

const CALLBACK = 'http://127.0.0.1:9/v2/provider-callbacks/fal/7d0f2a8e-0000-4000-8000-000000000001';

async function settle(p: FalVideoProvider, operation_id: string): Promise<{ status: VideoOperationStatus; seen: VideoOperationStatus[] }> {
  const seen: VideoOperationStatus[] = [];
  for (let i = 0; i < 30; i++) {
    const status = await p.poll(operation_id);
    seen.push(status);
    if (status.state !== 'running') return { status, seen };
  }
  throw new Error('still running');
}

async function rejects(
  promise: Promise<unknown>,
  expected: { code: string; retryable: boolean; message?: RegExp; retry_after_ms?: number },
) {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ProviderError, String(err));
    assert.equal(err.opts.code, expected.code, err.message);
    assert.equal(err.opts.retryable, expected.retryable, err.message);
    if (expected.message) assert.match(err.message, expected.message);
    if (expected.retry_after_ms !== undefined) assert.equal(err.opts.retry_after_ms, expected.retry_after_ms);
    assert.ok(!err.message.includes(fake.key), 'the key is never in a message');
    return true;
  });
}

describe('submit', () => {
  test('POST {queue}/{endpoint}?fal_webhook=<callback> with the key and the mapped input; the operation keeps the URLs fal returned', async () => {
    const p = provider();
    const { operation_id } = await p.submit(request({ negative_prompt: 'blur', seed: 7 }), { callback_url: CALLBACK });
    const [sent] = fake.requestsTo('submit');
    assert.equal(sent!.headers['authorization'], `Key ${fake.key}`);
    const url = new URL(sent!.path, fake.url);
    assert.equal(url.pathname, '/fal-ai/veo3.1/fast');
    assert.equal(url.searchParams.get('fal_webhook'), CALLBACK);
    assert.deepEqual(sent!.json, {
      prompt: 'a lighthouse at dusk',
      duration: '4s',
      resolution: '720p',
      aspect_ratio: '16:9',
      generate_audio: true,
      negative_prompt: 'blur',
      seed: 7,
    });
    const op = JSON.parse(operation_id);
    const [id] = [...fake.submitted.keys()];
    assert.deepEqual(op, {
      fal: [
        {
          request_id: id,
          status_url: `${fake.url}/fal-ai/veo3.1/requests/${id}/status`,
          response_url: `${fake.url}/fal-ai/veo3.1/requests/${id}`,
          cancel_url: `${fake.url}/fal-ai/veo3.1/requests/${id}/cancel`,
        },
      ],
    });
  });

  test('a first frame goes to the image-to-video endpoint, a first and last frame to first-last-frame-to-video, as data: URIs', async () => {
    const p = provider();
    const image = { bytes: pngImage(), mime_type: 'image/png' as const };
    const last = { bytes: jpegImage(), mime_type: 'image/jpeg' as const };
    await p.submit(request({ image }));
    await p.submit(request({ image, last_frame: last }));
    const [i2v, flf] = fake.requestsTo('submit');
    assert.equal(new URL(i2v!.path, fake.url).pathname, '/fal-ai/veo3.1/fast/image-to-video');
    assert.equal((i2v!.json as any).image_url, `data:image/png;base64,${image.bytes.toString('base64')}`);
    assert.equal(new URL(flf!.path, fake.url).pathname, '/fal-ai/veo3.1/fast/first-last-frame-to-video');
    assert.equal((flf!.json as any).first_frame_url, `data:image/png;base64,${image.bytes.toString('base64')}`);
    assert.equal((flf!.json as any).last_frame_url, `data:image/jpeg;base64,${last.bytes.toString('base64')}`);
    assert.equal((flf!.json as any).image_url, undefined);
  });

  test("every fal model of the catalog, for text, a first frame and a last frame where it takes them: an input its endpoint's schema accepts", () => {
    const p = provider();
    const image = { bytes: pngImage(), mime_type: 'image/png' as const };
    let checked = 0;
    for (const m of videoModels()) {
      const entry = m.backends.find((b) => b.backend === 'fal');
      if (!entry) continue;
      for (const resolution of entry.resolutions) {
        for (const durationSeconds of m.durations_seconds) {
          const base = request({
            model: m.id,
            params: { durationSeconds, resolution, aspectRatio: m.aspect_ratios.at(-1)!, n: 1 },
            generate_audio: m.audio.supported ? false : undefined,
          });
          const shapes = [
            base,
            ...(m.inputs.image ? [{ ...base, image }] : []),
            ...(m.inputs.last_frame ? [{ ...base, image, last_frame: image }] : []),
          ];
          for (const req of shapes) {
            const { endpoint, input } = p.buildInput(req);
            assert.ok(FAL_ENDPOINTS[endpoint], `${m.id}: ${endpoint} is an endpoint fal serves`);
            assert.deepEqual(checkInput(input, FAL_ENDPOINTS[endpoint]!), [], `${m.id} ${resolution} ${durationSeconds}s -> ${endpoint}`);
            checked++;
          }
        }
      }
    }
    assert.ok(checked >= 20, `${checked} shapes checked`);
  });

  test('what the map cannot send is refused before any request (final)', async () => {
    const kling = findVideoModel('kling-v2.5-turbo-pro')!;
    assert.throws(
      () =>
        mappedInput(
          request({ model: kling.id, seed: 3, generate_audio: undefined }),
          videoModelBackendFor(kling.id, 'fal')!.input!,
          'fal kling',
        ),
      /does not take a seed/,
    );
    await rejects(provider().submit(request({ model: 'sim-video-1' })), { code: 'model_not_supported', retryable: false });
    assert.equal(fake.requestsTo('submit').length, 0);
  });

  test('n = 3 is three requests, all or nothing: when one is refused the others are cancelled and the refusal thrown', async () => {
    const p = provider();
    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 3 } }));
    assert.equal(JSON.parse(operation_id).fal.length, 3);
    assert.ok(operation_id.length < OPERATION_ID_CHARS_MAX);
    fake.reset();
    fake.fault({ route: 'submit', status: 503, body: { detail: 'runner unavailable', error_type: 'runner_scheduling_failure' } });
    await rejects(p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 3 } })), {
      code: 'provider_unavailable',
      retryable: true,
      message: /runner unavailable/,
    });
    assert.equal(fake.requestsTo('submit').length, 3);
    assert.equal(fake.requestsTo('cancel').length, 2, 'the two accepted requests were cancelled');
    assert.ok([...fake.submitted.values()].every((r) => r.cancelled));
  });

  test('the operation id of n = 4 requests stays under 4 KB', async () => {
    const { operation_id } = await provider().submit(
      request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 4 } }),
    );
    assert.ok(operation_id.length < OPERATION_ID_CHARS_MAX, `${operation_id.length} characters`);
  });
});

describe('poll, result, download', () => {
  test('IN_QUEUE with its queue position, IN_PROGRESS (position 0: no longer queued), then COMPLETED: the video from the response URL, downloaded without the key', async () => {
    fake.defaultPlan = { queue_polls: 3, progress_polls: 2 };
    const p = provider();
    const { operation_id } = await p.submit(request());
    const { status, seen } = await settle(p, operation_id);
    assert.deepEqual(seen.slice(0, -1), [
      { state: 'running', progress: null, queue_position: 2 },
      { state: 'running', progress: null, queue_position: 1 },
      { state: 'running', progress: null, queue_position: 0 },
      { state: 'running', progress: null, queue_position: 0 },
      { state: 'running', progress: null, queue_position: 0 },
    ]);
    assert.equal(status.state, 'succeeded');
    const outputs = status.state === 'succeeded' ? status.outputs : [];
    assert.equal(outputs.length, 1);
    assert.equal(outputs[0]!.content_type, 'video/mp4');
    assert.equal(fake.requestsTo('result').length, 1);
    const bytes = await p.fetchOutput(operation_id, outputs[0]!);
    assert.equal(bytes.subarray(4, 8).toString('latin1'), 'ftyp');
    const [download] = fake.requestsTo('file');
    assert.equal(download!.headers['authorization'], undefined, 'the key is not sent to the file host');
  });

  test("n = 3 with one failed by the model: succeeded with the two videos (the shortfall is the core's to refund); all failed: failed with the model's message", async () => {
    const p = provider();
    const three = { params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 3 } } as const;
    fake.plans = [
      { queue_polls: 0, progress_polls: 0 },
      { queue_polls: 0, progress_polls: 0, outcome: 'error' },
      { queue_polls: 2, progress_polls: 0 },
    ];
    const { operation_id } = await p.submit(request(three));
    const first = await p.poll(operation_id);
    assert.deepEqual(first, { state: 'running', progress: null, queue_position: 1 }, 'running while one is still queued');
    const { status } = await settle(p, operation_id);
    assert.equal(status.state, 'succeeded');
    assert.equal(status.state === 'succeeded' && status.outputs.length, 2);
    fake.reset();
    fake.defaultPlan = { queue_polls: 0, progress_polls: 0, outcome: 'error', error_message: 'flagged by a content checker' };
    const failed = await settle(p, (await p.submit(request(three))).operation_id);
    assert.equal(failed.status.state, 'failed');
    assert.equal(failed.status.state === 'failed' && failed.status.code, 'invalid_request');
    assert.match(failed.status.state === 'failed' ? failed.status.message : '', /prompt: flagged by a content checker/);
  });

  test('cancel: PUT on each cancel URL; the cancelled request then fails; cancelling an ended request is fine', async () => {
    fake.defaultPlan = { queue_polls: 5 };
    const p = provider();
    const { operation_id } = await p.submit(request());
    await p.cancel(operation_id);
    const [cancel] = fake.requestsTo('cancel');
    assert.equal(cancel!.method, 'PUT');
    assert.equal(cancel!.headers['authorization'], `Key ${fake.key}`);
    const status = await p.poll(operation_id);
    assert.equal(status.state, 'failed');
    await p.cancel(operation_id); // 400 ALREADY_COMPLETED: nothing left to cancel
  });

  test('cancel counts per request: one running is billed and charged, one queued free, one completed billed but not charged', async () => {
    const p = provider();
    const two = request({ params: { ...request().params, n: 2 } });
    const RUNNING = { queue_polls: 0, progress_polls: 1_000 };
    const QUEUED = { queue_polls: 1_000 };
    const counts = (a: { billed: boolean; billed_units: number; ended_units: number }) => [a.billed, a.billed_units, a.ended_units];

    fake.plans = [RUNNING, QUEUED];
    const runningAndQueued = await p.cancel((await p.submit(two)).operation_id);
    assert.deepEqual(counts(runningAndQueued), [true, 1, 0]);
    assert.match(runningAndQueued.answer, /^fal: 1 of 2 requests were running \(IN_PROGRESS\) when cancelled and are billed; 0 had ended/);
    assert.doesNotMatch(runningAndQueued.answer, /not billed/);

    fake.reset();
    fake.plans = [RUNNING, RUNNING];
    const { operation_id } = await p.submit(two);
    await fake.finish([...fake.submitted.keys()][0]!);
    assert.deepEqual(counts(await p.cancel(operation_id)), [true, 2, 1]);

    // A request that completes between its status and its cancel (400 ALREADY_COMPLETED) has ended.
    fake.reset();
    fake.plans = [RUNNING];
    const raced = await p.submit(request());
    fake.fault({ route: 'cancel', status: 400, body: { status: 'ALREADY_COMPLETED' } });
    assert.deepEqual(counts(await p.cancel(raced.operation_id)), [false, 1, 1]);

    fake.reset();
    fake.plans = [QUEUED, QUEUED];
    const queued = await p.cancel((await p.submit(two)).operation_id);
    assert.deepEqual(counts(queued), [false, 0, 0]);
    assert.match(queued.answer, /^fal: cancelled while in the queue \(IN_QUEUE\); not billed/);
  });

  test('429 with Retry-After is passing with its delay; 5xx passing; a timeout passing', async () => {
    const p = provider({ requestTimeoutMs: 300 });
    fake.fault({ route: 'submit', status: 429, body: { detail: 'Too many requests' }, headers: { 'retry-after': '7' } });
    await rejects(p.submit(request()), { code: 'rate_limited', retryable: true, retry_after_ms: 7_000, message: /Too many requests/ });
    const { operation_id } = await p.submit(request());
    fake.fault({ route: 'status', status: 502, body: 'bad gateway' });
    await rejects(p.poll(operation_id), { code: 'provider_unavailable', retryable: true });
    fake.fault({ route: 'status', delay_ms: 1_000 });
    await rejects(p.poll(operation_id), { code: 'provider_timeout', retryable: true });
  });

  test("4xx refusals are final: the input (422, with fal's message), the key (401), the endpoint (404)", async () => {
    const wrongMap = provider({
      backendFor: () => ({
        ...videoModelBackendFor('wan-2.5', 'fal')!,
        input: { prompt: 'prompt', duration: { field: 'duration', format: 'integer' } },
      }),
    });
    const wan = {
      model: 'wan-2.5',
      params: { durationSeconds: 5, resolution: '720p', aspectRatio: '16:9', n: 1 },
      generate_audio: undefined,
    } as const;
    await rejects(wrongMap.submit(request(wan)), {
      code: 'invalid_request',
      retryable: false,
      message: /^duration: must be of type string$/,
    });
    await rejects(provider({ key: 'wrong' }).submit(request()), { code: 'provider_unauthenticated', retryable: false });
    const unknown = provider({
      backendFor: () => ({ ...videoModelBackendFor('wan-2.5', 'fal')!, provider_model_id: 'fal-ai/no-such-model' }),
    });
    await rejects(unknown.submit(request(wan)), { code: 'not_found', retryable: false });
  });

  test('an answer that is not what fal documents is invalid_response, retryable (the core bounds the retries)', async () => {
    const p = provider();
    fake.fault({ route: 'submit', status: 200, body: 'this is not JSON' });
    await rejects(p.submit(request()), { code: 'invalid_response', retryable: true, message: /malformed JSON/ });
    fake.fault({
      route: 'submit',
      status: 200,
      body: {
        request_id: 'x',
        status_url: 'https://elsewhere.example/status',
        response_url: 'https://elsewhere.example/r',
        cancel_url: 'https://elsewhere.example/c',
      },
    });
    await rejects(p.submit(request()), { code: 'invalid_response', retryable: true, message: /queue host/ });
    const { operation_id } = await p.submit(request());
    fake.fault({ route: 'status', status: 200, body: { status: 'SOMETHING_NEW' } });
    await rejects(p.poll(operation_id), { code: 'invalid_response', retryable: true, message: /unknown status/ });
    fake.fault({ route: 'result', status: 200, body: { images: [] } });
    fake.plans = [];
    await rejects(settle(p, operation_id), { code: 'invalid_response', retryable: true, message: /no video/ });
  });

  test('an operation id naming another host is refused: the key only goes to the queue host', async () => {
    const forged = JSON.stringify({
      fal: [
        {
          request_id: 'abc',
          status_url: 'https://attacker.example/s',
          response_url: 'https://attacker.example/r',
          cancel_url: 'https://attacker.example/c',
        },
      ],
    });
    await rejects(provider().poll(forged), { code: 'not_found', retryable: false });
    await rejects(provider().poll('not json'), { code: 'not_found', retryable: false });
  });
});

describe('callback verification', () => {
  async function delivered(p = provider()): Promise<{ request_id: string; headers: Record<string, string>; body: Buffer }> {
    fake.defaultPlan = { queue_polls: 0, progress_polls: 0 };
    await p.submit(request(), { callback_url: 'http://127.0.0.1:9/unreachable' });
    const [id] = [...fake.submitted.keys()];
    await fake.finish(id!);
    const [c] = fake.callbacks;
    return { request_id: id!, headers: c!.headers, body: c!.body };
  }

  test('a callback as fal signs it verifies; the JWKS is fetched once and cached', async () => {
    const p = provider();
    const c = await delivered(p);
    await p.verifyCallback({ headers: c.headers, raw_body: c.body });
    await p.verifyCallback({ headers: c.headers, raw_body: c.body });
    assert.equal(fake.requestsTo('jwks').length, 1);
    assert.equal(JSON.parse(c.body.toString()).status, 'OK');
  });

  test('forged: another key, a changed body, another request id, a bad signature, missing headers: CallbackRejected', async () => {
    const p = provider({ jwksMinRefreshMs: 60_000 });
    const c = await delivered(p);
    const reject = (headers: Record<string, string>, body = c.body) =>
      assert.rejects(p.verifyCallback({ headers, raw_body: body }), CallbackRejected);
    const { privateKey } = generateKeyPairSync('ed25519');
    await reject(fake.signCallback(c.request_id, c.body, { key: privateKey }));
    await reject(c.headers, Buffer.from(c.body.toString().replace('"OK"', '"ERROR"')));
    await reject({ ...c.headers, 'x-fal-webhook-request-id': 'another-request' });
    await reject({ ...c.headers, 'x-fal-webhook-signature': '00'.repeat(64) });
    await reject({ ...c.headers, 'x-fal-webhook-signature': 'zz' });
    const { 'x-fal-webhook-signature': _signature, ...unsigned } = c.headers;
    await reject(unsigned);
    // forged callbacks fetch the keys again at most once per jwksMinRefreshMs
    assert.ok(fake.requestsTo('jwks').length <= 2, `${fake.requestsTo('jwks').length} JWKS fetches`);
  });

  test('a timestamp more than 5 minutes away (a stale replay) is rejected; a replay within it verifies (it only nudges a poll)', async () => {
    const now = Date.now();
    const c = await delivered();
    const stale = fake.signCallback(c.request_id, c.body, { timestamp_s: Math.floor(now / 1000) - 301 });
    await assert.rejects(provider().verifyCallback({ headers: stale, raw_body: c.body }), /more than 300 s/);
    const future = fake.signCallback(c.request_id, c.body, { timestamp_s: Math.floor(now / 1000) + 301 });
    await assert.rejects(provider().verifyCallback({ headers: future, raw_body: c.body }), CallbackRejected);
    await provider({ now_ms: () => now + 290_000 }).verifyCallback({ headers: c.headers, raw_body: c.body });
    await assert.rejects(
      provider({ now_ms: () => now + 310_000 }).verifyCallback({ headers: c.headers, raw_body: c.body }),
      CallbackRejected,
    );
  });

  test('fal rotates its key: the cached keys fail, the JWKS is fetched again, the callback verifies', async () => {
    const p = provider({ jwksMinRefreshMs: 0 });
    const first = await delivered(p);
    await p.verifyCallback({ headers: first.headers, raw_body: first.body });
    fake.rotateKey(false);
    const body = Buffer.from('{"request_id":"r","status":"OK","payload":{}}');
    await p.verifyCallback({ headers: fake.signCallback('r', body), raw_body: body });
    assert.equal(fake.requestsTo('jwks').length, 2);
  });

  test("fal's JWKS unreachable: a ProviderError (retryable: answered 503, fal delivers again), not a rejection", async () => {
    const c = await delivered();
    fake.fault({ route: 'jwks', status: 503, body: {} });
    await assert.rejects(
      provider().verifyCallback({ headers: c.headers, raw_body: c.body }),
      (err: unknown) => err instanceof ProviderError && err.opts.retryable,
    );
  });
});
