// The Replicate adapter against a local fake of Replicate's HTTP API written from Replicate's public
// documentation (test/fakes/replicate-fake.ts): what it creates for each model and input (with the job's
// deadline as Cancel-After), the states it reads (progress from the logs), the output and its download,
// cancellation, n > 1 as n predictions, Replicate's refusals and failures, and callback verification
// (Standard Webhooks with the configured or fetched signing secret).
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { REPLICATE_MODELS, REPLICATE_VERSIONS, ReplicateFake, parseCancelAfter } from '../fakes/replicate-fake.js';
import { checkInput } from '../fakes/fake-http.js';
import { cancelAfterValue, progressFromLogs, ReplicateVideoProvider, type ReplicateOptions } from '../../src/providers/video/replicate.js';
import { videoModelBackendFor, videoModels } from '../../src/models/catalog.js';
import { CallbackRejected, ProviderError, type VideoOperationStatus, type VideoSubmission } from '../../src/providers/video/types.js';
import { pngImage, pngOfSize } from '../helpers/images.js';
import { combineStatuses } from '../../src/providers/video/mapped-input.js';

let fake: ReplicateFake;
before(async () => {
  fake = await new ReplicateFake().start();
});
after(async () => {
  await fake.stop();
});
beforeEach(() => fake.reset());

function provider(opts: Partial<ReplicateOptions> = {}): ReplicateVideoProvider {
  return new ReplicateVideoProvider({
    token: fake.token,
    apiUrl: fake.url,
    backendFor: (id) => videoModelBackendFor(id, 'replicate'),
    requestTimeoutMs: 2_000,
    ...opts,
  });
}

function request(extra: Partial<VideoSubmission> = {}): VideoSubmission {
  return {
    request_id: '7d0f2a8e-0000-4000-8000-000000000002',
    model: 'veo-3.1-fast-generate-001',
    prompt: 'a lighthouse at dusk',
    params: { durationSeconds: 6, resolution: '1080p', aspectRatio: '9:16', n: 1 },
    generate_audio: false,
    ...extra,
  };
}

const N = (n: number) => ({ params: { durationSeconds: 6, resolution: '1080p', aspectRatio: '9:16', n } }) as const;

async function settle(p: ReplicateVideoProvider, operation_id: string) {
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
    assert.ok(!err.message.includes(fake.token), 'the token is never in a message');
    return true;
  });
}

