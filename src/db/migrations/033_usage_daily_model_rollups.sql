-- Usage by day and model alone, beside the daily rows by kind, model, API key and backend.
--
-- Reads: the console's first chart and the most common read is cost by day and model. From the daily
-- rows (029_usage_daily_rollups.sql) it summed every key's, kind's and backend's row of each day and
-- model: 90 days for a workspace with a few keys was about 3,300 rows summed into 820 groups, most of
-- the read's time. usage_daily_model_rollups holds the same counters per workspace, UTC day and model,
-- so a read by day or month grouped by model (or by nothing, or by workspace across workspaces) reads one
-- row per day and group. Reads grouped by key, kind or backend keep reading the daily rows.
--
-- Writes: usage_add upserts this row after the hourly and the daily one, in the same statement. Nothing
-- changes for a charge or a hold (they write no rollup); a settlement, a capture or a release upserts a
-- third row. Taken last, in the callers' fixed order (workspace, time, model, ...), so rows of this level
-- are taken in the same order as the others. Each row is the sum of its day's daily rows of that model,
-- which the ledger audit checks (src/usage/audit.ts).
--
-- The previous release's code runs unchanged on this schema: the triggers keep the rows, not its code.
--
-- Below, with the counted tables locked against writes (waited for at most 5 s, else the migration fails
-- and the next process tries again), the daily rows are summed by model once: one row read per day and
-- group, not per request.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '10min';

LOCK TABLE video_jobs, speech_requests, voices IN SHARE ROW EXCLUSIVE MODE;

-- No foreign key to workspaces, as for the daily rows. Room left on its pages (fillfactor) keeps its
-- upserts heap-only (HOT): the counters are not indexed.
CREATE TABLE usage_daily_model_rollups (
  workspace_id        uuid NOT NULL,
  day                 timestamptz NOT NULL CHECK (day = date_trunc('day', day, 'UTC')),
  model               text,      -- NULL for clones
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
-- The upsert's key, and the reads' index: a workspace's days in a range, in model order.
CREATE UNIQUE INDEX usage_daily_model_rollups_key ON usage_daily_model_rollups (workspace_id, day, model) NULLS NOT DISTINCT;
-- The operators' reads across workspaces.
CREATE INDEX usage_daily_model_rollups_day ON usage_daily_model_rollups (day);

-- Adds `c` (requests, succeeded, failed, pending, charged, refunded, cost, videos, video_seconds,
-- characters) to the request's hour, its day, and its day and model.
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
  INSERT INTO usage_daily_model_rollups AS u (workspace_id, day, model, requests, succeeded, failed, pending,
                                              charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
  VALUES (p_workspace_id, date_trunc('day', p_created_at, 'UTC'), p_model,
          c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10])
  ON CONFLICT (workspace_id, day, model) DO UPDATE SET
    requests = u.requests + EXCLUDED.requests, succeeded = u.succeeded + EXCLUDED.succeeded, failed = u.failed + EXCLUDED.failed,
    pending = u.pending + EXCLUDED.pending, charged_micro_eur = u.charged_micro_eur + EXCLUDED.charged_micro_eur,
    refunded_micro_eur = u.refunded_micro_eur + EXCLUDED.refunded_micro_eur, cost_micro_eur = u.cost_micro_eur + EXCLUDED.cost_micro_eur,
    videos = u.videos + EXCLUDED.videos, video_seconds = u.video_seconds + EXCLUDED.video_seconds, characters = u.characters + EXCLUDED.characters;
END $$;

INSERT INTO usage_daily_model_rollups (workspace_id, day, model, requests, succeeded, failed, pending,
                                       charged_micro_eur, refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters)
SELECT workspace_id, day, model, sum(requests), sum(succeeded), sum(failed), sum(pending), sum(charged_micro_eur),
       sum(refunded_micro_eur), sum(cost_micro_eur), sum(videos), sum(video_seconds), sum(characters)
  FROM usage_daily_rollups GROUP BY 1, 2, 3;
