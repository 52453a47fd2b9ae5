-- An upload in progress is marked by its own column, set only by the code that claims a row before
-- storing its recording: recording_claimed_at. A row without it is a finished consent, whichever
-- release wrote it (one that predates the claim writes neither column, and its consents stay visible
-- and are never swept as unfinished uploads). A claimed row is unfinished until recording_stored_at.
-- Rows already written are left as they are: one with recording_stored_at NULL is taken as finished
-- (an earlier release's upload), never deleted as an abandoned claim.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';
ALTER TABLE voice_consents ADD COLUMN recording_claimed_at timestamptz;
