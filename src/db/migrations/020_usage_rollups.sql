-- Usage (GET /v2/usage, GET /admin/v1/usage): one row of counters per workspace, hour (UTC), kind, model,
-- API key and backend. A request counts in the hour it was created; every later change of it (settled,
-- refunded, captured, released, moved to another backend) updates that same hour's row.
--
-- The counters are kept by triggers on the rows whose changes move the money (video_jobs, speech_requests)
-- and on voices (clones: counted, not charged), so they change in the very transaction, and statement,
-- that writes the ledger entry or the state change: the charge (the function video_job_charge), the
-- settlement, a speech capture or release. Nothing recomputes them from the ledger; the ledger audit
-- (src/usage/audit.ts) checks that they equal it. Because the database keeps them, a process of the
-- previous release running against this schema keeps them exact too.
--
-- A row's contribution is what its current state says (a job: 1 request, its outcome, its charge, refund,
-- cost and videos); a change subtracts the old contribution and adds the new one. Only inserts and
-- updates count: a row is never deleted (a deleted job is marked), and usage is history.
CREATE TABLE usage_rollups (
  workspace_id        uuid NOT NULL REFERENCES workspaces(id),
  hour                timestamptz NOT NULL CHECK (hour = date_trunc('hour', hour, 'UTC')),
  kind                text NOT NULL CHECK (kind IN ('video', 'speech', 'voice_clone')),
  model               text,      -- NULL for clones
  api_key_id          uuid,      -- NULL: made without a key (none in this release)
  backend             text,      -- the video backend that ran the job, the voice provider; NULL: not recorded
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
);
-- The upsert's key, and the reads' index: a workspace's hours in a range.
CREATE UNIQUE INDEX usage_rollups_key ON usage_rollups (workspace_id, hour, kind, model, api_key_id, backend) NULLS NOT DISTINCT;
-- The operators' reads across workspaces.
CREATE INDEX usage_rollups_hour ON usage_rollups (hour);

-- The voice provider a speech request was spoken by (NULL: recorded by a release before this column).
ALTER TABLE speech_requests ADD COLUMN backend text;
-- The API key that cloned a voice (NULL: before this column).
ALTER TABLE voices ADD COLUMN api_key_id uuid REFERENCES api_keys(id);

-- Adds `sign` times one request's contribution to its row. Callers within one statement take rows in
-- a fixed order (usage_move), and every writer of a workspace's rows holds its workspace row lock or the
-- request's own row lock first, so concurrent requests of one workspace queue as they do on the balance.
CREATE FUNCTION usage_add(
  p_workspace_id uuid, p_created_at timestamptz, p_kind text, p_model text, p_api_key_id uuid, p_backend text, sign integer,
  requests bigint, succeeded bigint, failed bigint, pending bigint, charged bigint, refunded bigint, cost bigint,
  videos bigint, video_seconds bigint, characters bigint
) RETURNS void LANGUAGE sql VOLATILE AS $$
  INSERT INTO usage_rollups AS u (workspace_id, hour, kind, model, api_key_id, backend, requests, succeeded, failed, pending,
                                  charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
  VALUES (p_workspace_id, date_trunc('hour', p_created_at, 'UTC'), p_kind, p_model, p_api_key_id, p_backend,
          sign * requests, sign * succeeded, sign * failed, sign * pending, sign * charged, sign * refunded, sign * cost,
          sign * videos, sign * video_seconds, sign * characters)
  ON CONFLICT (workspace_id, hour, kind, model, api_key_id, backend) DO UPDATE SET
    requests = u.requests + EXCLUDED.requests, succeeded = u.succeeded + EXCLUDED.succeeded, failed = u.failed + EXCLUDED.failed,
    pending = u.pending + EXCLUDED.pending, charged_micro_eur = u.charged_micro_eur + EXCLUDED.charged_micro_eur,
    refunded_micro_eur = u.refunded_micro_eur + EXCLUDED.refunded_micro_eur, cost_micro_eur = u.cost_micro_eur + EXCLUDED.cost_micro_eur,
    videos = u.videos + EXCLUDED.videos, video_seconds = u.video_seconds + EXCLUDED.video_seconds, characters = u.characters + EXCLUDED.characters
$$;

-- One video job's contribution: a request, its outcome, its charge (the estimate, charged at creation),
-- its refund and cost (set at settlement), the videos it delivered and their seconds.
CREATE FUNCTION usage_video_job_add(j video_jobs, sign integer) RETURNS void LANGUAGE sql VOLATILE AS $$
  SELECT usage_add(j.workspace_id, j.created_at, 'video', j.model, j.api_key_id, j.backend, sign,
    1, (j.status = 'succeeded')::int, (j.status = 'failed')::int, (j.status = 'pending')::int,
    j.estimated_cost_micro_eur, j.refunded_micro_eur, COALESCE(j.cost_micro_eur, 0),
    CASE WHEN j.status = 'succeeded' THEN jsonb_array_length(j.videos) ELSE 0 END,
    CASE WHEN j.status = 'succeeded' THEN jsonb_array_length(j.videos) * COALESCE((j.params->>'durationSeconds')::int, 0) ELSE 0 END,
    0)
$$;

-- One speech request's contribution: held = pending, delivered = succeeded (its capture is its charge and
-- its cost), released = failed (nothing charged). A retry of a released request under the same
-- Idempotency-Key is the same request, held again.
CREATE FUNCTION usage_speech_add(s speech_requests, sign integer) RETURNS void LANGUAGE sql VOLATILE AS $$
  SELECT usage_add(s.workspace_id, s.created_at, 'speech', s.model, s.api_key_id, s.backend, sign,
    1, (s.status = 'delivered')::int, (s.status = 'released')::int, (s.status = 'held')::int,
    CASE WHEN s.status = 'delivered' THEN s.cost_micro_eur ELSE 0 END, 0,
    CASE WHEN s.status = 'delivered' THEN s.cost_micro_eur ELSE 0 END,
    0, 0, CASE WHEN s.status = 'delivered' THEN s.characters ELSE 0 END)
