// Image to video, audio on or off and negative prompts through the real API, worker, Temporal and
// PostgreSQL, on the simulated provider: what each model's catalog entry supports is accepted and
// reaches the provider intact (the simulator records it), the images are kept with the job, prices
// follow the audio setting, and every bad input is a 4xx naming the field that charges nothing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { IMAGE_BYTES_MAX, NEGATIVE_PROMPT_CHARS_MAX } from '../../src/video-jobs/schemas.js';
import { VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX } from '../../src/video-jobs/schemas.js';
import { LARGE_BODIES_PER_KEY_MAX } from '../../src/http/in-flight.js';
import { assertAuditHolds, balanceMicro, http as api, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { imageField, jpegImage, pngImage, WEBP_IMAGE } from '../helpers/images.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const create = (key: string, json: unknown, headers?: Record<string, string>) =>
  api(stack.baseUrl, 'POST', '/v2/videos/generations', { token: key, json, ...(headers ? { headers } : {}) });

async function simulatorRequest(jobId: string): Promise<any> {
  const r = await stack.db.query('SELECT request FROM simulator.video_operations WHERE request_id = $1', [jobId]);
  return r.rows[0]?.request;
}

async function storedInputs(jobId: string): Promise<number> {
  const r = await stack.db.query('SELECT count(*)::int AS n FROM video_job_inputs WHERE job_id = $1', [jobId]);
  return r.rows[0].n;
}

describe('accepted inputs reach the provider', () => {
  test('sim-video-1: a WebP first frame, a PNG last frame, audio off, a negative prompt; priced without audio', async () => {
    const c = await newCustomer(stack, 10);
    const last = pngImage(96, 54, 3);
    const created = await create(c.key, {
      ...simJob(),
      image: imageField(WEBP_IMAGE, 'image/webp'),
      lastFrame: imageField(last, 'image/png'),
      generateAudio: false,
      negativePrompt: '  blurry, low contrast  ',
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    // 2 videos x 4 s x 0.04 EUR/s (sim-video-1 at 720p without audio)
    assert.equal(created.body.estimated_cost_in_euro, 0.32);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 320_000);
    const job = await waitForJob(stack, c.key, created.body.id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.cost_in_euro, 0.32);

    const seen = await simulatorRequest(created.body.id);
    assert.equal(seen.generate_audio, false);
    assert.equal(seen.negative_prompt, 'blurry, low contrast');
    assert.deepEqual(seen.image, { mime_type: 'image/webp', bytes: WEBP_IMAGE.length, sha256: sha256(WEBP_IMAGE) });
    assert.deepEqual(seen.last_frame, { mime_type: 'image/png', bytes: last.length, sha256: sha256(last) });
    assert.equal(await storedInputs(created.body.id), 1);
    await assertAuditHolds(stack);
  });

  test('audio on is the default, and the price with audio; a job without images stores none', async () => {
    const c = await newCustomer(stack, 10);
    const implicit = await create(c.key, simJob());
    const explicit = await create(c.key, { ...simJob(), generateAudio: true });
    for (const r of [implicit, explicit]) {
      assert.equal(r.status, 202, JSON.stringify(r.body));
      assert.equal(r.body.estimated_cost_in_euro, 0.4); // 2 x 4 s x 0.05 EUR/s
      await waitForJob(stack, c.key, r.body.id);
      assert.equal((await simulatorRequest(r.body.id)).generate_audio, true);
      assert.equal(await storedInputs(r.body.id), 0);
    }
    await assertAuditHolds(stack);
  });

  test('a Veo 3.1 model on the simulator (no Vertex configured) takes a first frame and 4k', async () => {
    const c = await newCustomer(stack, 20);
    const frame = jpegImage(5);
    const created = await create(c.key, {
      prompt: 'a lighthouse',
      model: 'veo-3.1-generate-001',
      durationSeconds: 4,
      resolution: '4k',
      image: imageField(frame, 'image/jpeg'),
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal(created.body.estimated_cost_in_euro, 3.2); // 4 s x 0.80 EUR/s (4k, with audio)
    assert.equal((await waitForJob(stack, c.key, created.body.id, 60_000)).status, 'succeeded');
    const seen = await simulatorRequest(created.body.id);
    assert.equal(seen.resolution, '4k');
    assert.equal(seen.image.sha256, sha256(frame));
    await assertAuditHolds(stack);
  });

  test('two images at the size limit fit the request body limit', async () => {
    const c = await newCustomer(stack, 10);
    const atLimit = (seed: number) => {
      const png = pngImage(16, 16, seed);
      return Buffer.concat([png, Buffer.alloc(IMAGE_BYTES_MAX - png.length, seed)]);
    };
    const first = atLimit(1);
    const last = atLimit(2);
    const created = await create(c.key, {
      ...simJob(),
      n: 1,
      image: imageField(first, 'image/png'),
      lastFrame: imageField(last, 'image/png'),
    });
    assert.equal(created.status, 202, JSON.stringify(created.body).slice(0, 500));
    await waitForJob(stack, c.key, created.body.id);
    const seen = await simulatorRequest(created.body.id);
    assert.equal(seen.image.bytes, IMAGE_BYTES_MAX);
    assert.equal(seen.last_frame.sha256, sha256(last));
    await assertAuditHolds(stack);
  });

  test('Idempotency-Key: the same images are the same job; other images under the same key are a 409', async () => {
    const c = await newCustomer(stack, 10);
    const headers = { 'Idempotency-Key': 'frames-1' };
    const body = { ...simJob(), image: imageField(pngImage(32, 32, 1), 'image/png') };
    const first = await create(c.key, body, headers);
    const again = await create(c.key, body, headers);
    assert.equal(first.status, 202);
    assert.equal(again.status, 202);
    assert.equal(again.body.id, first.body.id);
    const other = await create(c.key, { ...body, image: imageField(pngImage(32, 32, 2), 'image/png') }, headers);
    assert.equal(other.status, 409, JSON.stringify(other.body));
    await waitForJob(stack, c.key, first.body.id);
    assert.equal(
      (await simulatorRequest(first.body.id)).image.sha256,
      sha256(pngImage(32, 32, 1)),
      "the first request's image is the job's",
    );
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 400_000, 'charged once');
    await assertAuditHolds(stack);
  });
});

describe('refused inputs: a 4xx naming the field, nothing charged or stored', () => {
  let customer: { workspaceId: string; key: string };
  before(async () => {
    customer = await newCustomer(stack, 10);
  });

  const png = imageField(pngImage(), 'image/png');
  const cases: [string, Record<string, unknown>, number, string, string?][] = [
    ['image bytes not base64', { image: { bytesBase64Encoded: 'not base64!', mimeType: 'image/png' } }, 400, 'image.bytesBase64Encoded'],
    ['image bytes empty', { image: { bytesBase64Encoded: '', mimeType: 'image/png' } }, 400, 'image.bytesBase64Encoded'],
    [
      'image bytes that are not an image',
      { image: imageField(Buffer.from('GIF89a, or rather plain text'), 'image/png') },
      400,
      'image.bytesBase64Encoded',
      'unsupported_image',
    ],
    [
      'a GIF image',
      { image: imageField(Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1'), 'image/gif') },
      400,
      'image.mimeType',
    ],
    ['a declared type other than the content', { image: imageField(jpegImage(), 'image/png') }, 400, 'image.mimeType'],
    ['no mimeType', { image: { bytesBase64Encoded: png.bytesBase64Encoded } }, 400, 'image.mimeType'],
    ['an unknown image field', { image: { ...png, gcsUri: 'gs://b/o.png' } }, 400, 'image.gcsUri'],
    ['an image that is not an object', { image: 'data:image/png;base64,xyz' }, 400, 'image'],
    ['a last frame without a first frame', { lastFrame: png }, 400, 'lastFrame'],
    [
      'a last frame that is not an image',
      { image: png, lastFrame: imageField(Buffer.from('nope'), 'image/jpeg') },
      400,
      'lastFrame.bytesBase64Encoded',
    ],
    [
      'a WebP image for a Veo model (JPEG and PNG only)',
      { model: 'veo-3.1-fast-generate-001', image: imageField(WEBP_IMAGE, 'image/webp') },
      400,
      'image.mimeType',
      'unsupported_image',
    ],
    ['generateAudio not a boolean', { generateAudio: 'yes' }, 400, 'generateAudio'],
    ['an empty negative prompt', { negativePrompt: '   ' }, 400, 'negativePrompt'],
    ['a negative prompt too long', { negativePrompt: 'x'.repeat(NEGATIVE_PROMPT_CHARS_MAX + 1) }, 400, 'negativePrompt'],
    ['4k for a model without it', { resolution: '4k' }, 400, 'resolution'],
    [
      'an image above the size limit',
      { image: imageField(Buffer.concat([pngImage(), Buffer.alloc(IMAGE_BYTES_MAX)]), 'image/png') },
      413,
      'image.bytesBase64Encoded',
      'image_too_large',
    ],
    [
      'a last frame above the size limit',
      { image: png, lastFrame: imageField(Buffer.concat([pngImage(), Buffer.alloc(IMAGE_BYTES_MAX)]), 'image/png') },
      413,
      'lastFrame.bytesBase64Encoded',
      'image_too_large',
    ],
  ];
  for (const [name, extra, status, param, code] of cases) {
    test(name, async () => {
      const r = await create(customer.key, { ...simJob(), ...extra });
      assert.equal(r.status, status, JSON.stringify(r.body).slice(0, 300));
      assert.deepEqual(Object.keys(r.body.error).sort(), ['code', 'message', 'param', 'type']);
      assert.equal(r.body.error.param, param);
      if (code) assert.equal(r.body.error.code, code);
    });
  }

  test('nothing above was charged, started or stored', async () => {
    assert.equal(await balanceMicro(stack, customer.workspaceId), 10_000_000);
    const stored = await stack.db.query('SELECT count(*)::int AS n FROM video_job_inputs WHERE workspace_id = $1', [customer.workspaceId]);
    assert.equal(stored.rows[0].n, 0);
    await assertAuditHolds(stack);
  });
});

test('large bodies in progress at once are limited per process: beyond, 503 server_busy; the slots come back', async () => {
  const c = await newCustomer(stack, 10);
  const url = new URL(`${stack.baseUrl}/v2/videos/generations`);
  // Requests that declare a large body and send only its start: each holds a slot while in progress
  // (one key holds at most LARGE_BODIES_PER_KEY_MAX of them, so several keys fill the process's slots).
  const holders = await Promise.all(
    Array.from({ length: VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX / LARGE_BODIES_PER_KEY_MAX }, () => newCustomer(stack, 1)),
  );
  const pending = holders.flatMap((h) =>
    Array.from({ length: LARGE_BODIES_PER_KEY_MAX }, () => {
      const req = http.request(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', 'content-length': String(1024 * 1024) },
      });
      req.on('error', () => {});
      req.write('{"prompt": "p", "image": {"bytesBase64Encoded": "');
      return req;
    }),
  );
  try {
    await new Promise((r) => setTimeout(r, 500));
    const busy = await create(c.key, { ...simJob(), image: imageField(Buffer.concat([pngImage(), Buffer.alloc(100_000)]), 'image/png') });
    assert.equal(busy.status, 503, JSON.stringify(busy.body));
    assert.equal(busy.body.error.code, 'server_busy');
    assert.equal(busy.headers.get('retry-after'), '1');
    const small = await create(c.key, simJob());
    assert.equal(small.status, 202, 'small bodies are not limited');
    await waitForJob(stack, c.key, small.body.id);
  } finally {
    for (const req of pending) req.destroy();
  }
  await new Promise((r) => setTimeout(r, 500));
  const after = await create(c.key, { ...simJob(), image: imageField(Buffer.concat([pngImage(), Buffer.alloc(100_000)]), 'image/png') });
  assert.equal(after.status, 202, JSON.stringify(after.body));
  await waitForJob(stack, c.key, after.body.id);
  await assertAuditHolds(stack);
});
