// The images of a video job (table video_job_inputs, migrations 005 and 011), kept with the job and out
// of its workflow's history: written by the API before the workflow starts, one row per create attempt
// (job_id, attempt_id), read by the submit activity for the attempt that charged the job. An attempt
// that was not accepted leaves nothing: the API discards its images when it answers, and the reconciler
// sweeps what a crash in between left (discardOrphanVideoJobInputs).
import type { Db } from '../db/pool.js';
import type { ImageMimeType } from '../catalog.js';
import type { InputImage } from '../providers/video/types.js';

export interface VideoJobInputs {
  image: InputImage;
  last_frame?: InputImage | undefined;
}

/**
 * Keeps an attempt's images. Each attempt of a job (an Idempotency-Key retried after a refusal, or sent
 * twice at once) has its own row, so an attempt never runs with another attempt's images; a replay of
 * the same attempt changes nothing.
 */
export async function storeVideoJobInputs(
  db: Db,
  job: { job_id: string; workspace_id: string; attempt_id: string },
  inputs: VideoJobInputs,
): Promise<void> {
  await db.query(
    `INSERT INTO video_job_inputs (job_id, attempt_id, workspace_id, image, image_mime_type, last_frame, last_frame_mime_type)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (job_id, attempt_id) DO NOTHING`,
    [job.job_id, job.attempt_id, job.workspace_id, inputs.image.bytes, inputs.image.mime_type, inputs.last_frame?.bytes ?? null, inputs.last_frame?.mime_type ?? null],
  );
}

/**
 * Deletes the images of an attempt that was not accepted (answered 402, 429, 503, 409): unless that
 * attempt charged the job (then they are the job's), nothing refers to them any more.
 */
export async function discardVideoJobInputs(db: Db, job: { job_id: string; attempt_id: string }): Promise<number> {
  const r = await db.query(
    `DELETE FROM video_job_inputs i WHERE i.job_id = $1 AND i.attempt_id = $2
        AND NOT EXISTS (SELECT 1 FROM video_jobs j WHERE j.id = i.job_id AND j.attempt_id = i.attempt_id)`,
    [job.job_id, job.attempt_id],
  );
  return r.rowCount ?? 0;
}

/**
 * Deletes, up to `limit`, images older than `min_age_ms` of attempts that did not charge their job
 * (refused, superseded by another attempt, or left by a process that died before answering). An
 * attempt's fate is decided within the create timeout (at most two minutes), so an hour is safe.
 */
export async function discardOrphanVideoJobInputs(db: Db, min_age_ms: number, limit: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM video_job_inputs WHERE ctid IN (
       SELECT i.ctid FROM video_job_inputs i
        WHERE i.created_at < now() - make_interval(secs => $1::float8 / 1000)
          AND NOT EXISTS (SELECT 1 FROM video_jobs j WHERE j.id = i.job_id AND (j.attempt_id IS NOT DISTINCT FROM i.attempt_id OR i.attempt_id IS NULL))
        LIMIT $2)`,
    [min_age_ms, limit],
  );
  return r.rowCount ?? 0;
}

/**
 * A job's images: those of the attempt that charged it, or (jobs created before images were kept per
 * attempt) the job's only row; null when none were stored for it.
 */
export async function loadVideoJobInputs(db: Db, job_id: string): Promise<VideoJobInputs | null> {
  const r = await db.query<{ image: Buffer; image_mime_type: ImageMimeType; last_frame: Buffer | null; last_frame_mime_type: ImageMimeType | null }>(
    `SELECT i.image, i.image_mime_type, i.last_frame, i.last_frame_mime_type
       FROM video_job_inputs i LEFT JOIN video_jobs j ON j.id = i.job_id
      WHERE i.job_id = $1 AND (i.attempt_id IS NULL OR i.attempt_id = j.attempt_id)
      ORDER BY i.attempt_id IS NULL LIMIT 1`,
    [job_id],
  );
  const row = r.rows[0];
  if (!row) return null;
  return {
    image: { bytes: row.image, mime_type: row.image_mime_type },
    ...(row.last_frame && row.last_frame_mime_type ? { last_frame: { bytes: row.last_frame, mime_type: row.last_frame_mime_type } } : {}),
  };
}
