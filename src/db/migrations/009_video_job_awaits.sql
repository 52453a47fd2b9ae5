-- Jobs whose provider operation the workers' pollers await (a pending job costs a row, not
-- a running activity). The awaiting activity's attempt records itself here (its task token, what to poll,
-- how often) and returns without completing; any worker's poller claims the rows that are due, polls
-- the provider, and completes, fails or heartbeats the attempt with its task token. A worker that dies
-- leaves rows, not state: its claims expire (lease_until) and another worker's poller takes them.
-- A row is the current attempt's: a retried attempt replaces the token of the one before.
CREATE TABLE video_job_awaits (
  job_id               uuid PRIMARY KEY REFERENCES video_jobs(id),
  task_token           bytea NOT NULL CHECK (length(task_token) BETWEEN 1 AND 4096),
  backend              text NOT NULL,
  operation_id         text NOT NULL,
  -- The attempt's result: { operation_id, status } (submitAndAwaitVideoGeneration) or the status.
  with_operation       boolean NOT NULL,
  poll_interval_ms     integer NOT NULL CHECK (poll_interval_ms > 0),
  poll_max_interval_ms integer NOT NULL CHECK (poll_max_interval_ms >= poll_interval_ms),
  next_interval_ms     integer NOT NULL CHECK (next_interval_ms > 0),
  next_poll_at         timestamptz NOT NULL,
  heartbeat_every_ms   integer NOT NULL CHECK (heartbeat_every_ms > 0),
  next_heartbeat_at    timestamptz NOT NULL,
  -- The attempt's deadline (its schedule-to-close timeout): past it Temporal has timed the attempt out.
  ends_at              timestamptz,
  -- The job's failed polls in a row are known to be 0 (spares the statement that would reset them).
  failures_known_zero  boolean NOT NULL DEFAULT false,
  -- The worker polling or heartbeating the row now, until lease_until.
  lease_owner          text,
  lease_until          timestamptz,
  CHECK ((lease_owner IS NULL) = (lease_until IS NULL))
);

-- The poller's claim: the rows due first.
CREATE INDEX video_job_awaits_due ON video_job_awaits (LEAST(next_poll_at, next_heartbeat_at));
