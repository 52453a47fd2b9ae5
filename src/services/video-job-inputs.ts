// The images of a video job (table video_job_inputs, migration 005), kept with the job and out of its
// workflow's history: written by the API before the workflow starts, read by the submit activity.
import type { Db } from '../db/pool.js';
import type { ImageMimeType } from '../catalog.js';
import type { InputImage } from '../providers/video/types.js';

export interface VideoJobInputs {
  image: InputImage;
  last_frame?: InputImage | undefined;
}

/**
 * Keeps a job's images. Written once: a retry of the same create (same Idempotency-Key, hence the same
 * job id) keeps the bytes first stored; a retry with other images is refused by the request
 * fingerprint, so the stored ones always belong to the job.
 */
export async function storeVideoJobInputs(db: Db, job: { job_id: string; workspace_id: string }, inputs: VideoJobInputs): Promise<void> {
  await db.query(
    `INSERT INTO video_job_inputs (job_id, workspace_id, image, image_mime_type, last_frame, last_frame_mime_type)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id) DO NOTHING`,
    [job.job_id, job.workspace_id, inputs.image.bytes, inputs.image.mime_type, inputs.last_frame?.bytes ?? null, inputs.last_frame?.mime_type ?? null],
  );
}

/** A job's images, or null when none were stored for it. */
export async function loadVideoJobInputs(db: Db, job_id: string): Promise<VideoJobInputs | null> {
  const r = await db.query<{ image: Buffer; image_mime_type: ImageMimeType; last_frame: Buffer | null; last_frame_mime_type: ImageMimeType | null }>(
    'SELECT image, image_mime_type, last_frame, last_frame_mime_type FROM video_job_inputs WHERE job_id = $1',
    [job_id],
  );
  const row = r.rows[0];
  if (!row) return null;
  return {
    image: { bytes: row.image, mime_type: row.image_mime_type },
    ...(row.last_frame && row.last_frame_mime_type ? { last_frame: { bytes: row.last_frame, mime_type: row.last_frame_mime_type } } : {}),
  };
}
