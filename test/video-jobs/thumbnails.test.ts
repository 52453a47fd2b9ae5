// Thumbnails of the clips the simulated provider makes (src/media/thumbnails.ts, src/media/ffmpeg-wasm.ts),
// with no server: every aspect ratio and duration (the simulator serves every resolution with these),
// more commands in a row than one FFmpeg instance survives and all at once, and what a video FFmpeg
// throws on gets (a 422, and no second run).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { FfmpegWasm, MEDIA_LANE_PLACES, MediaCommandTrapped } from '../../src/media/ffmpeg-wasm.js';
import { Thumbnails } from '../../src/media/thumbnails.js';
import { LocalStorage } from '../../src/storage/local.js';
import { projectPath } from '../../src/paths.js';
import { ApiError } from '../../src/errors.js';

const CLIPS = ['16x9-4s', '16x9-6s', '16x9-8s', '9x16-4s', '9x16-6s', '9x16-8s'];
const isJpeg = (b: Buffer) => b.length > 100 && b[0] === 0xff && b[1] === 0xd8 && b.at(-2) === 0xff && b.at(-1) === 0xd9;

let dir: string;
let storage: LocalStorage;
before(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'thumbnails-'));
  storage = new LocalStorage(dir);
  for (const clip of CLIPS)
    await storage.put(`videos/${clip}.mp4`, await fs.readFile(projectPath('assets', 'sim-video', `${clip}.mp4`)), 'video/mp4');
});
after(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('thumbnails of the simulator clips', () => {
  test('every clip, six times over in a row and then all at once, on one media worker: each a JPEG, nothing thrown', async () => {
    const ffmpeg = new FfmpegWasm();
    try {
      const thumbnails = new Thumbnails({ storage, ffmpeg });
      let job = 0;
      // 36 commands in a row: more than one FFmpeg instance runs before its leaked stack reaches its data.
      for (let round = 0; round < 6; round++)
        for (const clip of CLIPS) {
          const jpeg = await thumbnails.of(`job_seq_${job++}`, `videos/${clip}.mp4`);
          assert.ok(isJpeg(jpeg), `${clip}, round ${round}`);
        }
      // As many at once as the thumbnail lane holds, over every clip.
      for (const at of [0, 2, 4, 0]) {
        const clips = [...CLIPS, ...CLIPS].slice(at, at + MEDIA_LANE_PLACES.thumbnail);
        const all = await Promise.all(clips.map((clip) => thumbnails.of(`job_all_${job++}`, `videos/${clip}.mp4`)));
        all.forEach((jpeg, i) => assert.ok(isJpeg(jpeg), `${clips[i]} at once`));
      }
      assert.equal(ffmpeg.workersStarted(), 1, 'no worker stopped');
    } finally {
      await ffmpeg.close();
    }
  });

  test("FFmpeg's optimal Huffman tables trap on the 16:9 8 s clip: thrown once, never run again, and the worker is kept", async () => {
    const ffmpeg = new FfmpegWasm({ speech: 2, thumbnail: 2 });
    try {
      const mp4 = await fs.readFile(projectPath('assets', 'sim-video', '16x9-8s.mp4'));
      const optimal = ['-frames:v', '1', '-f', 'image2', '-c:v', 'mjpeg', '-q:v', '3'];
      await assert.rejects(ffmpeg.run(mp4, 'in.mp4', optimal, 'out.jpg'), (err: unknown) => {
        return err instanceof MediaCommandTrapped && err.status === 503 && /memory access out of bounds/.test(err.message);
      });
      const standard = [...optimal, '-huffman', 'default'];
      const jpeg = await ffmpeg.run(await fs.readFile(projectPath('assets', 'sim-video', '16x9-8s.mp4')), 'in.mp4', standard, 'out.jpg');
      assert.ok(jpeg && isJpeg(jpeg));
      assert.equal(ffmpeg.workersStarted(), 1, 'a trap spoils only its own FFmpeg instance');
    } finally {
      await ffmpeg.close();
    }
  });

  test('a video FFmpeg throws on is a 422, and its next request runs nothing', async () => {
    let runs = 0;
    const trapping = {
      reserve: () => ({
        run: () => {
          runs++;
          return Promise.reject(new MediaCommandTrapped('memory access out of bounds'));
        },
        release() {},
      }),
    } as unknown as FfmpegWasm;
    const thumbnails = new Thumbnails({ storage, ffmpeg: trapping });
    for (let i = 0; i < 3; i++)
      await assert.rejects(thumbnails.of('job_trapped', 'videos/16x9-8s.mp4'), (err: unknown) => {
        return err instanceof ApiError && err.status === 422 && err.code === 'video_not_decodable';
      });
    assert.equal(runs, 1, 'FFmpeg ran once');
  });
});