describe('create', () => {
  test('POST /v1/models/{owner}/{name}/predictions with the token, the mapped input, the webhook for "completed" and the deadline as Cancel-After', async () => {
    const p = provider();
    const deadline_at_ms = Date.now() + 29 * 60_000 + 30_000;
    const image = { bytes: pngImage(), mime_type: 'image/png' as const };
    const { operation_id } = await p.submit(request({ image, last_frame: image, seed: 3, negative_prompt: 'blur', deadline_at_ms }), {
      callback_url: 'https://api.example/cb',
    });
    const [sent] = fake.requestsTo('create');
    assert.equal(sent!.path, '/v1/models/google/veo-3.1-fast/predictions');
    assert.equal(sent!.headers['authorization'], `Bearer ${fake.token}`);
    const cancelAfter = String(sent!.headers['cancel-after']);
    assert.match(cancelAfter, /^29m(29|30)s$/);
    assert.deepEqual(sent!.json, {
      input: {
        prompt: 'a lighthouse at dusk',
        duration: 6,
        resolution: '1080p',
        aspect_ratio: '9:16',
        image: `data:image/png;base64,${image.bytes.toString('base64')}`,
        last_frame: `data:image/png;base64,${image.bytes.toString('base64')}`,
        generate_audio: false,
        negative_prompt: 'blur',
        seed: 3,
      },
      webhook: 'https://api.example/cb',
      webhook_events_filter: ['completed'],
    });
    assert.equal(operation_id, [...fake.predictions.keys()][0]);
  });

  test('frames above 256 KB go as files (POST /v1/files, once per submission), their URLs in the input; every prediction created is in the operation', async () => {
    const p = provider();
    const big = { bytes: pngOfSize(7_500_000), mime_type: 'image/png' as const };
    const last = { bytes: pngOfSize(7_400_000), mime_type: 'image/png' as const };
    const { operation_id } = await p.submit(
      request({ ...N(2), image: big, last_frame: last, request_id: '7d0f2a8e-0000-4000-8000-0000000000aa' }),
    );
    const uploads = fake.requestsTo('upload');
    assert.equal(uploads.length, 2, 'each frame uploaded once, whatever n');
    const files = [...fake.files.values()];
    assert.deepEqual(files.map((f) => [f.bytes.length, f.content_type, f.metadata]).sort(), [
      [last.bytes.length, 'image/png', { job_id: '7d0f2a8e-0000-4000-8000-0000000000aa', input: 'last_frame' }],
      [big.bytes.length, 'image/png', { job_id: '7d0f2a8e-0000-4000-8000-0000000000aa', input: 'image' }],
    ]);
    const creates = fake.requestsTo('create');
    assert.equal(creates.length, 2);
    for (const c of creates) {
      const input = (c.json as any).input;
      assert.equal(input.image, `${fake.url}/v1/files/${files.find((f) => (f.metadata as any).input === 'image')!.id}`);
      assert.equal(input.last_frame, `${fake.url}/v1/files/${files.find((f) => (f.metadata as any).input === 'last_frame')!.id}`);
      assert.ok(c.raw.length < 10_000, `a create of ${c.raw.length} bytes carries no image`);
    }
    assert.deepEqual(
      operation_id.split(',').sort(),
      [...fake.predictions.keys()].sort(),
      'every prediction Replicate created is in the operation',
    );
    // A frame of at most 256 KB stays a data URL (Replicate's advice), as the first test shows.
    fake.reset();
    await p.submit(request({ image: { bytes: pngOfSize(200_000), mime_type: 'image/png' } }));
    assert.equal(fake.requestsTo('upload').length, 0);
    assert.match((fake.requestsTo('create')[0]!.json as any).input.image, /^data:image\/png;base64,/);
  });

  test('a create answer larger than any cap (the input echoed, before or after the id) still names its prediction', async () => {
    const p = provider({ requestTimeoutMs: 30_000 }); // 20 MiB through loopback on a busy machine
    const echoed = {
      image: `data:image/png;base64,${'A'.repeat(20 * 1024 * 1024)}`,
      prompt: 'a "quoted" prompt } with { braces ] and \\ "id": "no"',
    };
    const id = 'q9ykd2m1hxrj00cqnx8r3sk4dw';
    fake.fault({ route: 'create', status: 201, body: { id, model: 'google/veo-3.1-fast', input: echoed, status: 'starting' } });
    assert.equal((await p.submit(request())).operation_id, id);
    fake.fault({
      route: 'create',
      status: 201,
      body: { input: echoed, logs: '', status: 'starting', urls: { get: 'x', id: 'not-this-one' }, id },
    });
    assert.equal((await p.submit(request())).operation_id, id);
  });

  test('Cancel-After durations: at least 5 s, in hours, minutes and seconds', () => {
    assert.equal(cancelAfterValue(1_000), '5s');
    assert.equal(cancelAfterValue(-50_000), '5s');
    assert.equal(cancelAfterValue(90_000), '1m30s');
    assert.equal(cancelAfterValue(3_600_000), '1h');
    assert.equal(cancelAfterValue(5_400_500), '1h30m1s');
    for (const ms of [1_000, 90_000, 3_600_000, 5_400_500]) assert.ok(parseCancelAfter(cancelAfterValue(ms))! >= 5);
  });

  test('a pinned version goes to POST /v1/predictions {"version"}', async () => {
    const [version] = Object.entries(REPLICATE_VERSIONS).find(([, m]) => m === 'kwaivgi/kling-v2.5-turbo-pro')!;
    const p = provider({ backendFor: (id) => ({ ...videoModelBackendFor(id, 'replicate')!, version }) });
    await p.submit(
      request({
        model: 'kling-v2.5-turbo-pro',
        params: { durationSeconds: 10, resolution: '1080p', aspectRatio: '16:9', n: 1 },
        generate_audio: undefined,
      }),
    );
    const [sent] = fake.requestsTo('create');
    assert.equal(sent!.path, '/v1/predictions');
    assert.equal((sent!.json as any).version, version);
    assert.deepEqual((sent!.json as any).input, { prompt: 'a lighthouse at dusk', duration: 10, aspect_ratio: '16:9' });
  });

  test('every Replicate model of the catalog, for text, a first frame and a last frame where it takes them: an input its schema accepts', () => {
    const p = provider();
    const image = { bytes: pngImage(), mime_type: 'image/png' as const };
    let checked = 0;
    for (const m of videoModels()) {
      const entry = m.backends.find((b) => b.backend === 'replicate');
      if (!entry) continue;
      for (const resolution of entry.resolutions) {
        for (const durationSeconds of m.durations_seconds) {
          const base = request({
            model: m.id,
            params: { durationSeconds, resolution, aspectRatio: m.aspect_ratios[0]!, n: 1 },
            generate_audio: m.audio.supported ? true : undefined,
          });
          const shapes = [
            base,
            ...(m.inputs.image ? [{ ...base, image }] : []),
            ...(m.inputs.last_frame ? [{ ...base, image, last_frame: image }] : []),
          ];
          for (const req of shapes) {
            const { url, body } = p.buildRequest(req);
            const model = new URL(url).pathname.split('/').slice(3, 5).join('/');
            assert.ok(REPLICATE_MODELS[model], `${m.id}: ${model} is a model Replicate serves`);
            assert.deepEqual(checkInput(body['input'], REPLICATE_MODELS[model]!), [], `${m.id} ${resolution} ${durationSeconds}s`);
            checked++;
          }
        }
      }
    }
    assert.ok(checked >= 15, `${checked} shapes checked`);
  });

  test('n = 3 is three predictions, all or nothing: one refused cancels the others', async () => {
    const p = provider();
    const { operation_id } = await p.submit(request(N(3)));
    assert.equal(operation_id.split(',').length, 3);
    fake.reset();
    fake.fault({
      route: 'create',
      status: 429,
      body: { title: 'Too many requests', detail: 'Request was throttled. Expected available in 3 seconds.', status: 429 },
      headers: { 'retry-after': '3' },
    });
    await rejects(p.submit(request(N(3))), { code: 'rate_limited', retryable: true, retry_after_ms: 3_000, message: /throttled/ });
    assert.equal(fake.requestsTo('cancel').length, 2);
    assert.ok([...fake.predictions.values()].every((x) => x.status === 'aborted' || x.status === 'canceled'));
  });
});

