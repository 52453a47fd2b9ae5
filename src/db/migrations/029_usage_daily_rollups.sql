-- Usage by day beside usage by hour, and no count in the charge's lock.
--
-- Reads: a read by day or month summed the hourly rows (usage_rollups), 24 per day and group: 90 days by
-- day and model read about 2,160 rows per group, whatever the requests. usage_daily_rollups holds the
-- same counters per UTC day (same workspace, kind, model, API key and backend), kept by the same
-- triggers in the same statement as the hourly row, so a read by day or month sums about 90 rows per
-- group for 90 days; a read by hour still reads the hourly rows (its ranges span at most 31 days). Each
-- day row is the sum of the hourly rows of its day, which the ledger audit checks (src/usage/audit.ts).
--
-- Writes: the charge (video_job_charge) and the speech hold run inside their workspace's row lock, where
-- every charge of the workspace waits, and the count ran there too: an upsert of the request's hour (the
-- same hot row for every charge of that hour, model and key), by SQL functions PostgreSQL plans again in
-- every transaction (~185 us a charge, measured with EXPLAIN ANALYZE on a loaded machine; charges/s with
-- the count were 74 % of without). Now the rollups hold settled requests only: a pending job or a held
-- speech request writes nothing (the trigger returns at once); its settlement, capture or release adds
-- its whole contribution, and reads and the audit take what is still pending from the requests' own rows
-- (a workspace has few: its pending jobs are capped, its holds are its speech in flight; both indexed).
-- usage_add and usage_minus are PL/pgSQL (planned once per connection) for the settlements' upserts.
--
-- Measured and not chosen: counting the pending request in place in both levels, PL/pgSQL (~95 us a
-- charge, still two upserts on hot rows in the lock); appending each change to a log (an insert, ~25 us)
-- folded into the rollups later by a periodic task, with reads adding what is not folded yet (a task to
-- run and watch, reads over the log). Reading the few pending rows needs neither.
--
-- The previous release's code runs unchanged on this schema: it never writes the rollups itself, the
-- triggers do, with these functions (the release before it has no usage reads).
--
-- Below, with the counted tables locked against writes (as the hourly migration did; waited for at most
-- 5 s, else the migration fails and the next process tries again): the hourly rows give back what the
-- pending jobs and held speech requests added to them, then are summed into days once. Both read one row
-- per pending request or per hour and group, not per request made: seconds even on a large database.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '10min';

-- No foreign key to workspaces (its hourly rows have it): adding one would lock workspaces, which every
-- charge writes, while it is checked. Room left on its pages (fillfactor) keeps its upserts heap-only
-- (HOT): the counters are not indexed.
CREATE TABLE usage_daily_rollups (
  workspace_id        uuid NOT NULL,
  day                 timestamptz NOT NULL CHECK (day = date_trunc('day', day, 'UTC')),
  kind                text NOT NULL CHECK (kind IN ('video', 'speech', 'voice_clone')),
  model               text,
  api_key_id          uuid,
  backend             text,
  requests            bigint NOT NULL DEFAULT 0,
  succeeded           bigint NOT NULL DEFAULT 0,
  failed              bigint NOT NULL DEFAULT 0,
  pending             bigint NOT NULL DEFAULT 0,
  charged_micro_eur   bigint NOT NULL DEFAULT 0,
  refunded_micro_eur  bigint NOT NULL DEFAULT 0,
  cost_micro_eur      bigint NOT NULL DEFAULT 0,
  videos              bigint NOT NULL DEFAULT 0,
  video_seconds       bigint NOT NULL DEFAULT 0,
  characters          bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 70);
-- The upsert's key, and the reads' index: a workspace's days in a range.
CREATE UNIQUE INDEX usage_daily_rollups_key ON usage_daily_rollups (workspace_id, day, kind, model, api_key_id, backend) NULLS NOT DISTINCT;
-- The operators' reads across workspaces.
CREATE INDEX usage_daily_rollups_day ON usage_daily_rollups (day);

-- Adds `c` (requests, succeeded, failed, pending, charged, refunded, cost, videos, video_seconds,
-- characters) to the request's hour and to its day. The callers hold the workspace's or the request's row
-- lock (see the hourly migration): rows are taken hour first, then day, in the callers' fixed order.
CREATE OR REPLACE FUNCTION usage_add(
  p_workspace_id uuid, p_created_at timestamptz, p_kind text, p_model text, p_api_key_id uuid, p_backend text, c bigint[]
) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  INSERT INTO usage_rollups AS u (workspace_id, hour, kind, model, api_key_id, backend, requests, succeeded, failed, pending,
                                  charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
  VALUES (p_workspace_id, date_trunc('hour', p_created_at, 'UTC'), p_kind, p_model, p_api_key_id, p_backend,
          c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10])
  ON CONFLICT (workspace_id, hour, kind, model, api_key_id, backend) DO UPDATE SET
    requests = u.requests + EXCLUDED.requests, succeeded = u.succeeded + EXCLUDED.succeeded, failed = u.failed + EXCLUDED.failed,
    pending = u.pending + EXCLUDED.pending, charged_micro_eur = u.charged_micro_eur + EXCLUDED.charged_micro_eur,
    refunded_micro_eur = u.refunded_micro_eur + EXCLUDED.refunded_micro_eur, cost_micro_eur = u.cost_micro_eur + EXCLUDED.cost_micro_eur,
    videos = u.videos + EXCLUDED.videos, video_seconds = u.video_seconds + EXCLUDED.video_seconds, characters = u.characters + EXCLUDED.characters;
  INSERT INTO usage_daily_rollups AS u (workspace_id, day, kind, model, api_key_id, backend, requests, succeeded, failed, pending,
                                        charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
  VALUES (p_workspace_id, date_trunc('day', p_created_at, 'UTC'), p_kind, p_model, p_api_key_id, p_backend,
          c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10])
  ON CONFLICT (workspace_id, day, kind, model, api_key_id, backend) DO UPDATE SET
    requests = u.requests + EXCLUDED.requests, succeeded = u.succeeded + EXCLUDED.succeeded, failed = u.failed + EXCLUDED.failed,
    pending = u.pending + EXCLUDED.pending, charged_micro_eur = u.charged_micro_eur + EXCLUDED.charged_micro_eur,
    refunded_micro_eur = u.refunded_micro_eur + EXCLUDED.refunded_micro_eur, cost_micro_eur = u.cost_micro_eur + EXCLUDED.cost_micro_eur,
    videos = u.videos + EXCLUDED.videos, video_seconds = u.video_seconds + EXCLUDED.video_seconds, characters = u.characters + EXCLUDED.characters;
