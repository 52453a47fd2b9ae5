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
--
-- The existing rows are counted once below, with the three tables locked against writes meanwhile: the
-- lock is waited for at most 5 s (the migration fails and is tried again by the next process), and the
-- count may take minutes on a large database.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '10min';
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
-- The API key that cloned a voice (NULL: before this column). No foreign key: keys are never deleted
-- (revoked keys keep their row), and adding one would lock api_keys against writes while it is checked.
ALTER TABLE voices ADD COLUMN api_key_id uuid;

-- A request's counters, in this order: requests, succeeded, failed, pending, charged, refunded, cost,
-- videos, video_seconds, characters (micro-euros for money).
--
-- Adds `c` to the row of the request's hour and fields. Every writer of a workspace's rows holds its
-- workspace row lock or the request's own row lock first, so concurrent requests of one workspace queue
-- as they do on the balance; one statement that moves a request between rows takes them in a fixed order.
CREATE FUNCTION usage_add(
  p_workspace_id uuid, p_created_at timestamptz, p_kind text, p_model text, p_api_key_id uuid, p_backend text, c bigint[]
) RETURNS void LANGUAGE sql VOLATILE AS $$
  INSERT INTO usage_rollups AS u (workspace_id, hour, kind, model, api_key_id, backend, requests, succeeded, failed, pending,
                                  charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
  VALUES (p_workspace_id, date_trunc('hour', p_created_at, 'UTC'), p_kind, p_model, p_api_key_id, p_backend,
          c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10])
  ON CONFLICT (workspace_id, hour, kind, model, api_key_id, backend) DO UPDATE SET
    requests = u.requests + EXCLUDED.requests, succeeded = u.succeeded + EXCLUDED.succeeded, failed = u.failed + EXCLUDED.failed,
    pending = u.pending + EXCLUDED.pending, charged_micro_eur = u.charged_micro_eur + EXCLUDED.charged_micro_eur,
    refunded_micro_eur = u.refunded_micro_eur + EXCLUDED.refunded_micro_eur, cost_micro_eur = u.cost_micro_eur + EXCLUDED.cost_micro_eur,
    videos = u.videos + EXCLUDED.videos, video_seconds = u.video_seconds + EXCLUDED.video_seconds, characters = u.characters + EXCLUDED.characters
$$;

-- One video job's counters: a request, its outcome, its charge (the estimate, charged at creation), its
-- refund and cost (set at settlement), the videos it delivered and their seconds.
CREATE FUNCTION usage_video_job_counts(j video_jobs) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY[1, (j.status = 'succeeded')::int, (j.status = 'failed')::int, (j.status = 'pending')::int,
    j.estimated_cost_micro_eur, j.refunded_micro_eur, COALESCE(j.cost_micro_eur, 0),
    CASE WHEN j.status = 'succeeded' THEN jsonb_array_length(j.videos) ELSE 0 END,
    CASE WHEN j.status = 'succeeded' THEN jsonb_array_length(j.videos) * COALESCE((j.params->>'durationSeconds')::int, 0) ELSE 0 END,
    0]::bigint[]
$$;

-- One speech request's counters: held = pending, delivered = succeeded (its capture is its charge and
-- its cost), released = failed (nothing charged). A retry of a released request under the same
-- Idempotency-Key is the same request, held again.
CREATE FUNCTION usage_speech_counts(s speech_requests) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY[1, (s.status = 'delivered')::int, (s.status = 'released')::int, (s.status = 'held')::int,
    CASE WHEN s.status = 'delivered' THEN s.cost_micro_eur ELSE 0 END, 0,
    CASE WHEN s.status = 'delivered' THEN s.cost_micro_eur ELSE 0 END,
    0, 0, CASE WHEN s.status = 'delivered' THEN s.characters ELSE 0 END]::bigint[]
$$;

CREATE FUNCTION usage_minus(a bigint[], b bigint[]) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
  SELECT array_agg(x - y ORDER BY i) FROM unnest(a, b) WITH ORDINALITY AS t(x, y, i)
$$;

-- A changed request: in the same row, one update by the difference; moved to another row (another
-- backend, key, model or hour), out of the old row and into the new, the two rows in a fixed order.
CREATE FUNCTION usage_move(
  kind text, o_ws uuid, o_at timestamptz, o_model text, o_key uuid, o_backend text, o_c bigint[],
  n_ws uuid, n_at timestamptz, n_model text, n_key uuid, n_backend text, n_c bigint[]
) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF o_ws = n_ws AND date_trunc('hour', o_at, 'UTC') = date_trunc('hour', n_at, 'UTC') AND o_model IS NOT DISTINCT FROM n_model
     AND o_key IS NOT DISTINCT FROM n_key AND o_backend IS NOT DISTINCT FROM n_backend THEN
    IF o_c IS DISTINCT FROM n_c THEN
      PERFORM usage_add(n_ws, n_at, kind, n_model, n_key, n_backend, usage_minus(n_c, o_c));
    END IF;
  ELSIF ROW(o_ws, o_at, COALESCE(o_model, ''), COALESCE(o_key::text, ''), COALESCE(o_backend, ''))
        <= ROW(n_ws, n_at, COALESCE(n_model, ''), COALESCE(n_key::text, ''), COALESCE(n_backend, '')) THEN
    PERFORM usage_add(o_ws, o_at, kind, o_model, o_key, o_backend, usage_minus(ARRAY[0,0,0,0,0,0,0,0,0,0]::bigint[], o_c));
    PERFORM usage_add(n_ws, n_at, kind, n_model, n_key, n_backend, n_c);
  ELSE
    PERFORM usage_add(n_ws, n_at, kind, n_model, n_key, n_backend, n_c);
    PERFORM usage_add(o_ws, o_at, kind, o_model, o_key, o_backend, usage_minus(ARRAY[0,0,0,0,0,0,0,0,0,0]::bigint[], o_c));
  END IF;
END $$;

CREATE FUNCTION usage_video_jobs_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    PERFORM usage_move('video', OLD.workspace_id, OLD.created_at, OLD.model, OLD.api_key_id, OLD.backend, usage_video_job_counts(OLD),
                       NEW.workspace_id, NEW.created_at, NEW.model, NEW.api_key_id, NEW.backend, usage_video_job_counts(NEW));
  ELSE
    PERFORM usage_add(NEW.workspace_id, NEW.created_at, 'video', NEW.model, NEW.api_key_id, NEW.backend, usage_video_job_counts(NEW));
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION usage_speech_requests_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    PERFORM usage_move('speech', OLD.workspace_id, OLD.created_at, OLD.model, OLD.api_key_id, OLD.backend, usage_speech_counts(OLD),
                       NEW.workspace_id, NEW.created_at, NEW.model, NEW.api_key_id, NEW.backend, usage_speech_counts(NEW));
  ELSE
    PERFORM usage_add(NEW.workspace_id, NEW.created_at, 'speech', NEW.model, NEW.api_key_id, NEW.backend, usage_speech_counts(NEW));
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION usage_voices_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM usage_add(NEW.workspace_id, NEW.created_at, 'voice_clone', NULL, NEW.api_key_id, NEW.provider, ARRAY[1,1,0,0,0,0,0,0,0,0]::bigint[]);
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