$$;

CREATE FUNCTION usage_video_jobs_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    -- Moved to another backend (a failover): the old row first or the new one, in one fixed order.
    IF COALESCE(OLD.backend, '') <= COALESCE(NEW.backend, '') THEN
      PERFORM usage_video_job_add(OLD, -1);
      PERFORM usage_video_job_add(NEW, 1);
    ELSE
      PERFORM usage_video_job_add(NEW, 1);
      PERFORM usage_video_job_add(OLD, -1);
    END IF;
  ELSE
    PERFORM usage_video_job_add(NEW, 1);
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION usage_speech_requests_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    PERFORM usage_speech_add(OLD, -1);
  END IF;
  PERFORM usage_speech_add(NEW, 1);
  RETURN NULL;
END $$;

CREATE FUNCTION usage_voices_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM usage_add(NEW.workspace_id, NEW.created_at, 'voice_clone', NULL, NEW.api_key_id, NEW.provider, 1,
    1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  RETURN NULL;
END $$;

-- The rows are counted from here on, and what exists now is counted once, below: no writer runs meanwhile.
LOCK TABLE video_jobs, speech_requests, voices IN SHARE ROW EXCLUSIVE MODE;

-- Only the columns that change a contribution fire the update triggers (a poll's progress does not).
CREATE TRIGGER usage_video_jobs_insert AFTER INSERT ON video_jobs FOR EACH ROW EXECUTE FUNCTION usage_video_jobs_trigger();
CREATE TRIGGER usage_video_jobs_update AFTER UPDATE ON video_jobs FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.backend IS DISTINCT FROM NEW.backend
        OR OLD.cost_micro_eur IS DISTINCT FROM NEW.cost_micro_eur OR OLD.refunded_micro_eur IS DISTINCT FROM NEW.refunded_micro_eur
        OR OLD.estimated_cost_micro_eur IS DISTINCT FROM NEW.estimated_cost_micro_eur OR OLD.api_key_id IS DISTINCT FROM NEW.api_key_id
        OR OLD.videos IS DISTINCT FROM NEW.videos OR OLD.model IS DISTINCT FROM NEW.model OR OLD.created_at IS DISTINCT FROM NEW.created_at)
  EXECUTE FUNCTION usage_video_jobs_trigger();
CREATE TRIGGER usage_speech_requests_insert AFTER INSERT ON speech_requests FOR EACH ROW EXECUTE FUNCTION usage_speech_requests_trigger();
CREATE TRIGGER usage_speech_requests_update AFTER UPDATE ON speech_requests FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.cost_micro_eur IS DISTINCT FROM NEW.cost_micro_eur
        OR OLD.api_key_id IS DISTINCT FROM NEW.api_key_id OR OLD.backend IS DISTINCT FROM NEW.backend
        OR OLD.characters IS DISTINCT FROM NEW.characters OR OLD.model IS DISTINCT FROM NEW.model OR OLD.created_at IS DISTINCT FROM NEW.created_at)
  EXECUTE FUNCTION usage_speech_requests_trigger();
CREATE TRIGGER usage_voices_insert AFTER INSERT ON voices FOR EACH ROW EXECUTE FUNCTION usage_voices_trigger();

-- What existed before this migration, counted once, as the triggers would have (the table is empty: one row per group).
INSERT INTO usage_rollups (workspace_id, hour, kind, model, api_key_id, backend, requests, succeeded, failed, pending,
                           charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
SELECT j.workspace_id, date_trunc('hour', j.created_at, 'UTC'), 'video', j.model, j.api_key_id, j.backend, count(*),
       count(*) FILTER (WHERE j.status = 'succeeded'), count(*) FILTER (WHERE j.status = 'failed'), count(*) FILTER (WHERE j.status = 'pending'),
       sum(j.estimated_cost_micro_eur), sum(j.refunded_micro_eur), COALESCE(sum(j.cost_micro_eur), 0),
       COALESCE(sum(jsonb_array_length(j.videos)) FILTER (WHERE j.status = 'succeeded'), 0),
       COALESCE(sum(jsonb_array_length(j.videos) * COALESCE((j.params->>'durationSeconds')::int, 0)) FILTER (WHERE j.status = 'succeeded'), 0), 0
  FROM video_jobs j GROUP BY 1, 2, 3, 4, 5, 6
UNION ALL
SELECT s.workspace_id, date_trunc('hour', s.created_at, 'UTC'), 'speech', s.model, s.api_key_id, NULL, count(*),
       count(*) FILTER (WHERE s.status = 'delivered'), count(*) FILTER (WHERE s.status = 'released'), count(*) FILTER (WHERE s.status = 'held'),
       COALESCE(sum(s.cost_micro_eur) FILTER (WHERE s.status = 'delivered'), 0), 0, COALESCE(sum(s.cost_micro_eur) FILTER (WHERE s.status = 'delivered'), 0),
       0, 0, COALESCE(sum(s.characters) FILTER (WHERE s.status = 'delivered'), 0)
  FROM speech_requests s GROUP BY 1, 2, 3, 4, 5, 6
UNION ALL
SELECT v.workspace_id, date_trunc('hour', v.created_at, 'UTC'), 'voice_clone', NULL, NULL::uuid, v.provider, count(*), count(*), 0, 0, 0, 0, 0, 0, 0, 0
  FROM voices v GROUP BY 1, 2, 3, 4, 5, 6;
