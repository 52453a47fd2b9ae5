// Thumbnails of stored videos (GET /v1/videos/{id}/content?variant=thumbnail): a JPEG of the first
// frame, made once per video and kept in storage beside it (thumbnails/<job id>/0.jpg), so a flood of
// requests for it costs storage reads, not decodes. Requests for a thumbnail being made wait for that
// one decode. A decode reserves its place in the FFmpeg worker's thumbnail lane before anything is read
// (a full lane: 503), and one video at a time is read into memory for decoding, whatever the requests:
// into one buffer of its stored size, which moves to the FFmpeg worker as it is (one copy in memory).
// A video FFmpeg throws on is remembered (422 from then on): it would throw again, so it is tried once.
// The job's deletion removes its thumbnail (src/video-jobs/lifecycle.ts, and the retention sweep).
import type { Readable } from 'node:stream';
import { ApiError } from '../errors.js';
import { Semaphore } from '../semaphore.js';
import type { Storage } from '../storage/local.js';
import { thumbnailKey } from '../storage/retention.js';
import { MEDIA_LANE_PLACES, MediaCommandTrapped, type FfmpegWasm } from './ffmpeg-wasm.js';

/**
 * Largest MP4 decoded for a thumbnail (FFmpeg decodes from a copy in memory, one at a time in a process):
 * part of the API's memory bounds (src/runtime/memory-bounds.ts). Providers' 8 s 1080p clips are 5-30 MB.
 */
export const THUMBNAIL_VIDEO_BYTES_MAX = 128 * 1024 * 1024;
/** Largest thumbnail read back from storage (a JPEG of one frame is far smaller). */
const THUMBNAIL_BYTES_MAX = 16 * 1024 * 1024;
/**
 * The first frame as a JPEG with the standard (Annex K) Huffman tables: FFmpeg's default, tables optimal
 * for the frame, traps in @ffmpeg/core 0.12 on some frames (the simulator's 16:9 8 s clip at -q:v 3 and 2,
 * every time); the standard tables cost a few percent of size.
 */
const FIRST_FRAME_JPEG = ['-frames:v', '1', '-f', 'image2', '-c:v', 'mjpeg', '-q:v', '3', '-huffman', 'default'];
/** Videos FFmpeg threw on, remembered (the oldest forgotten first) so that none is tried twice. */
const TRAPPED_REMEMBERED_MAX = 1_000;

export const videoContentGone = () =>
  new ApiError(404, 'not_found_error', 'video_content_gone', 'the content of this video is no longer stored', 'video_id');

const videoNotDecodable = () =>
  new ApiError(422, 'invalid_request_error', 'video_not_decodable', 'the first frame of this video could not be decoded');
const videoTooLarge = () => new ApiError(422, 'invalid_request_error', 'video_too_large', 'the video is too large to make a thumbnail of');

/** A stored object of `bytes` bytes read into one buffer of that size (null when it has more). */
async function readExactly(stream: Readable, bytes: number): Promise<Buffer | null> {
  const out = Buffer.allocUnsafeSlow(bytes);
  let at = 0;
  for await (const chunk of stream) {
    const c = chunk as Buffer;
    if (at + c.length > bytes) {
      stream.destroy();
      return null;
    }
    c.copy(out, at);
    at += c.length;
  }
  return at === bytes ? out : out.subarray(0, at);
}

async function readAll(stream: Readable, bytes_max: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += (chunk as Buffer).length;
    if (total > bytes_max) {
      stream.destroy();
      return null;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, total);
}

export class Thumbnails {
  private readonly making = new Map<string, Promise<Buffer>>();
  private readonly trapped = new Set<string>();
  /** One video read and decoded at a time; the others wait holding only their lane place. */
  private readonly decoding = new Semaphore(1, MEDIA_LANE_PLACES.thumbnail);

  constructor(private readonly deps: { storage: Storage; ffmpeg: FfmpegWasm }) {}

  /** The JPEG of the job's video stored under `video_key`: kept, or made now (404 when the video is gone, 422 when it cannot be decoded). */
  async of(job_id: string, video_key: string): Promise<Buffer> {
    const key = thumbnailKey(job_id);
    const kept = await this.deps.storage.open(key);
    if (kept) {
      const jpeg = await readAll(kept.stream, THUMBNAIL_BYTES_MAX);
      if (jpeg && jpeg.length > 0) return jpeg;
    }
    if (this.trapped.has(key)) throw videoNotDecodable();
    let made = this.making.get(key);
    if (!made) {
      made = this.make(key, video_key).finally(() => this.making.delete(key));
      this.making.set(key, made);
    }
    return made;
  }

  private async make(key: string, video_key: string): Promise<Buffer> {
    const place = this.deps.ffmpeg.reserve('thumbnail');
    let jpeg: Buffer | null;
    try {
      jpeg = await this.decoding.with(async () => {
        const video = await this.deps.storage.open(video_key);
        if (!video) throw videoContentGone();
        if (video.bytes > THUMBNAIL_VIDEO_BYTES_MAX) {
          video.stream.destroy();
          throw videoTooLarge();
        }
        const mp4 = await readExactly(video.stream, video.bytes);
        if (!mp4) throw videoTooLarge();
        return place.run(mp4, 'in.mp4', FIRST_FRAME_JPEG, 'out.jpg');
      });
    } catch (err) {
      if (!(err instanceof MediaCommandTrapped)) throw err;
      this.rememberTrapped(key);
      throw videoNotDecodable();
    } finally {
      place.release();
    }
    if (!jpeg) throw videoNotDecodable();
    // Kept for the next request; a failed write only means the next one decodes again.
    await this.deps.storage.put(key, jpeg, 'image/jpeg').catch(() => {});
    return jpeg;
  }

  private rememberTrapped(key: string): void {
    if (this.trapped.size >= TRAPPED_REMEMBERED_MAX) this.trapped.delete(this.trapped.values().next().value as string);
    this.trapped.add(key);
  }
}
