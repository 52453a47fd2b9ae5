-- Voice consents: a recording of the voice's owner agreeing to be cloned, kept by the workspace that
-- uploaded it. A voice records the consent it was cloned with (NULL: cloned without one). Deleting a
-- consent marks it (its recording stays as the record of what a voice was made with); deleting a voice
-- leaves its consent as it is.
CREATE TABLE voice_consents (
  id                     text PRIMARY KEY,
  workspace_id           uuid NOT NULL REFERENCES workspaces(id),
  name                   text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  language               text NOT NULL CHECK (length(language) BETWEEN 2 AND 35),
  recording_storage_key  text NOT NULL,
  recording_bytes        bigint NOT NULL CHECK (recording_bytes > 0),
  created_at             timestamptz NOT NULL DEFAULT now(),
  deleted_at             timestamptz
);
CREATE INDEX voice_consents_workspace_live ON voice_consents (workspace_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

ALTER TABLE voices ADD COLUMN consent_id text REFERENCES voice_consents(id);
