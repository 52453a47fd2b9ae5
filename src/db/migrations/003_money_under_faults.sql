-- Money under faults: bounded acceptance, the reconciler, speech holds.

-- Bounded acceptance. Every create is one attempt (a fresh attempt_id, also for an Idempotency-Key
-- retry). An attempt is either charged (video_jobs.attempt_id names it) or refused, never both: the
-- charge and the refusal take the same per-job advisory lock and each looks for the other first.
-- A refusal of reason 'insufficient_credits' names the job for good (the key stays a 402); one of
-- reason 'not_accepted_in_time' refuses only its attempt (a retry with the same key is a new attempt).
ALTER TABLE video_jobs ADD COLUMN attempt_id uuid;
CREATE TABLE video_job_refusals (
  job_id              uuid NOT NULL,
  attempt_id          uuid NOT NULL,
  workspace_id        uuid NOT NULL REFERENCES workspaces(id),
  reason              text NOT NULL CHECK (reason IN ('insufficient_credits', 'not_accepted_in_time')),
  request_fingerprint text NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, attempt_id)
);
CREATE INDEX video_job_refusals_credits ON video_job_refusals (job_id) WHERE reason = 'insufficient_credits';

-- What the reconciler needs to finish a job whose workflow ended or vanished: which adapter serves it,
-- the provider's operation once submitted, and the job's deadline.
ALTER TABLE video_jobs ADD COLUMN backend text;
ALTER TABLE video_jobs ADD COLUMN operation_id text;
ALTER TABLE video_jobs ADD COLUMN deadline_at timestamptz;
-- Consecutive failed provider polls (reset by a successful one): too many fail the job.
ALTER TABLE video_jobs ADD COLUMN poll_failures integer NOT NULL DEFAULT 0 CHECK (poll_failures >= 0);
-- When the reconciler last looked at a pending job (it visits the least recently checked first).
ALTER TABLE video_jobs ADD COLUMN reconciled_at timestamptz;
CREATE INDEX video_jobs_pending ON video_jobs (reconciled_at NULLS FIRST, created_at) WHERE status = 'pending';

-- Speech holds: the amount is reserved before the provider is called, captured (a ledger charge) once
-- the audio is delivered, released on failure. Held money is not spendable: available = balance - held.
ALTER TABLE workspaces ADD COLUMN held_micro_eur bigint NOT NULL DEFAULT 0 CHECK (held_micro_eur >= 0);
ALTER TABLE workspaces ADD CONSTRAINT workspaces_held_covered CHECK (balance_micro_eur >= held_micro_eur);

ALTER TABLE speech_requests ADD COLUMN status text NOT NULL DEFAULT 'delivered'
  CHECK (status IN ('held', 'delivered', 'released'));
ALTER TABLE speech_requests ADD COLUMN held_at timestamptz;
ALTER TABLE speech_requests ADD COLUMN audio_storage_key text;
ALTER TABLE speech_requests ADD COLUMN audio_content_type text;
ALTER TABLE speech_requests ALTER COLUMN audio_bytes DROP NOT NULL;
ALTER TABLE speech_requests ADD CONSTRAINT speech_requests_delivered_audio
  CHECK (status <> 'delivered' OR (audio_bytes IS NOT NULL AND audio_bytes > 0));
CREATE INDEX speech_requests_held ON speech_requests (held_at) WHERE status = 'held';

-- The simulated providers' usage counters, as a real provider's usage page shows them: every call
-- received, whatever its outcome (tests count provider calls with them).
CREATE TABLE simulator.provider_calls (
  operation text PRIMARY KEY,
  calls     bigint NOT NULL DEFAULT 0 CHECK (calls >= 0)
);
