-- Completion by signal. A submitted job's provider operation is a row here until the job settles: the
-- workers' pollers claim due rows (SKIP LOCKED, by moving next_poll_at ahead), poll the provider and,
-- once the operation has ended, signal the job's workflow (operationEnded). A provider's verified
-- callback only makes the row due at once. Nothing else is kept per pending job, and nothing in Temporal
-- but the workflow's timer.
DROP TABLE video_job_awaits;

CREATE TABLE video_job_polls (
  job_id          uuid PRIMARY KEY REFERENCES video_jobs(id),
  backend         text NOT NULL,
  operation_id    text NOT NULL CHECK (length(operation_id) BETWEEN 1 AND 4096),
  -- The wait before the next poll (grows by the poller's backoff up to max_interval_ms).
  interval_ms     integer NOT NULL CHECK (interval_ms > 0),
  max_interval_ms integer NOT NULL CHECK (max_interval_ms >= interval_ms),
  next_poll_at    timestamptz NOT NULL,
  -- Failed polls in a row; past the poller's bound the job is told its operation failed.
  failures        integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
  -- When the workflow was last told the operation ended (it is told again, rarely, until it settles).
  signalled_at    timestamptz
);
CREATE INDEX video_job_polls_due ON video_job_polls (next_poll_at);

ALTER TABLE video_jobs DROP COLUMN poll_failures;
-- Progress as the provider reports it; both only move forward (the poller writes GREATEST / LEAST).
ALTER TABLE video_jobs ADD COLUMN progress smallint CHECK (progress BETWEEN 0 AND 100);
ALTER TABLE video_jobs ADD COLUMN queue_position integer CHECK (queue_position >= 0);
-- A job cancelled after its provider started it, whose provider bills the operation: its charge is kept
-- (the customer pays what the operator pays), and the provider's answer is recorded.
ALTER TABLE video_jobs ADD COLUMN cancel_billed boolean NOT NULL DEFAULT false;
ALTER TABLE video_jobs ADD COLUMN cancel_answer text CHECK (length(cancel_answer) <= 1000);
