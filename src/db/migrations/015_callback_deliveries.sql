-- Provider callbacks are nudges with a discipline. A job's poll row keeps the deliveries that nudged it
-- (the replay cache: a repeated delivery changes nothing; at most 32 per job, the newest kept, gone with
-- the row when the job settles, and a delivery older than the providers' 5-minute tolerance is refused
-- by its timestamp anyway), and the earliest time a nudge may make the next poll due: the backend's
-- first poll interval after a poll started, or the wait a failed poll was given (its Retry-After).
ALTER TABLE video_job_polls ADD COLUMN min_interval_ms integer CHECK (min_interval_ms > 0);
ALTER TABLE video_job_polls ADD COLUMN nudge_not_before timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE video_job_polls ADD COLUMN callback_deliveries text[] NOT NULL DEFAULT '{}' CHECK (cardinality(callback_deliveries) <= 32);
