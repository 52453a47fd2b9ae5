// What storage keeps, and for how long: where a job's files are kept (their keys), and speech audio kept
// for replays only for a while. Run by the reconciler (activities/reconciler.ts), a page per run; the
// sweep of a finished job's files is the job's (src/video-jobs/retention.ts).
import type { Db } from '../db/pool.js';
import type { Storage } from './local.js';

/** The key of a job's index-th video, as the copy writes it. */
export const videoOutputKey = (job_id: string, index: number) => `videos/${job_id}/${index}.mp4`;
/** Where the thumbnail of a job's (first) video is kept once made (src/media/thumbnails.ts). */
export const thumbnailKey = (job_id: string) => `thumbnails/${job_id}/0.jpg`;

/**
 * Deletes the audio of up to `limit` delivered speech requests older than `retention_ms` (kept until then
 * for replays of their Idempotency-Key, which afterwards answer 410 speech_no_longer_available).
 */
export async function expireSpeechAudio(db: Db, storage: Storage, retention_ms: number, limit: number): Promise<number> {
  const expired = await db.query<{ id: string; audio_storage_key: string }>(
    `SELECT id, audio_storage_key FROM speech_requests
      WHERE audio_storage_key IS NOT NULL AND created_at < now() - make_interval(secs => $1::float8 / 1000)
      ORDER BY created_at LIMIT $2`,
    [retention_ms, limit],
  );
  for (const r of expired.rows) {
    await storage.delete(r.audio_storage_key);
    await db.query('UPDATE speech_requests SET audio_storage_key = NULL WHERE id = $1', [r.id]);
  }
  return expired.rows.length;
}
