-- Workspaces, API keys, the credit ledger and video jobs.
-- Money is integer micro-euros (1 EUR = 1_000_000). Balances never go negative (CHECK), and every
-- ledger entry carries a unique idempotency key, so a retried charge or refund is applied once.

CREATE TABLE workspaces (
  id                 uuid PRIMARY KEY,
  name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  balance_micro_eur  bigint NOT NULL DEFAULT 0 CHECK (balance_micro_eur >= 0),
  created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id            uuid PRIMARY KEY,
  workspace_id  uuid NOT NULL REFERENCES workspaces(id),
  key_sha256    bytea NOT NULL UNIQUE,
  key_prefix    text NOT NULL,
  models        text[],            -- NULL = every model
  created_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz
);

CREATE TABLE topups (
  id               uuid PRIMARY KEY,
  workspace_id     uuid NOT NULL REFERENCES workspaces(id),
  amount_micro_eur bigint NOT NULL CHECK (amount_micro_eur > 0),
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE video_jobs (
  id                       uuid PRIMARY KEY,
  workspace_id             uuid NOT NULL REFERENCES workspaces(id),
  workflow_id              text NOT NULL UNIQUE,
  model                    text NOT NULL,
  prompt                   text NOT NULL,
  -- hash of the request: an Idempotency-Key reused with another body is refused, also once the
  -- workflow's history is gone
  request_fingerprint      text NOT NULL,
  params                   jsonb NOT NULL,
  status                   text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  estimated_cost_micro_eur bigint NOT NULL CHECK (estimated_cost_micro_eur > 0),
  cost_micro_eur           bigint CHECK (cost_micro_eur >= 0),
  refunded_micro_eur       bigint NOT NULL DEFAULT 0 CHECK (refunded_micro_eur >= 0),
  videos                   jsonb NOT NULL DEFAULT '[]'::jsonb,
  error                    jsonb,
  created_at               timestamptz NOT NULL,
  completed_at             timestamptz,
  CHECK ((status = 'pending') = (cost_micro_eur IS NULL)),
  CHECK (cost_micro_eur IS NULL OR cost_micro_eur + refunded_micro_eur = estimated_cost_micro_eur)
);
CREATE INDEX video_jobs_workspace_created ON video_jobs (workspace_id, created_at DESC);

CREATE TABLE ledger_entries (
  id               bigserial PRIMARY KEY,
  workspace_id     uuid NOT NULL REFERENCES workspaces(id),
  kind             text NOT NULL CHECK (kind IN ('topup', 'charge', 'refund')),
  amount_micro_eur bigint NOT NULL CHECK (amount_micro_eur <> 0),
  idempotency_key  text NOT NULL UNIQUE,
  video_job_id     uuid REFERENCES video_jobs(id),
  topup_id         uuid REFERENCES topups(id),
  created_at       timestamptz NOT NULL DEFAULT now(),
  -- every entry is traceable to exactly one origin
  CONSTRAINT ledger_entries_one_origin CHECK ((video_job_id IS NOT NULL)::int + (topup_id IS NOT NULL)::int = 1),
  CHECK ((kind = 'topup') = (topup_id IS NOT NULL)),
  CHECK ((kind = 'charge') = (amount_micro_eur < 0))
);
CREATE INDEX ledger_entries_workspace ON ledger_entries (workspace_id);
CREATE INDEX ledger_entries_video_job ON ledger_entries (video_job_id) WHERE video_job_id IS NOT NULL;

-- The ledger is append-only.
CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_entries is append-only';
END $$;
CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- State of the simulated video provider: it behaves as a remote provider whose accepted operations
-- survive our restarts. It lives in its own schema; nothing else reads it.
CREATE SCHEMA simulator;
CREATE TABLE simulator.video_operations (
  id            text PRIMARY KEY,
  request_id    text NOT NULL UNIQUE,
  model         text NOT NULL,
  request       jsonb NOT NULL,
  submitted_at  timestamptz NOT NULL DEFAULT now()
);