describe('poll, output, download', () => {
  test('starting, processing with progress from the logs, succeeded: the output URL, downloaded without the token', async () => {
    fake.defaultPlan = { starting_polls: 1, processing_polls: 3 };
    const p = provider();
    const { operation_id } = await p.submit(request());
    const { status, seen } = await settle(p, operation_id);
    assert.deepEqual(
      seen.slice(0, -1).map((s) => (s.state === 'running' ? s.progress : 'ended')),
      [null, 25, 50, 75],
    );
    assert.equal(status.state, 'succeeded');
    const outputs = status.state === 'succeeded' ? status.outputs : [];
    const bytes = await p.fetchOutput(operation_id, outputs[0]!);
    assert.equal(bytes.subarray(4, 8).toString('latin1'), 'ftyp');
    assert.equal(fake.requestsTo('file')[0]!.headers['authorization'], undefined);
  });

  test("a job's status from its requests': progress the mean (an ended request 100) when all running report one, the largest queue position, outputs of those that succeeded", () => {
    const video = (ref: string) => ({ ref, content_type: 'video/mp4' });
    assert.deepEqual(
      combineStatuses([
        { state: 'running', progress: 50 },
        { state: 'succeeded', outputs: [video('a')] },
      ]),
      { state: 'running', progress: 75, queue_position: null },
    );
    assert.deepEqual(
      combineStatuses([
        { state: 'running', progress: null },
        { state: 'running', progress: 20 },
      ]),
      { state: 'running', progress: null, queue_position: null },
    );
    assert.deepEqual(
      combineStatuses([
        { state: 'running', queue_position: 3 },
        { state: 'running', queue_position: 7 },
        { state: 'failed', code: 'x', message: 'm' },
      ]),
      { state: 'running', progress: null, queue_position: 7 },
    );
    assert.deepEqual(
      combineStatuses([
        { state: 'succeeded', outputs: [video('a')] },
        { state: 'failed', code: 'x', message: 'm' },
        { state: 'succeeded', outputs: [video('b')] },
      ]),
      { state: 'succeeded', outputs: [video('a'), video('b')] },
    );
    assert.deepEqual(
      combineStatuses([
        { state: 'failed', code: 'first', message: 'm1' },
        { state: 'failed', code: 'second', message: 'm2' },
      ]),
      { state: 'failed', code: 'first', message: 'm1' },
    );
  });

  test('progress from logs: the last progress bar, null without one', () => {
    assert.equal(progressFromLogs(''), null);
    assert.equal(progressFromLogs('loading weights\nstarting'), null);
    assert.equal(progressFromLogs(' 10%|█         | 5/50 [00:01<00:09]\n 40%|████      | 20/50 [00:04<00:06]\nsaving'), 40);
  });

  test('n = 3 with one failed: succeeded with two (a shortfall); all failed: failed with the error; canceled and aborted', async () => {
    const p = provider();
    fake.plans = [
      { starting_polls: 0, processing_polls: 0 },
      { starting_polls: 0, processing_polls: 0, outcome: 'failed', error: 'NSFW content detected' },
      { starting_polls: 0, processing_polls: 0 },
    ];
    const { status } = await settle(p, (await p.submit(request(N(3)))).operation_id);
    assert.equal(status.state === 'succeeded' && status.outputs.length, 2);
    fake.reset();
    fake.defaultPlan = { starting_polls: 0, processing_polls: 0, outcome: 'failed', error: 'NSFW content detected' };
    const failed = (await settle(p, (await p.submit(request(N(2)))).operation_id)).status;
    assert.deepEqual(failed, { state: 'failed', code: 'generation_failed', message: 'NSFW content detected' });
    fake.reset();
    fake.defaultPlan = { starting_polls: 10 };
    const { operation_id } = await p.submit(request());
    await p.cancel(operation_id);
    assert.equal(fake.requestsTo('cancel')[0]!.path, `/v1/predictions/${operation_id}/cancel`);
    assert.deepEqual(await p.poll(operation_id), { state: 'failed', code: 'cancelled', message: 'the prediction was cancelled' });
    await p.cancel(operation_id); // an ended prediction: answered unchanged
    const aborted = await p.submit(request({ deadline_at_ms: Date.now() + 5_000 }));
    await fake.finish(aborted.operation_id, 'failed');
    fake.predictions.get(aborted.operation_id)!.status = 'aborted';
    assert.equal(((await p.poll(aborted.operation_id)) as { code: string }).code, 'deadline_exceeded');
  });

  test('cancel counts per prediction: one processing is billed and charged, one starting free, one succeeded billed but not charged', async () => {
    const p = provider();
    const PROCESSING = { starting_polls: 0, processing_polls: 1_000 };
    const STARTING = { starting_polls: 1_000 };
    const counts = (a: { billed: boolean; billed_units: number; ended_units: number }) => [a.billed, a.billed_units, a.ended_units];

    fake.plans = [PROCESSING, STARTING];
    const processingAndStarting = await p.cancel((await p.submit(request(N(2)))).operation_id);
    assert.deepEqual(counts(processingAndStarting), [true, 1, 0]);
    assert.match(processingAndStarting.answer, /^Replicate: 1 of 2 requests were running \(processing\) when cancelled and are billed/);

    fake.reset();
    fake.plans = [PROCESSING, PROCESSING];
    const { operation_id } = await p.submit(request(N(2)));
    await fake.finish(operation_id.split(',')[0]!);
    assert.deepEqual(counts(await p.cancel(operation_id)), [true, 2, 1]);

    fake.reset();
    fake.plans = [STARTING, STARTING];
    const starting = await p.cancel((await p.submit(request(N(2)))).operation_id);
    assert.deepEqual(counts(starting), [false, 0, 0]);
    assert.match(starting.answer, /not billed/);
  });

  test('outputs deleted after an hour (data_removed): the poll says so and the download is final', async () => {
    fake.defaultPlan = { starting_polls: 0, processing_polls: 0 };
    const p = provider();
    const { operation_id } = await p.submit(request());
    const { status } = await settle(p, operation_id);
    fake.expire();
    await rejects(p.fetchOutput(operation_id, (status as { outputs: { ref: string; content_type: string }[] }).outputs[0]!), {
      code: 'output_expired',
      retryable: false,
    });
    assert.deepEqual(await p.poll(operation_id), {
      state: 'failed',
      code: 'output_expired',
      message: 'Replicate deleted the outputs of this prediction (an hour after it ended)',
    });
  });

  test("4xx refusals are final: the input (422 with Replicate's words), the token (401), the model (404); 5xx passing", async () => {
    const wrongMap = provider({
      backendFor: () => ({
        ...videoModelBackendFor('veo-3.1-generate-001', 'replicate')!,
        input: { prompt: 'prompt', duration: { field: 'duration', format: 'seconds_suffix' } },
      }),
    });
    await rejects(wrongMap.submit(request({ generate_audio: undefined })), {
      code: 'invalid_request',
      retryable: false,
      message: /duration: duration must be of type integer/,
    });
    await rejects(provider({ token: 'r8_wrong' }).submit(request()), {
      code: 'provider_unauthenticated',
      retryable: false,
      message: /valid authentication token/,
    });
    const unknown = provider({
      backendFor: () => ({ ...videoModelBackendFor('veo-3.1-generate-001', 'replicate')!, provider_model_id: 'google/veo-9' }),
    });
    await rejects(unknown.submit(request()), { code: 'not_found', retryable: false });
    const { operation_id } = await provider().submit(request());
    fake.fault({ route: 'get', status: 500, body: { title: 'Internal server error', status: 500 } });
    await rejects(provider().poll(operation_id), { code: 'provider_unavailable', retryable: true });
  });

  test('answers that are not what Replicate documents: invalid_response, retryable', async () => {
    const p = provider();
    fake.fault({ route: 'create', status: 201, body: { status: 'starting' } });
    await rejects(p.submit(request()), { code: 'invalid_response', retryable: true, message: /no prediction id/ });
    const { operation_id } = await p.submit(request());
    fake.fault({ route: 'get', status: 200, body: '<html>' });
    await rejects(p.poll(operation_id), { code: 'invalid_response', retryable: true });
    fake.fault({ route: 'get', status: 200, body: { status: 'succeeded', output: 42 } });
    await rejects(p.poll(operation_id), { code: 'invalid_response', retryable: true, message: /no video URL/ });
    await rejects(p.poll('../../admin'), { code: 'not_found', retryable: false });
  });
});

