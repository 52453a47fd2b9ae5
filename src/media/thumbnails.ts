// Thumbnails of stored videos (GET /v1/videos/{id}/content?variant=thumbnail): a JPEG of the first
// frame, made once per video and kept in storage beside it (thumbnails/<job id>/0.jpg), so a flood of
// requests for it costs storage reads, not decodes. Requests for a thumbnail being made wait for that
// one decode. A decode reserves its place in the FFmpeg worker's thumbnail lane before anything is read
// (a full lane: 503), and one video at a time is read into memory for decoding, whatever the requests.
// The job's deletion removes its thumbnail (src/video-jobs/lifecycle.ts, and the retention sweep).
import type { Readable } from 'node:stream';
import { ApiError } from '../errors.js';
import { Semaphore } from '../semaphore.js';
import type { Storage } from '../storage/local.js';
import { thumbnailKey } from '../storage/retention.js';
import { MEDIA_LANE_PLACES, type FfmpegWasm } from './ffmpeg-wasm.js';

/** Largest MP4 decoded for a thumbnail (FFmpeg decodes from a copy in memory). */
export const THUMBNAIL_VIDEO_BYTES_MAX = 512 * 1024 * 1024;
/** Largest thumbnail read back from storage (a JPEG of one frame is far smaller). */
const THUMBNAIL_BYTES_MAX = 16 * 1024 * 1024;
const FIRST_FRAME_JPEG = ['-frames:v', '1', '-f', 'image2', '-c:v', 'mjpeg', '-q:v', '3'];

export const videoContentGone = () =>
  new ApiError(404, 'not_found_error', 'video_content_gone', 'the content of this video is no longer stored', 'video_id');

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
          throw new ApiError(422, 'invalid_request_error', 'video_too_large', 'the video is too large to make a thumbnail of');
        }
        const mp4 = await readAll(video.stream, THUMBNAIL_VIDEO_BYTES_MAX);
        if (!mp4) throw new ApiError(422, 'invalid_request_error', 'video_too_large', 'the video is too large to make a thumbnail of');
        return place.run(mp4, 'in.mp4', FIRST_FRAME_JPEG, 'out.jpg');
      });
    } finally {
      place.release();
    }
    if (!jpeg)
      throw new ApiError(422, 'invalid_request_error', 'video_not_decodable', 'the first frame of this video could not be decoded');
    // Kept for the next request; a failed write only means the next one decodes again.
    await this.deps.storage.put(key, jpeg, 'image/jpeg').catch(() => {});
    return jpeg;
  }
}
