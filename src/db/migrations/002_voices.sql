-- The voice registry, speech requests (what a speech charge in the ledger refers to), and the
-- simulated voice provider's own state.

-- A cloned voice belongs to one workspace. Deletion marks the row (the id is never reused and speech
-- requests keep referring to it); the provider-side deletion runs durably afterwards in the
-- `voice-delete-<id>` workflow, which sets provider_deleted_at when the provider has let it go.
CREATE TABLE voices (
  id                    uuid PRIMARY KEY,
  workspace_id          uuid NOT NULL REFERENCES workspaces(id),
  provider              text NOT NULL,
  voice_id              text NOT NULL,
  name                  text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  requires_verification boolean NOT NULL DEFAULT false,
  created_at            timestamptz NOT NULL DEFAULT now(),
  deleted_at            timestamptz,
  provider_deleted_at   timestamptz,
  UNIQUE (provider, voice_id),
  CHECK (provider_deleted_at IS NULL OR deleted_at IS NOT NULL)
);
CREATE INDEX voices_workspace_live ON voices (workspace_id, created_at DESC) WHERE deleted_at IS NULL;

-- One synthesised speech delivered to a workspace, charged once (its ledger entry references it).
CREATE TABLE speech_requests (
  id                  uuid PRIMARY KEY,
  workspace_id        uuid NOT NULL REFERENCES workspaces(id),
  idempotency_key     text NOT NULL,
  -- hash of (model, voice, input, response_format): a reused Idempotency-Key with another body is refused
  request_fingerprint text NOT NULL,
  model               text NOT NULL,
  voice               text NOT NULL,
  voice_registry_id   uuid REFERENCES voices(id),
  characters          integer NOT NULL CHECK (characters > 0),
  response_format     text NOT NULL,
  audio_bytes         bigint NOT NULL CHECK (audio_bytes > 0),
  cost_micro_eur      bigint NOT NULL CHECK (cost_micro_eur > 0),
  created_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, idempotency_key)
);
CREATE INDEX speech_requests_workspace_created ON speech_requests (workspace_id, created_at DESC);

-- Ledger entries may now originate from a speech request: still exactly one origin per entry.
ALTER TABLE ledger_entries ADD COLUMN speech_request_id uuid REFERENCES speech_requests(id);
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_one_origin;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_one_origin
  CHECK ((video_job_id IS NOT NULL)::int + (topup_id IS NOT NULL)::int + (speech_request_id IS NOT NULL)::int = 1);
-- Speech is charged once and never refunded: its entries are charges.
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_speech_is_charge
  CHECK (speech_request_id IS NULL OR kind = 'charge');
CREATE UNIQUE INDEX ledger_entries_speech_request ON ledger_entries (speech_request_id) WHERE speech_request_id IS NOT NULL;

-- The simulated voice provider (src/providers/voice/simulator.ts). Nothing else reads these.
CREATE TABLE simulator.voices (
  voice_id      text PRIMARY KEY,
  name          text NOT NULL,
  samples       integer NOT NULL,
  sample_bytes  bigint NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
-- Injected faults: the next `remaining` calls of `operation` fail with `kind`.
CREATE TABLE simulator.voice_faults (
  operation  text PRIMARY KEY CHECK (operation IN ('clone', 'delete', 'speech')),
  kind       text NOT NULL CHECK (kind IN ('rejected', 'unavailable')),
  message    text NOT NULL,
  remaining  integer NOT NULL CHECK (remaining >= 0)
);
