// The OpenAI-compatible video API driven by the official `openai` npm package (no hand-written requests):
// create (JSON-equivalent fields and an uploaded first frame), poll, list with the SDK's auto-paging
// iterator, download a playable MP4 and a JPEG thumbnail, delete; the SDK's error classes for every
// error a client can cause; a /v1 video is the /v2 job with the same id and the same money.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import nodeHttp from 'node:http';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { inspectMp4 } from '../helpers/mp4.js';
import { pngImage, pngOfSize } from '../helpers/images.js';
import { IMAGE_BYTES_MAX } from '../../src/video-jobs/schemas.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${stack.baseUrl}/v1`, maxRetries: 0 });

async function pollUntilDone(openai: OpenAI, id: string, timeout_ms = 30_000) {
  const until = Date.now() + timeout_ms;
  for (;;) {
    const v = await openai.videos.retrieve(id);
    if (v.status === 'completed' || v.status === 'failed') return v;
    if (Date.now() > until) throw new Error(`video ${id} still ${v.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('videos through the openai SDK', () => {
  test('create, poll, download a playable MP4 and a JPEG thumbnail, same job and money as /v2, delete', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    const before_micro = await balanceMicro(stack, c.workspaceId);
    const created = await openai.videos.create({ prompt: 'a lighthouse at dusk', model: 'sim-video-1', seconds: '4', size: '720x1280' });
    assert.equal(created.object, 'video');
    assert.equal(created.model, 'sim-video-1');
    assert.ok(['queued', 'in_progress'].includes(created.status), created.status);
    assert.equal(created.seconds, '4');
    assert.equal(created.size, '720x1280');
    assert.equal(created.error, null);
    assert.equal(created.remixed_from_video_id, null);

    // The same job on /v2, charged as /v2 charges it.
    const v2 = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.id}`, { token: c.key });
    assert.equal(v2.status, 200);
    assert.deepEqual(v2.body.params, { durationSeconds: 4, resolution: '720p', aspectRatio: '9:16', n: 1 });
    const charged_micro = Math.round(v2.body.estimated_cost_in_euro * 1e6);
    assert.equal(await balanceMicro(stack, c.workspaceId), before_micro - charged_micro);

    const done = await pollUntilDone(openai, created.id);
    assert.equal(done.status, 'completed');
    assert.equal(done.progress, 100);
    assert.ok(done.completed_at! >= done.created_at);

    const content = await openai.videos.downloadContent(created.id);
    assert.equal(content.headers.get('content-type'), 'video/mp4');
    const mp4 = Buffer.from(await content.arrayBuffer());
    const info = inspectMp4(mp4);
    assert.ok(info.has_moov && info.has_mdat);
    assert.ok(Math.abs(info.duration_seconds - 4) < 0.5, String(info.duration_seconds));
    assert.ok(info.height > info.width, 'portrait, as 720x1280 asks');

    const thumb = await openai.videos.downloadContent(created.id, { variant: 'thumbnail' });
    assert.equal(thumb.headers.get('content-type'), 'image/jpeg');
    const jpeg = Buffer.from(await thumb.arrayBuffer());
    assert.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff], 'a JPEG (SOI)');
    assert.deepEqual([...jpeg.subarray(-2)], [0xff, 0xd9], 'a complete JPEG (EOI)');
    assert.ok(jpeg.length > 500);
    // The frame's size: the SOF0 marker carries height and width.
    const sof = jpeg.indexOf(Buffer.from([0xff, 0xc0]));
    assert.ok(sof > 0);
    assert.deepEqual([jpeg.readUInt16BE(sof + 7), jpeg.readUInt16BE(sof + 5)], [info.width, info.height]);

    await assert.rejects(openai.videos.downloadContent(created.id, { variant: 'spritesheet' }), OpenAI.BadRequestError);

    const deleted = await openai.videos.delete(created.id);
    assert.deepEqual(deleted, { id: created.id, object: 'video.deleted', deleted: true });
    await assert.rejects(openai.videos.retrieve(created.id), OpenAI.NotFoundError);
    await assertAuditHolds(stack);
  });

  test("progress: 0 queued, the job's progress while it runs (0 until the provider reports one), 100 completed", async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    // A job that runs a minute (created on /v2, where the simulator's delay can be set), cancelled at the end.
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'slow', model: 'sim-video-1', durationSeconds: 4, parameters: { simulate: { delay_ms: 60_000 } } },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const id: string = created.body.id;
    const until = Date.now() + 10_000;
    let running = await openai.videos.retrieve(id);
    while (running.status !== 'in_progress') {
      assert.equal(running.status, 'queued');
      assert.equal(running.progress, 0);
      if (Date.now() > until) throw new Error(`video ${id} still ${running.status}`);
      await new Promise((r) => setTimeout(r, 100));
      running = await openai.videos.retrieve(id);
    }
    assert.equal(running.progress, 0, 'no progress reported yet');
    // The progress the operation poller keeps for the job, as a provider reporting one makes it.
    await stack.db.query('UPDATE video_jobs SET progress = 37 WHERE id = $1', [id]);
    assert.equal((await openai.videos.retrieve(id)).progress, 37);
    const listed = [];
    for await (const v of openai.videos.list()) listed.push(v);
    assert.deepEqual(
      listed.map((v) => [v.id, v.status, v.progress]),
      [[id, 'in_progress', 37]],
    );
    const v2 = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
    assert.equal(v2.body.progress, 37, 'the figure /v2 shows');
    const cancelled = await http(stack.baseUrl, 'POST', `/v2/videos/generations/${id}/cancel`, { token: c.key });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    await assertAuditHolds(stack);
  });

  test('an uploaded first frame and a data: URL reach the job as its image', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    const file = await openai.videos.create({
      prompt: 'from a frame',
      model: 'sim-video-1',
      seconds: 4,
      input_reference: await toFile(pngImage(), 'frame.png', { type: 'image/png' }),
    } as any);
    const url = await openai.videos.create({
      prompt: 'from a data url',
      model: 'sim-video-1',
      seconds: '4',
      input_reference: { image_url: `data:image/png;base64,${pngImage(64, 36, 1).toString('base64')}` },
    });
    for (const id of [file.id, url.id]) {
      const inputs = await stack.db.query('SELECT 1 FROM video_job_inputs WHERE job_id = $1', [id]);
      assert.equal(inputs.rowCount, 1, 'the image was stored with the job');
      assert.equal((await pollUntilDone(openai, id)).status, 'completed');
    }
    await assert.rejects(
      openai.videos.create({ prompt: 'x', model: 'sim-video-1', input_reference: { image_url: 'https://example.com/a.png' } }),
      (err: any) => err instanceof OpenAI.BadRequestError && err.param === 'input_reference',
    );
    await assertAuditHolds(stack);
  });

  test("a first frame of megabytes as a data: URL, the SDK's way (multipart input_reference[image_url]): accepted as in JSON, bounded by the image limit once decoded", async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    const png = pngOfSize(3 * 1024 * 1024);
    const dataUrl = `data:image/png;base64,${png.toString('base64')}`;
    const made = await openai.videos.create({
      prompt: 'from a large data url',
      model: 'sim-video-1',
      seconds: '4',
      input_reference: { image_url: dataUrl },
    });
    const inputs = await stack.db.query('SELECT 1 FROM video_job_inputs WHERE job_id = $1', [made.id]);
    assert.equal(inputs.rowCount, 1, 'the image was stored with the job');
    assert.equal((await pollUntilDone(openai, made.id)).status, 'completed');
    // Past the image limit once decoded: 413 naming input_reference, nothing charged.
    const before_micro = await balanceMicro(stack, c.workspaceId);
    const tooBig = `data:image/png;base64,${pngOfSize(IMAGE_BYTES_MAX + 1).toString('base64')}`;
    await assert.rejects(
      openai.videos.create({ prompt: 'too large', model: 'sim-video-1', seconds: '4', input_reference: { image_url: tooBig } }),
      (err: any) => err instanceof OpenAI.APIError && err.status === 413 && (err.error as any)?.param === 'input_reference',
    );
    // Other text parts keep their small bound.
    const fd = new FormData();
    fd.append('prompt', 'x'.repeat(20_000));
    const long = await fetch(`${stack.baseUrl}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${c.key}` }, body: fd });
    assert.equal(long.status, 400);
    assert.equal(((await long.json()) as any).error.param, 'prompt');
    // A body without a Content-Length whose text parts together pass the request's limit (each within
    // the large part's bound) is refused as it arrives, not buffered whole.
    const boundary = 'b0undary';
    const part = (name: string) =>
      `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${'x'.repeat(6 * 1024 * 1024)}\r\n`;
    const chunks = ['prompt', 'model', 'seconds', 'size'].map((n) => new TextEncoder().encode(part(n)));
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next) controller.enqueue(next);
        else controller.close();
      },
    });
    const chunked = await fetch(`${stack.baseUrl}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    assert.equal(chunked.status, 413);
    assert.equal(((await chunked.json()) as any).error.code, 'request_too_large');
    assert.equal(await balanceMicro(stack, c.workspaceId), before_micro);
    await assertAuditHolds(stack);
  });

  test('list pages through every video with the auto-paging iterator, newest first or oldest first', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await openai.videos.create({ prompt: `clip ${i}`, model: 'sim-video-1', seconds: '4' })).id);
    const seen: string[] = [];
    for await (const v of openai.videos.list({ limit: 2 })) seen.push(v.id);
    assert.deepEqual(seen, [...ids].reverse());
    const asc: string[] = [];
    for await (const v of openai.videos.list({ limit: 2, order: 'asc' })) asc.push(v.id);
    assert.deepEqual(asc, ids);
    const page = await openai.videos.list({ limit: 2 });
    assert.equal(page.data.length, 2);
    assert.equal(page.has_more, true);
    for (const id of ids) await pollUntilDone(openai, id);
    await assertAuditHolds(stack);
  });

  test('errors map onto the SDK error classes, in OpenAI error shape', async () => {
    const c = await newCustomer(stack, 10, ['sim-video-1']);
    const openai = client(c.key);
    await assert.rejects(client('sk-not-a-key').videos.list(), OpenAI.AuthenticationError);
    await assert.rejects(openai.videos.retrieve('00000000-0000-4000-8000-000000000000'), OpenAI.NotFoundError);
    await assert.rejects(openai.videos.retrieve('video_123'), OpenAI.NotFoundError);
    await assert.rejects(openai.videos.create({ prompt: 'x', model: 'veo-3.1-generate-001' }), OpenAI.PermissionDeniedError);
    await assert.rejects(
      openai.videos.create({ prompt: 'x', model: 'sim-video-1', size: '3840x2160' as any }),
      (err: any) => err instanceof OpenAI.BadRequestError && err.param === 'size' && /3840x2160/.test(err.message),
    );
    await assert.rejects(
      openai.videos.create({ prompt: 'x', model: 'sim-video-1', seconds: '12' }),
      (err: any) => err instanceof OpenAI.BadRequestError && err.param === 'seconds',
    );
    await assert.rejects(openai.videos.remix('00000000-0000-4000-8000-000000000000', { prompt: 'again' }), OpenAI.BadRequestError);
    await assert.rejects(openai.videos.edit({ prompt: 'x', video: { id: 'v' } }), OpenAI.BadRequestError);
    await assert.rejects(openai.videos.extend({ prompt: 'x', seconds: '4', video: { id: 'v' } }), OpenAI.BadRequestError);
    await assert.rejects(openai.videos.getCharacter('char_1'), OpenAI.BadRequestError);

    // No credits: 402, the SDK's APIError with status 402; nothing charged.
    const poor = await newCustomer(stack, 0);
    const err = await client(poor.key)
      .videos.create({ prompt: 'x', model: 'sim-video-1', seconds: '4' })
      .catch((e) => e);
    assert.ok(err instanceof OpenAI.APIError);
    assert.equal(err.status, 402);
    assert.equal(err.code, 'insufficient_credits');
    assert.equal(err.type, 'insufficient_quota');
    assert.equal(await balanceMicro(stack, poor.workspaceId), 0);

    // The body itself is OpenAI's shape, also for a route /v1 does not have.
    const raw = await http(stack.baseUrl, 'GET', '/v1/nothing-here', { token: c.key });
    assert.equal(raw.status, 404);
    assert.deepEqual(Object.keys(raw.body.error).sort(), ['code', 'message', 'param', 'type']);
    await assertAuditHolds(stack);
  });

  test('models: only what the key may use, in OpenAI list shape', async () => {
    const all = await newCustomer(stack, 1);
    const ids = (await client(all.key).models.list()).data.map((m) => m.id);
    assert.ok(ids.includes('sim-video-1') && ids.includes('sim-speech-1') && ids.includes('veo-3.1-fast-generate-001'), ids.join());
    const limited = await newCustomer(stack, 1, ['sim-video-1']);
    const openai = client(limited.key);
    const page = await openai.models.list();
    assert.deepEqual(
      page.data.map((m) => m.id),
      ['sim-video-1'],
    );
    assert.deepEqual(Object.keys(page.data[0]!).sort(), ['created', 'id', 'object', 'owned_by']);
    assert.equal((await openai.models.retrieve('sim-video-1')).object, 'model');
    await assert.rejects(openai.models.retrieve('sim-speech-1'), OpenAI.NotFoundError);
  });

  test('downloads aborted after their first bytes leave no file open in the process', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    const created = await openai.videos.create({ prompt: 'a lighthouse at dusk', model: 'sim-video-1', seconds: '4', size: '720x1280' });
    assert.equal((await pollUntilDone(openai, created.id)).status, 'completed');
    // A large stored video (48 MiB), so each download is still reading its file when the client leaves.
    const v2 = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.id}`, { token: c.key });
    const key = new URL(v2.body.videos[0].url).pathname.slice('/v2/files/'.length).split('/').map(decodeURIComponent);
    fs.writeFileSync(path.join(stack.config.dataDir, 'storage', ...key), Buffer.alloc(48 * 1024 * 1024));
    const openFiles = () => fs.readdirSync('/proc/self/fd').length;
    const before_fds = openFiles();
    const DOWNLOADS = 12;
    await Promise.all(
      Array.from(
        { length: DOWNLOADS },
        () =>
          new Promise<void>((resolve, reject) => {
            const req = nodeHttp.get(
              `${stack.baseUrl}/v1/videos/${created.id}/content`,
              { headers: { authorization: `Bearer ${c.key}` }, agent: false },
              (res) => {
                assert.equal(res.statusCode, 200);
                res.once('data', () => {
                  req.destroy();
                  resolve();
                });
              },
            );
            req.on('error', (err) => (req.destroyed ? resolve() : reject(err)));
          }),
      ),
    );
    // The server sees each client leave and closes what it was sending.
    const until = Date.now() + 5_000;
    while (openFiles() > before_fds + 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    assert.ok(
      openFiles() <= before_fds + 2,
      `${openFiles() - before_fds} more descriptors open than before ${DOWNLOADS} aborted downloads`,
    );
  });
});
