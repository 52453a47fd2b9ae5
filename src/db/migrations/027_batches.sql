-- Batches: many video and speech requests made as one, paid by one reservation.
--
-- A batch reserves the sum of its requests' estimates as one ledger charge carrying batch_id. Its
-- requests (batch_items) run as they would alone, their jobs and speech requests carrying batch_id, and
-- draw their charge from the reservation (remaining_micro_eur), their refunds going back into it: no
-- ledger entry of their own. What the batch did not use returns as a ledger refund carrying batch_id
-- (released_micro_eur). The ledger audit checks, per batch: reserved = its requests' net charges +
-- released + remaining, and remaining = 0 once it ended.
--
-- Uploaded input files and the batches' output and error files are rows of `files` (an input file's
-- bytes are in storage; an output or error file is rendered from its batch's requests when read).
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';

CREATE TABLE files (
  id            uuid PRIMARY KEY,
  workspace_id  uuid NOT NULL REFERENCES workspaces(id),
  purpose       text NOT NULL CHECK (purpose IN ('batch', 'batch_output', 'batch_error')),
  filename      text NOT NULL CHECK (length(filename) BETWEEN 1 AND 255),
  bytes         bigint NOT NULL CHECK (bytes >= 0),
  lines         bigint NOT NULL CHECK (lines >= 0),
  -- the input file's bytes (NULL for output and error files, rendered from batch_id)
  storage_key   text,
  batch_id      uuid,
  created_at    timestamptz NOT NULL DEFAULT now(),
  CHECK ((purpose = 'batch') = (storage_key IS NOT NULL)),
  CHECK ((purpose = 'batch') = (batch_id IS NULL))
);
CREATE INDEX files_workspace_created ON files (workspace_id, created_at DESC);

CREATE TABLE batches (
  id                   uuid PRIMARY KEY,
  workspace_id         uuid NOT NULL REFERENCES workspaces(id),
  api_key_id           uuid,
  -- the endpoint every request names (an input file's), or NULL for inline requests of several kinds
  endpoint             text,
  status               text NOT NULL CHECK (status IN ('validating', 'in_progress', 'completed', 'cancelling', 'cancelled', 'expired', 'failed')),
  total                bigint NOT NULL CHECK (total BETWEEN 1 AND 10000),
  completed            bigint NOT NULL DEFAULT 0 CHECK (completed >= 0),
  failed               bigint NOT NULL DEFAULT 0 CHECK (failed >= 0),
  reserved_micro_eur   bigint NOT NULL CHECK (reserved_micro_eur > 0),
  -- the part of the reservation neither used by a request nor released
  remaining_micro_eur  bigint NOT NULL CHECK (remaining_micro_eur >= 0),
  released_micro_eur   bigint NOT NULL DEFAULT 0 CHECK (released_micro_eur >= 0),
  -- what the requests that ended cost
  cost_micro_eur       bigint NOT NULL DEFAULT 0 CHECK (cost_micro_eur >= 0),
  input_file_id        uuid,
  output_file_id       uuid,
  error_file_id        uuid,
  metadata             jsonb,
  expires_at           timestamptz NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  -- why it stopped before all its requests ran: a cancel, or the end of its completion window
  ending               text CHECK (ending IN ('cancelled', 'expired')),
  cancelling_at        timestamptz,
  completed_at         timestamptz,
  CHECK (completed + failed <= total),
  CHECK (reserved_micro_eur >= remaining_micro_eur + released_micro_eur),
  CHECK (status NOT IN ('completed', 'cancelled', 'expired', 'failed') OR (remaining_micro_eur = 0 AND completed_at IS NOT NULL))
);
CREATE INDEX batches_workspace_created ON batches (workspace_id, created_at DESC, id DESC);

-- One request of a batch, as validated at creation: its body resolved (what its job or speech runs),
-- its estimate, and the id of the job or speech request it becomes, fixed here so that no retry of any
-- step can make it twice. claim_seq: the batch workflow's claim that started it (a retried claim finds
-- the items it claimed). status: queued (not started), running, completed, failed.
CREATE TABLE batch_items (
  batch_id                  uuid NOT NULL REFERENCES batches(id),
  idx                       bigint NOT NULL CHECK (idx >= 0),
  custom_id                 text,
  kind                      text NOT NULL CHECK (kind IN ('video', 'speech')),
  request                   jsonb NOT NULL,
  estimated_cost_micro_eur  bigint NOT NULL CHECK (estimated_cost_micro_eur > 0),
  request_id                uuid NOT NULL UNIQUE,
  status                    text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'completed', 'failed')),
  claim_seq                 bigint,
  cost_micro_eur            bigint CHECK (cost_micro_eur >= 0),
  error                     jsonb,
  PRIMARY KEY (batch_id, idx)
);
CREATE INDEX batch_items_running ON batch_items (batch_id) WHERE status = 'running';
CREATE INDEX batch_items_claim ON batch_items (batch_id, claim_seq) WHERE claim_seq IS NOT NULL;

-- A batch's requests carry it (the job list shows it; the audit adds them up per batch).
ALTER TABLE video_jobs ADD COLUMN batch_id uuid;
ALTER TABLE speech_requests ADD COLUMN batch_id uuid;

-- Ledger entries may now originate from a batch (its reservation, its releases): still one origin each,
-- and only charges and refunds. The new CHECKs are added NOT VALID (no scan, a brief lock): every new or
-- changed row is checked, and the rows already there satisfy them by construction (batch_id is new, NULL
-- in all of them, so the four-origin sum is the three-origin sum the old CHECK held to 1). Validating them
-- would scan the ledger under the migration's lock for nothing.
ALTER TABLE ledger_entries ADD COLUMN batch_id uuid;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_one_origin_of_four
  CHECK ((video_job_id IS NOT NULL)::int + (topup_id IS NOT NULL)::int + (speech_request_id IS NOT NULL)::int + (batch_id IS NOT NULL)::int = 1)
  NOT VALID;
-- Replaced by ledger_entries_one_origin_of_four, which holds every row to the same single origin and admits a batch.
-- squawk-ignore ban-drop-constraint
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_one_origin;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_batch_kind CHECK (batch_id IS NULL OR kind IN ('charge', 'refund')) NOT VALID;

-- A batch's webhook event (batch.completed) has no job: its id is derived from the batch, which keeps it
-- recorded once. Every event still has exactly one subject (the new CHECK, NOT VALID as above: the rows
-- there all have a job).
ALTER TABLE webhook_events ADD COLUMN batch_id uuid;
-- Replaced by webhook_events_one_subject: a job's event still names its job.
-- squawk-ignore ban-drop-not-null
ALTER TABLE webhook_events ALTER COLUMN video_job_id DROP NOT NULL;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_one_subject
  CHECK ((video_job_id IS NOT NULL)::int + (batch_id IS NOT NULL)::int = 1) NOT VALID;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_of_three
  CHECK (type IN ('video.generation.succeeded', 'video.generation.failed', 'batch.completed')) NOT VALID;
-- Replaced by webhook_events_type_of_three, which admits batch.completed beside the job events.
-- squawk-ignore ban-drop-constraint
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
