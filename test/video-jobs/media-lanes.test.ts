// The media worker under a thumbnail flood: speech in opus, aac and flac keeps being delivered and
// charged (every simulated provider call matched by a charge), thumbnails are made once per video and
// kept in storage (a flood reads the kept JPEG, never the MP4 again), a full thumbnail lane never takes
// speech's places, and speech commands run before waiting thumbnails. The ledger audit after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { FfmpegWasm, MediaCommandTrapped } from '../../src/media/ffmpeg-wasm.js';
import { pcmToWav } from '../../src/media/wav.js';
import { providerCalls } from '../../src/providers/simulator-usage.js';
import { thumbnailKey } from '../../src/storage/retention.js';
import { createStorage } from '../../src/runtime/storage.js';
import { ApiError } from '../../src/errors.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

/** Completed jobs of `key`, one video each. */
async function videos(key: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: key, json: simJob({ delay_ms: 100 }, { n: 1 }) });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    ids.push(r.body.id);
  }
  for (const id of ids) assert.equal((await waitForJob(stack, key, id)).status, 'succeeded');
  return ids;
}

const speechCharges = async (workspaceId: string) =>
  Number(
    (
      await stack.db.query<{ n: string }>(
        "SELECT count(*) AS n FROM ledger_entries WHERE workspace_id = $1 AND speech_request_id IS NOT NULL AND kind = 'charge'",
        [workspaceId],
      )
    ).rows[0]!.n,
  );

