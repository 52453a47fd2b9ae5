// A finished job's files that nobody refers to are deleted. Run by the reconciler (activities/reconciler.ts),
// a page per run.
//
// A job's videos are stored as videos/<job id>/<index>.mp4 (./outputs.ts), index < n. A copy
// that finishes after the job was settled without it (a cancel's clean-up ran first, or the copy was
// abandoned and retried) leaves a file the job does not list: once the job has been finished longer
// than any copy can take, every such key of the job is deleted, with the images it was created with
// (./images.ts), and the job is marked swept. A deleted job is swept again after its deletion (its mark
// is cleared then), with its kept thumbnail, so a thumbnail written while the deletion ran does not
// outlive it.
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { thumbnailKey, videoOutputKey } from '../storage/retention.js';
import { deleteVideoJobInputs } from './images.js';

/**
 * Deletes the stored videos of up to `limit` jobs finished more than `grace_ms` ago that their record
 * does not list (all of them for a failed or deleted job); answers the number of files deleted.
 */
export async function sweepFinishedJobFiles(db: Db, storage: Storage, grace_ms: number, limit: number): Promise<number> {
  const jobs = await db.query<{ id: string; n: number; kept: string[]; deleted: boolean }>(
    `SELECT j.id, (j.params->>'n')::int AS n, j.deleted_at IS NOT NULL AS deleted,
            COALESCE((SELECT array_agg(v->>'storage_key') FROM jsonb_array_elements(j.videos) v), '{}') AS kept
       FROM video_jobs j
      WHERE j.status <> 'pending' AND j.storage_swept_at IS NULL AND j.completed_at < now() - make_interval(secs => $1::float8 / 1000)
      ORDER BY j.completed_at LIMIT $2`,
    [grace_ms, limit],
  );
  let deleted = 0;
  for (const job of jobs.rows) {
    for (let i = 0; i < job.n; i++) {
      const key = videoOutputKey(job.id, i);
      if (!job.deleted && job.kept.includes(key)) continue;
      await storage.delete(key);
      deleted++;
    }
    if (job.deleted) {
      await storage.delete(thumbnailKey(job.id));
      deleted++;
    }
    // The job is never submitted again: its images go too.
    await deleteVideoJobInputs(db, storage, job.id);
    await db.query('UPDATE video_jobs SET storage_swept_at = now() WHERE id = $1', [job.id]);
  }
  return deleted;
}