describe('callback verification (Standard Webhooks)', () => {
  async function delivered(): Promise<{ id: string; headers: Record<string, string>; body: Buffer }> {
    fake.defaultPlan = { starting_polls: 0, processing_polls: 0 };
    const { operation_id } = await provider().submit(request(), { callback_url: 'http://127.0.0.1:9/unreachable' });
    await fake.finish(operation_id);
    const [c] = fake.callbacks;
    return { id: operation_id, headers: c!.headers, body: c!.body };
  }

  test('signed by Replicate: verifies with the secret fetched from GET /v1/webhooks/default/secret (once, cached) or with REPLICATE_WEBHOOK_SECRET', async () => {
    const c = await delivered();
    assert.equal(JSON.parse(c.body.toString()).status, 'succeeded');
    const p = provider();
    await p.verifyCallback({ headers: c.headers, raw_body: c.body });
    await p.verifyCallback({ headers: c.headers, raw_body: c.body });
    assert.equal(fake.requestsTo('secret').length, 1);
    assert.equal(fake.requestsTo('secret')[0]!.headers['authorization'], `Bearer ${fake.token}`);
    await provider({ webhookSecret: fake.secret }).verifyCallback({ headers: c.headers, raw_body: c.body });
    assert.equal(fake.requestsTo('secret').length, 1, 'a configured secret is not fetched');
  });

  test('forged: another secret, a changed body, a bad signature, missing headers: CallbackRejected', async () => {
    const c = await delivered();
    const p = provider({ webhookSecret: fake.secret });
    const reject = (headers: Record<string, string>, body = c.body) =>
      assert.rejects(p.verifyCallback({ headers, raw_body: body }), CallbackRejected);
    await reject(fake.signCallback(c.body, { secret: `whsec_${Buffer.from('another-secret-of-someone-else').toString('base64')}` }));
    await reject(c.headers, Buffer.from(c.body.toString().replace('succeeded', 'failed')));
    await reject({ ...c.headers, 'webhook-signature': 'v1,AAAA' });
    await reject({ ...c.headers, 'webhook-id': 'msg_other' });
    const { 'webhook-signature': _s, ...unsigned } = c.headers;
    await reject(unsigned);
  });

  test('a timestamp more than 5 minutes away is rejected (stale replay); a replay within it verifies (it only nudges a poll)', async () => {
    const c = await delivered();
    const p = provider({ webhookSecret: fake.secret });
    await assert.rejects(
      p.verifyCallback({ headers: fake.signCallback(c.body, { at: new Date(Date.now() - 301_000) }), raw_body: c.body }),
      CallbackRejected,
    );
    await assert.rejects(
      p.verifyCallback({ headers: fake.signCallback(c.body, { at: new Date(Date.now() + 301_000) }), raw_body: c.body }),
      CallbackRejected,
    );
    await p.verifyCallback({ headers: c.headers, raw_body: c.body });
    await p.verifyCallback({ headers: c.headers, raw_body: c.body });
  });

  test('the secret rotated at Replicate: fetched again (at most once a minute) and the callback verifies; the secret unreachable: a ProviderError', async () => {
    const first = await delivered();
    const p = provider({ secretMinRefreshMs: 0 });
    await p.verifyCallback({ headers: first.headers, raw_body: first.body });
    fake.secret = `whsec_${Buffer.from('replicate-fake-signing-secret-0002').toString('base64')}`;
    const body = Buffer.from('{"id":"abc","status":"succeeded"}');
    await p.verifyCallback({ headers: fake.signCallback(body), raw_body: body });
    assert.equal(fake.requestsTo('secret').length, 2);
    fake.fault({ route: 'secret', status: 503, body: {} });
    await assert.rejects(
      provider().verifyCallback({ headers: fake.signCallback(body), raw_body: body }),
      (err: unknown) => err instanceof ProviderError && err.opts.retryable,
    );
  });
});
