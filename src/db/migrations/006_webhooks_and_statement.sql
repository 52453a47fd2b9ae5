-- The customer's ledger statement (balance after each entry) and signed webhooks.

-- The balance after each entry, written by applyEntry in the same transaction (under the workspace
-- row lock, so entries of one workspace are numbered in the order they were applied). Existing rows
-- are filled with the running sum of their workspace's entries in id order, which is that order.
ALTER TABLE ledger_entries ADD COLUMN balance_after_micro_eur bigint;
ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_no_update;
UPDATE ledger_entries l SET balance_after_micro_eur = s.running
  FROM (SELECT id, SUM(amount_micro_eur) OVER (PARTITION BY workspace_id ORDER BY id) AS running FROM ledger_entries) s
 WHERE s.id = l.id;
ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_no_update;
ALTER TABLE ledger_entries ALTER COLUMN balance_after_micro_eur SET NOT NULL;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_balance_after_nonnegative CHECK (balance_after_micro_eur >= 0);
-- The statement (GET /v2/ledger): a workspace's entries newest first, by keyset on id. It also
-- serves every lookup by workspace the old single-column index served.
CREATE INDEX ledger_entries_workspace_id ON ledger_entries (workspace_id, id DESC);
DROP INDEX ledger_entries_workspace;

-- Revocation (DELETE /admin/v1/api-keys/{id}) sets api_keys.revoked_at, which authentication
-- already checks on every request: no schema change needed.

-- A workspace's webhook endpoints. The signing secret must be readable to sign with (it is shown
-- to the customer once, at creation). Deleting marks the row: deliveries keep referring to it.
CREATE TABLE webhook_endpoints (
  id            uuid PRIMARY KEY,
  workspace_id  uuid NOT NULL REFERENCES workspaces(id),
  url           text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
  events        text[] NOT NULL CHECK (cardinality(events) >= 1),
  secret        text NOT NULL CHECK (secret LIKE 'whsec\_%'),
  created_at    timestamptz NOT NULL DEFAULT now(),
  deleted_at    timestamptz
);
CREATE INDEX webhook_endpoints_workspace_live ON webhook_endpoints (workspace_id, created_at DESC) WHERE deleted_at IS NULL;

-- One event per (job, type), recorded in the job's settlement transaction with its body as sent
-- (the exact bytes that are signed).
CREATE TABLE webhook_events (
  id            text PRIMARY KEY CHECK (id ~ '^evt_[0-9a-f]{32}$'),
  workspace_id  uuid NOT NULL REFERENCES workspaces(id),
  type          text NOT NULL CHECK (type IN ('video.generation.succeeded', 'video.generation.failed')),
  video_job_id  uuid NOT NULL REFERENCES video_jobs(id),
  payload       text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (video_job_id, type)
);

-- One delivery of an event to one endpoint, run by the workflow `webhook-delivery-<id>`.
-- dispatched_at: that workflow has been started (NULL rows are started by dispatchUndispatched).
CREATE TABLE webhook_deliveries (
  id            uuid PRIMARY KEY,
  event_id      text NOT NULL REFERENCES webhook_events(id),
  endpoint_id   uuid NOT NULL REFERENCES webhook_endpoints(id),
  workspace_id  uuid NOT NULL REFERENCES workspaces(id),
  status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts      integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  last_error    text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  dispatched_at timestamptz,
  completed_at  timestamptz,
  UNIQUE (event_id, endpoint_id),
  CHECK ((status = 'pending') = (completed_at IS NULL))
);
CREATE INDEX webhook_deliveries_undispatched ON webhook_deliveries (created_at) WHERE dispatched_at IS NULL;

-- Every HTTP attempt of a delivery, for GET /v2/webhooks/{id}/deliveries (newest first per endpoint).
CREATE TABLE webhook_delivery_attempts (
  id            bigserial PRIMARY KEY,
  delivery_id   uuid NOT NULL REFERENCES webhook_deliveries(id),
  endpoint_id   uuid NOT NULL REFERENCES webhook_endpoints(id),
  attempt       integer NOT NULL CHECK (attempt >= 1),
  attempted_at  timestamptz NOT NULL,
  duration_ms   integer NOT NULL CHECK (duration_ms >= 0),
  succeeded     boolean NOT NULL,
  http_status   integer CHECK (http_status BETWEEN 100 AND 599),
  error         text CHECK (length(error) <= 500),
  UNIQUE (delivery_id, attempt),
  CHECK (succeeded = COALESCE(http_status BETWEEN 200 AND 299, false))
);
CREATE INDEX webhook_delivery_attempts_endpoint ON webhook_delivery_attempts (endpoint_id, id DESC);
