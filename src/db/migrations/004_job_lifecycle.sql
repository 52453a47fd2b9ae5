-- The job lifecycle and per-key spend limits.

-- DELETE /v2/videos/generations/{id}: the job's stored videos are removed and the job disappears from
-- the API; the row stays (the ledger's entries refer to it, and the audit still accounts for it).
ALTER TABLE video_jobs ADD COLUMN deleted_at timestamptz;
ALTER TABLE video_jobs ADD CONSTRAINT video_jobs_deleted_finished CHECK (deleted_at IS NULL OR status <> 'pending');

-- The list, newest first, with cursor pagination and filters, served by an index whatever the size of
-- a workspace: (created_at, id) orders ties; one index per filter keeps every page an index range scan.
DROP INDEX video_jobs_workspace_created;
CREATE INDEX video_jobs_list ON video_jobs (workspace_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX video_jobs_list_status ON video_jobs (workspace_id, status, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX video_jobs_list_model ON video_jobs (workspace_id, model, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- Spend limits per API key. spent_micro_eur is what the key's requests have charged net of refunds,
-- plus what its speech requests hold: checked and moved in the same transaction, under the same locks
-- (workspace, then key), as the charge or hold it limits, so no number of racing requests exceeds it.
ALTER TABLE api_keys ADD COLUMN spend_limit_micro_eur bigint CHECK (spend_limit_micro_eur >= 0);
ALTER TABLE api_keys ADD COLUMN spent_micro_eur bigint NOT NULL DEFAULT 0 CHECK (spent_micro_eur >= 0);
ALTER TABLE api_keys ADD CONSTRAINT api_keys_within_limit CHECK (spend_limit_micro_eur IS NULL OR spent_micro_eur <= spend_limit_micro_eur);
ALTER TABLE video_jobs ADD COLUMN api_key_id uuid REFERENCES api_keys(id);
ALTER TABLE speech_requests ADD COLUMN api_key_id uuid REFERENCES api_keys(id);

-- A refusal may also be the key's limit (a 402 that stays with its Idempotency-Key, like credits).
ALTER TABLE video_job_refusals DROP CONSTRAINT video_job_refusals_reason_check;
ALTER TABLE video_job_refusals ADD CONSTRAINT video_job_refusals_reason_check
  CHECK (reason IN ('insufficient_credits', 'key_spend_limit_exceeded', 'not_accepted_in_time'));
DROP INDEX video_job_refusals_credits;
CREATE INDEX video_job_refusals_sticky ON video_job_refusals (job_id) WHERE reason <> 'not_accepted_in_time';

-- The simulated video provider can cancel an operation it is running.
ALTER TABLE simulator.video_operations ADD COLUMN cancelled_at timestamptz;
