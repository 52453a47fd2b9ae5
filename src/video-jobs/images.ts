// The images of a video job (first frame, last frame), kept with the job and out of its workflow's
// history: written by the API before the workflow starts, one set per create attempt (job_id, attempt_id),
// read by the submit activity for the attempt that charged the job. The bytes live in the storage the
// videos use (DATA_DIR/storage or the S3 bucket) under inputs/<job id>/<attempt id>/; the row of
// video_job_inputs (migrations 005, 011, 016) names them. Deleting a set removes its objects, so a
// discarded image frees its space at once (rows of images kept in the row itself, written before
// migration 016, are still read and deleted the same way).
//
// An attempt that was not accepted leaves nothing: the API discards its images when it answers, and the
// reconciler sweeps what a crash in between left (discardOrphanVideoJobInputs). A finished job's images go
// with the job's deletion, and with the sweep of its files once it has been finished a while.
import type { Db } from '../db/pool.js';
import type { ImageMimeType } from '../models/values.js';
import type { InputImage } from '../providers/video/types.js';
import type { Storage } from '../storage/local.js';

export interface VideoJobInputs {
  image: InputImage;
  last_frame?: InputImage | undefined;
}

const EXTENSIONS: Record<ImageMimeType, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };

/** Where an attempt's image is stored. */
export const videoInputKey = (job: { job_id: string; attempt_id: string }, which: 'image' | 'last_frame', mime_type: ImageMimeType) =>
  `inputs/${job.job_id}/${job.attempt_id}/${which}.${EXTENSIONS[mime_type]}`;

/**
 * Keeps an attempt's images. Each attempt of a job (an Idempotency-Key retried after a refusal, or sent
 * twice at once) has its own set, so an attempt never runs with another attempt's images; a replay of
 * the same attempt changes nothing. The row comes first: a crash before the objects are written leaves a
 * row the reconciler's sweep deletes (with whatever objects it names), never an object nothing names.
 */
export async function storeVideoJobInputs(
  db: Db,
  storage: Storage,
  job: { job_id: string; workspace_id: string; attempt_id: string },
  inputs: VideoJobInputs,
): Promise<void> {
  const image_key = videoInputKey(job, 'image', inputs.image.mime_type);
  const last_frame_key = inputs.last_frame ? videoInputKey(job, 'last_frame', inputs.last_frame.mime_type) : null;
  const r = await db.query(
    `INSERT INTO video_job_inputs (job_id, attempt_id, workspace_id, image_key, image_mime_type, last_frame_key, last_frame_mime_type)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (job_id, attempt_id) DO NOTHING`,
    [job.job_id, job.attempt_id, job.workspace_id, image_key, inputs.image.mime_type, last_frame_key, inputs.last_frame?.mime_type ?? null],
  );
  if ((r.rowCount ?? 0) === 0) return;
  await storage.put(image_key, inputs.image.bytes, inputs.image.mime_type);
  if (inputs.last_frame && last_frame_key) await storage.put(last_frame_key, inputs.last_frame.bytes, inputs.last_frame.mime_type);
}

/** Deletes the objects of the rows a statement deleted (`RETURNING image_key, last_frame_key`); the row count. */
async function deleteObjects(
  storage: Storage | undefined,
  rows: { image_key: string | null; last_frame_key: string | null }[],
): Promise<number> {
  for (const row of rows) {
    for (const key of [row.image_key, row.last_frame_key]) if (key && storage) await storage.delete(key);
  }
  return rows.length;
}

/**
 * Deletes the images of an attempt that was not accepted (answered 402, 429, 503, 409): unless that
 * attempt charged the job (then they are the job's), nothing refers to them any more.
 */
export async function discardVideoJobInputs(db: Db, storage: Storage, job: { job_id: string; attempt_id: string }): Promise<number> {
  const r = await db.query<{ image_key: string | null; last_frame_key: string | null }>(
    `DELETE FROM video_job_inputs i WHERE i.job_id = $1 AND i.attempt_id = $2
        AND NOT EXISTS (SELECT 1 FROM video_jobs j WHERE j.id = i.job_id AND j.attempt_id = i.attempt_id)
     RETURNING i.image_key, i.last_frame_key`,
    [job.job_id, job.attempt_id],
  );
  return deleteObjects(storage, r.rows);
}

/**
 * Deletes, up to `limit`, images older than `min_age_ms` of attempts that did not charge their job
 * (refused, superseded by another attempt, or left by a process that died before answering). An
 * attempt's fate is decided within the create timeout (at most two minutes), so an hour is safe.
 */
export async function discardOrphanVideoJobInputs(
  db: Db,
  storage: Storage | undefined,
  min_age_ms: number,
  limit: number,
): Promise<number> {
  const r = await db.query<{ image_key: string | null; last_frame_key: string | null }>(
    `DELETE FROM video_job_inputs WHERE ctid IN (
       SELECT i.ctid FROM video_job_inputs i
        WHERE i.created_at < now() - make_interval(secs => $1::float8 / 1000)
          AND NOT EXISTS (SELECT 1 FROM video_jobs j WHERE j.id = i.job_id AND (j.attempt_id IS NOT DISTINCT FROM i.attempt_id OR i.attempt_id IS NULL))
        LIMIT $2)
     RETURNING image_key, last_frame_key`,
    [min_age_ms, limit],
  );
  return deleteObjects(storage, r.rows);
}

/** Deletes every image of a job (deleted, or finished long enough ago that it is never submitted again). */
export async function deleteVideoJobInputs(db: Db, storage: Storage | undefined, job_id: string): Promise<number> {
  const r = await db.query<{ image_key: string | null; last_frame_key: string | null }>(
    'DELETE FROM video_job_inputs WHERE job_id = $1 RETURNING image_key, last_frame_key',
    [job_id],
  );
  return deleteObjects(storage, r.rows);
}

async function readObject(storage: Storage, key: string): Promise<Buffer | null> {
  const opened = await storage.open(key);
  if (!opened) return null;
  const chunks: Buffer[] = [];
  for await (const chunk of opened.stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * A job's images: those of the attempt that charged it, or (jobs created before images were kept per
 * attempt) the job's only row; from storage, or from the row for images kept before migration 016.
 * Null when none were stored for it (or an object is missing).
 */
export async function loadVideoJobInputs(db: Db, storage: Storage, job_id: string): Promise<VideoJobInputs | null> {
  const r = await db.query<{
    image: Buffer | null;
    image_key: string | null;
    image_mime_type: ImageMimeType;
    last_frame: Buffer | null;
    last_frame_key: string | null;
    last_frame_mime_type: ImageMimeType | null;
  }>(
    `SELECT i.image, i.image_key, i.image_mime_type, i.last_frame, i.last_frame_key, i.last_frame_mime_type
       FROM video_job_inputs i LEFT JOIN video_jobs j ON j.id = i.job_id
      WHERE i.job_id = $1 AND (i.attempt_id IS NULL OR i.attempt_id = j.attempt_id)
      ORDER BY i.attempt_id IS NULL LIMIT 1`,
    [job_id],
  );
  const row = r.rows[0];
  if (!row) return null;
  const image = row.image ?? (row.image_key ? await readObject(storage, row.image_key) : null);
  if (!image) return null;
  const last_frame = row.last_frame ?? (row.last_frame_key ? await readObject(storage, row.last_frame_key) : null);
  if (row.last_frame_mime_type && !last_frame) return null;
  return {
    image: { bytes: image, mime_type: row.image_mime_type },
    ...(last_frame && row.last_frame_mime_type ? { last_frame: { bytes: last_frame, mime_type: row.last_frame_mime_type } } : {}),
  };
}