END $$;

CREATE OR REPLACE FUNCTION usage_minus(a bigint[], b bigint[]) RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN ARRAY[a[1] - b[1], a[2] - b[2], a[3] - b[3], a[4] - b[4], a[5] - b[5], a[6] - b[6], a[7] - b[7], a[8] - b[8], a[9] - b[9], a[10] - b[10]];
END $$;

-- What a request's row has written into the rollups: its counters once it is settled, nothing while it is
-- pending (a job charged, not settled; a speech request held): reads and the audit take those from the
-- rows themselves (few per workspace: its pending jobs are capped, its holds are its speech in flight).
-- So the charge and the hold, inside the workspace's lock, write no rollup; the settlement, the capture
-- and the release write the whole contribution in their hour and day.
CREATE FUNCTION usage_video_job_written(j video_jobs) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN j.status = 'pending' THEN ARRAY[0,0,0,0,0,0,0,0,0,0]::bigint[] ELSE usage_video_job_counts(j) END
$$;
CREATE FUNCTION usage_speech_written(s speech_requests) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN s.status = 'held' THEN ARRAY[0,0,0,0,0,0,0,0,0,0]::bigint[] ELSE usage_speech_counts(s) END
$$;

CREATE OR REPLACE FUNCTION usage_video_jobs_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    PERFORM usage_move('video', OLD.workspace_id, OLD.created_at, OLD.model, OLD.api_key_id, OLD.backend, usage_video_job_written(OLD),
                       NEW.workspace_id, NEW.created_at, NEW.model, NEW.api_key_id, NEW.backend, usage_video_job_written(NEW));
  ELSIF NEW.status <> 'pending' THEN
    PERFORM usage_add(NEW.workspace_id, NEW.created_at, 'video', NEW.model, NEW.api_key_id, NEW.backend, usage_video_job_counts(NEW));
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION usage_speech_requests_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    PERFORM usage_move('speech', OLD.workspace_id, OLD.created_at, OLD.model, OLD.api_key_id, OLD.backend, usage_speech_written(OLD),
                       NEW.workspace_id, NEW.created_at, NEW.model, NEW.api_key_id, NEW.backend, usage_speech_written(NEW));
  ELSIF NEW.status <> 'held' THEN
    PERFORM usage_add(NEW.workspace_id, NEW.created_at, 'speech', NEW.model, NEW.api_key_id, NEW.backend, usage_speech_counts(NEW));
  END IF;
  RETURN NULL;
END $$;

-- From here to the commit no request is written: the triggers count as above from the commit on. The
-- hourly rows give back what the pending jobs and held speech requests added to them, and are then
-- summed into days once.
LOCK TABLE video_jobs, speech_requests, voices IN SHARE ROW EXCLUSIVE MODE;

UPDATE usage_rollups u
   SET requests = u.requests - p.requests, pending = u.pending - p.requests, charged_micro_eur = u.charged_micro_eur - p.charged,
       refunded_micro_eur = u.refunded_micro_eur - p.refunded, cost_micro_eur = u.cost_micro_eur - p.cost
  FROM (SELECT workspace_id, date_trunc('hour', created_at, 'UTC') AS hour, 'video' AS kind, model, api_key_id, backend,
               count(*) AS requests, sum(estimated_cost_micro_eur) AS charged,
               sum(refunded_micro_eur) AS refunded, sum(COALESCE(cost_micro_eur, 0)) AS cost
          FROM video_jobs WHERE status = 'pending' GROUP BY 1, 2, 3, 4, 5, 6
        UNION ALL
        SELECT workspace_id, date_trunc('hour', created_at, 'UTC'), 'speech', model, api_key_id, backend, count(*), 0, 0, 0
          FROM speech_requests WHERE status = 'held' GROUP BY 1, 2, 3, 4, 5, 6) p
 WHERE u.workspace_id = p.workspace_id AND u.hour = p.hour AND u.kind = p.kind AND u.model IS NOT DISTINCT FROM p.model
   AND u.api_key_id IS NOT DISTINCT FROM p.api_key_id AND u.backend IS NOT DISTINCT FROM p.backend;

INSERT INTO usage_daily_rollups (workspace_id, day, kind, model, api_key_id, backend, requests, succeeded, failed, pending,
                                 charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
SELECT workspace_id, date_trunc('day', hour, 'UTC'), kind, model, api_key_id, backend, sum(requests), sum(succeeded), sum(failed),
       sum(pending), sum(charged_micro_eur), sum(refunded_micro_eur), sum(cost_micro_eur), sum(videos), sum(video_seconds), sum(characters)
  FROM usage_rollups GROUP BY 1, 2, 3, 4, 5, 6;
