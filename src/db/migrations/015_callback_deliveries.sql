-- Provider callbacks are nudges with a discipline. A job's poll row keeps the deliveries that nudged it
-- (the replay cache: a repeated delivery changes nothing; at most 32 per job, the newest kept, gone with
-- the row when the job settles, and a delivery older than the providers' 5-minute tolerance is refused
-- by its timestamp anyway), and the earliest time a nudge may make the next poll due: a second after
-- the last poll started, or the wait a failed poll was given (its backoff, or the provider's Retry-After).
ALTER TABLE video_job_polls ADD COLUMN nudge_not_before timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE video_job_polls ADD COLUMN callback_deliveries text[] NOT NULL DEFAULT '{}' CHECK (cardinality(callback_deliveries) <= 32);
-- A nudge that no poll has started since: one arriving while a poll is in progress keeps its effect when
-- that poll reschedules the row (the poll may have read the provider before the change the nudge announced).
ALTER TABLE video_job_polls ADD COLUMN nudge_pending boolean NOT NULL DEFAULT false;
