-- Consent recordings are bounded per workspace (count and bytes) and removed from storage when their
-- consent is deleted. A row is written, under the workspace's consent lock, before its recording is
-- stored (recording_stored_at NULL until then: invisible, but counted), so racing uploads cannot pass
-- the bound; a deleted consent's recording counts until it is removed (recording_removed_at). The
-- retention sweep removes what a crash left: recordings of deleted consents, and uploads that never
-- finished. Existing consents were stored when they were made; the recordings of those already
-- deleted are removed by the sweep.
ALTER TABLE voice_consents ADD COLUMN recording_stored_at timestamptz;
ALTER TABLE voice_consents ADD COLUMN recording_removed_at timestamptz;
UPDATE voice_consents SET recording_stored_at = created_at;
CREATE INDEX voice_consents_recordings_to_remove ON voice_consents (created_at)
  WHERE recording_removed_at IS NULL AND (deleted_at IS NOT NULL OR recording_stored_at IS NULL);
CREATE INDEX voice_consents_workspace_kept ON voice_consents (workspace_id) WHERE recording_removed_at IS NULL;
