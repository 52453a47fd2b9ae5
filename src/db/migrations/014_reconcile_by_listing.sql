-- The reconciler compares pending jobs with Temporal's listing of running job workflows instead of
-- asking about each job: it reads pending jobs oldest first and marks nothing. reconciled_at is no longer
-- written; it stays for the previous release's workers, which write it while an upgrade rolls out.
DROP INDEX IF EXISTS video_jobs_pending;
CREATE INDEX video_jobs_pending ON video_jobs (created_at, id) WHERE status = 'pending';