describe('media work', () => {
  test('a thumbnail flood during opus, aac and flac speech: every provider call charged, every speech delivered, each thumbnail made once', async () => {
    const c = await newCustomer(stack, 20);
    const ids = await videos(c.key, 3);
    const calls_before = await providerCalls(stack.db, 'speech');
    let flooding = true;
    const thumbnailStatuses: number[] = [];
    // 48 requests in flight at all times, over three videos, until the speeches are done.
    const flood = Array.from({ length: 48 }, async (_, i) => {
      while (flooding) {
        const r = await fetch(`${stack.baseUrl}/v1/videos/${ids[i % ids.length]}/content?variant=thumbnail`, {
          headers: { authorization: `Bearer ${c.key}` },
        });
        await r.arrayBuffer();
        thumbnailStatuses.push(r.status);
      }
    });
    await new Promise((r) => setTimeout(r, 300));
    const formats = ['opus', 'aac', 'flac'] as const;
    const speeches = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        http(stack.baseUrl, 'POST', '/v2/audio/speech', {
          token: c.key,
          json: { input: `Speech number ${i} during a flood of thumbnails.`, voice: 'sim-narrator', response_format: formats[i % 3] },
        }),
      ),
    );
    flooding = false;
    await Promise.all(flood);
    const calls = (await providerCalls(stack.db, 'speech')) - calls_before;
    const charged = await speechCharges(c.workspaceId);
    assert.deepEqual(
      speeches.map((s) => s.status),
      Array(12).fill(200),
      JSON.stringify(speeches.filter((s) => s.status !== 200).map((s) => s.body)),
    );
    assert.equal(calls, 12, 'one provider call per speech');
    assert.equal(charged, calls, 'every provider call is charged');
    // Thumbnails: made once per video and kept; a full lane is a 503, never another status.
    assert.ok(thumbnailStatuses.filter((s) => s === 200).length > ids.length, `${thumbnailStatuses.length} thumbnail answers`);
    assert.deepEqual(
      [...new Set(thumbnailStatuses)].filter((s) => s !== 200 && s !== 503),
      [],
    );
    const storage = createStorage(stack.config);
    for (const id of ids) assert.ok(await storage.open(thumbnailKey(id)), `the thumbnail of ${id} is kept`);
    await assertAuditHolds(stack);
  });

  test('thumbnails of veo-3.1-fast-generate-001 jobs on the simulator: every resolution, aspect ratio and duration, in turn and at once', async () => {
    const c = await newCustomer(stack, 500);
    const jobs: { id: string; what: string }[] = [];
    for (const resolution of ['720p', '1080p', '4k'])
      for (const aspectRatio of ['16:9', '9:16'])
        for (const durationSeconds of [4, 6, 8]) {
          const json = {
            prompt: 'a lighthouse at dusk',
            model: 'veo-3.1-fast-generate-001',
            resolution,
            aspectRatio,
            durationSeconds,
            n: 1,
          };
          const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json });
          assert.equal(r.status, 202, JSON.stringify(r.body));
          jobs.push({ id: r.body.id, what: `${resolution} ${aspectRatio} ${durationSeconds}s` });
        }
    for (const j of jobs) assert.equal((await waitForJob(stack, c.key, j.id, 60_000)).status, 'succeeded', j.what);
    const thumbnail = async (j: { id: string; what: string }) => {
      const r = await fetch(`${stack.baseUrl}/v1/videos/${j.id}/content?variant=thumbnail`, {
        headers: { authorization: `Bearer ${c.key}` },
      });
      const body = Buffer.from(await r.arrayBuffer());
      assert.equal(r.status, 200, `${j.what}: ${body.toString('utf8').slice(0, 300)}`);
      assert.deepEqual([...body.subarray(0, 3)], [0xff, 0xd8, 0xff], j.what);
    };
    for (const j of jobs.slice(0, 10)) await thumbnail(j);
    // As many at once as the thumbnail lane holds.
    for (let i = 10; i < jobs.length; i += 4) await Promise.all(jobs.slice(i, i + 4).map(thumbnail));
    await assertAuditHolds(stack);
  });

  test('a kept thumbnail is served without reading the video; deleting the video removes it', async () => {
    const c = await newCustomer(stack, 5);
    const id = (await videos(c.key, 1))[0]!;
    const storage = createStorage(stack.config);
    const first = await fetch(`${stack.baseUrl}/v1/videos/${id}/content?variant=thumbnail`, {
      headers: { authorization: `Bearer ${c.key}` },
    });
    assert.equal(first.status, 200);
    const jpeg = Buffer.from(await first.arrayBuffer());
    assert.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff]);
    const job = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: c.key });
    // The MP4 goes (as if unreadable): the thumbnail is answered from what was kept.
    const mp4Key = (await stack.db.query<{ k: string }>("SELECT videos->0->>'storage_key' AS k FROM video_jobs WHERE id = $1", [id]))
      .rows[0]!.k;
    assert.ok(job.body.videos.length === 1 && mp4Key);
    const mp4 = await storage.open(mp4Key);
    const mp4Bytes = Buffer.concat(await mp4!.stream.toArray());
    await storage.delete(mp4Key);
    const again = await fetch(`${stack.baseUrl}/v1/videos/${id}/content?variant=thumbnail`, {
      headers: { authorization: `Bearer ${c.key}` },
    });
    assert.equal(again.status, 200);
    assert.deepEqual(Buffer.from(await again.arrayBuffer()), jpeg);
    await storage.put(mp4Key, mp4Bytes, 'video/mp4');
    assert.equal((await http(stack.baseUrl, 'DELETE', `/v1/videos/${id}`, { token: c.key })).status, 200);
    assert.equal(await storage.open(thumbnailKey(id)), null, 'the thumbnail goes with its video');
    await assertAuditHolds(stack);
  });

  test('a full thumbnail lane leaves speech its places; speech runs before waiting thumbnails', async () => {
    const ffmpeg = new FfmpegWasm({ speech: 2, thumbnail: 3 });
    try {
      const wav = () => pcmToWav(Buffer.alloc(22050 * 2 * 2), 22050); // two seconds of silence (each command takes its input)
      const flac = ['-c:a', 'flac', '-f', 'flac'];
      const order: string[] = [];
      const thumbs = [0, 1, 2].map((i) =>
        ffmpeg.run(wav(), 'in.wav', flac, 'out.flac', 'thumbnail').then(() => order.push(`thumbnail ${i}`)),
      );
      assert.throws(
        () => ffmpeg.reserve('thumbnail'),
        (err: unknown) => err instanceof ApiError && err.status === 503 && err.code === 'media_worker_unavailable',
      );
      const place = ffmpeg.reserve('speech');
      const speech = place.run(wav(), 'in.wav', flac, 'out.flac').then((out) => {
        order.push('speech');
        return out;
      });
      assert.ok((await speech)?.subarray(0, 4).equals(Buffer.from('fLaC')));
      place.release();
      await Promise.all(thumbs);
      assert.deepEqual(order, ['thumbnail 0', 'speech', 'thumbnail 1', 'thumbnail 2']);
      assert.equal(ffmpeg.placesHeld('speech'), 0);
      assert.equal(ffmpeg.placesHeld('thumbnail'), 0);
    } finally {
      await ffmpeg.close();
    }
  });
  test('a command FFmpeg throws on fails at once and is not run again; the commands after it run on the same worker', async () => {
    const ffmpeg = new FfmpegWasm({ speech: 2, thumbnail: 2 });
    try {
      const wav = () => pcmToWav(Buffer.alloc(22050 * 2), 22050); // one second of silence
      const flac = ['-c:a', 'flac', '-f', 'flac'];
      assert.ok((await ffmpeg.run(wav(), 'in.wav', flac, 'out.flac', 'speech'))?.subarray(0, 4).equals(Buffer.from('fLaC')));
      // Writing the input into a directory that does not exist throws inside the worker, as a trap would.
      await assert.rejects(ffmpeg.run(wav(), 'no/such/dir/in.wav', flac, 'out.flac', 'speech'), (err: unknown) => {
        return (
          err instanceof MediaCommandTrapped && err.status === 503 && err.code === 'media_worker_unavailable' && /failed/.test(err.message)
        );
      });
      // Each command has an FFmpeg instance of its own: nothing of the one that threw is left to spoil the next.
      assert.ok((await ffmpeg.run(wav(), 'in.wav', flac, 'out.flac', 'thumbnail'))?.subarray(0, 4).equals(Buffer.from('fLaC')));
      assert.ok((await ffmpeg.run(wav(), 'in.wav', flac, 'out.flac', 'speech'))?.subarray(0, 4).equals(Buffer.from('fLaC')));
      assert.equal(ffmpeg.workersStarted(), 1, 'the worker is kept');
      assert.equal(ffmpeg.placesHeld('speech'), 0);
    } finally {
      await ffmpeg.close();
    }
  });
});
