-- Limits and clean-ups of abuse and exhaustion.
--
-- 1. A create's images are kept per attempt (job_id, attempt_id): an attempt refused (402, 429, 503)
--    leaves nothing behind (the API deletes its own attempt's images; the reconciler deletes what a crash
--    left), and a retry with the same Idempotency-Key after a refused attempt sends its own images, never
--    an earlier attempt's. The submit activity reads the images of the attempt that charged the job.
ALTER TABLE video_job_inputs ADD COLUMN attempt_id uuid;
ALTER TABLE video_job_inputs DROP CONSTRAINT video_job_inputs_pkey;
CREATE UNIQUE INDEX video_job_inputs_attempt ON video_job_inputs (job_id, attempt_id) NULLS NOT DISTINCT;
CREATE INDEX video_job_inputs_created ON video_job_inputs (created_at);

-- 2. Jobs a workspace may have pending at once: NULL = the service's default (MAX_PENDING_JOBS_PER_WORKSPACE).
ALTER TABLE workspaces ADD COLUMN max_pending_jobs integer CHECK (max_pending_jobs > 0);
CREATE INDEX video_jobs_workspace_pending ON video_jobs (workspace_id) WHERE status = 'pending';

-- 3. Voices deleted from the registry whose provider-side deletion has not finished: the reconciler
--    starts the deletion of those the API could not start (the API no longer waits on Temporal inside
--    a transaction).
CREATE INDEX voices_provider_deletion_pending ON voices (deleted_at) WHERE deleted_at IS NOT NULL AND provider_deleted_at IS NULL;

-- 4. Storage retention (src/storage/retention.ts): a finished job's files it does not list (a copy that
--    finished after a cancel's clean-up) are deleted once, then the job is marked swept; delivered speech
--    audio is deleted after SPEECH_AUDIO_RETENTION_MS (a replay then answers 410).
ALTER TABLE video_jobs ADD COLUMN storage_swept_at timestamptz;
CREATE INDEX video_jobs_storage_unswept ON video_jobs (completed_at) WHERE storage_swept_at IS NULL AND status <> 'pending';
CREATE INDEX speech_requests_audio_kept ON speech_requests (created_at) WHERE audio_storage_key IS NOT NULL;

-- 5. Webhook delivery attempts of one workspace in progress at once, across every worker: a slot per
--    attempt, leased until its attempt ends (or held_until passes, if its worker died). A workspace whose
--    slots are all held has its next attempts deferred without an HTTP request, so one tenant's slow or
--    dead endpoints never hold the delivery workers that every tenant shares.
CREATE TABLE webhook_attempt_slots (
  workspace_id  uuid NOT NULL REFERENCES workspaces(id),
  slot          integer NOT NULL CHECK (slot >= 0),
  delivery_id   uuid NOT NULL,
  held_until    timestamptz NOT NULL,
  PRIMARY KEY (workspace_id, slot)
);

-- 6. The charge refuses a job beyond the workspace's pending limit, atomically with everything else it
--    decides. A new outcome (src/video-jobs/billing.ts maps it to a ChargeResult):
--      too_many_pending_jobs   nothing recorded or charged; after = balance
--    Otherwise exactly 008's function.
CREATE OR REPLACE FUNCTION video_job_charge(
  p_job_id                   text,    -- hashed for the job's advisory lock exactly as the API's refusal hashes it
  p_attempt_id               uuid,    -- NULL: a job of the first release (one unnamed attempt)
  p_workspace_id             uuid,
  p_workflow_id              text,
  p_model                    text,
  p_prompt                   text,
  p_request_fingerprint      text,
  p_params                   jsonb,
  p_estimated_cost_micro_eur bigint,
  p_created_at_ms            float8,
  p_accept_by_ms             float8,  -- NULL: no acceptance deadline (first release)
  p_sticky_refusal           boolean, -- a 402 refusal is recorded for good (the create had an Idempotency-Key)
  p_api_key_id               uuid,    -- NULL: no key's spend moves
  p_backend                  text,
  p_deadline_at_ms           float8,
  OUT outcome                text,
  OUT before_micro_eur       bigint,
  OUT after_micro_eur        bigint,
  OUT charged_micro_eur      bigint
) LANGUAGE plpgsql VOLATILE SET lock_timeout = '2s' AS $$
DECLARE
  v_job_id        uuid := p_job_id::uuid;
  v_exists        boolean := false;
  v_attempt_id    uuid;
  v_refusal       text;
  v_balance       bigint;
  v_held          bigint;
  v_recorded      integer;
  v_max_pending   integer;
  v_pending       integer;
BEGIN
  IF p_estimated_cost_micro_eur IS NULL OR p_estimated_cost_micro_eur <= 0 THEN
    RAISE EXCEPTION 'invariant: a video job costs more than 0 (got %)', p_estimated_cost_micro_eur;
  END IF;
  -- Serialises everything that decides this job's acceptance: another attempt's charge, the API's refusal.
  PERFORM pg_advisory_xact_lock(hashtextextended('video_job:' || p_job_id, 0));

  -- Each statement below takes a snapshot of its own (a VOLATILE function): it sees every commit made
  -- before the lock was granted.
  SELECT true, j.attempt_id, j.estimated_cost_micro_eur INTO v_exists, v_attempt_id, charged_micro_eur
    FROM video_jobs j WHERE j.id = v_job_id;
  IF v_exists THEN
    IF v_attempt_id IS NOT NULL AND p_attempt_id IS NOT NULL AND v_attempt_id <> p_attempt_id THEN
      outcome := 'charged_by_another_attempt';
      charged_micro_eur := NULL;
      RETURN;
    END IF;
    SELECT w.balance_micro_eur INTO after_micro_eur FROM workspaces w WHERE w.id = p_workspace_id;
    outcome := 'already_charged';
    RETURN;
  END IF;

  -- A refusal of this attempt (or of the job for good: credits, key limit); jobs of the first release have none.
  IF p_attempt_id IS NOT NULL THEN
    SELECT r.reason INTO v_refusal FROM video_job_refusals r
     WHERE r.job_id = v_job_id AND (r.attempt_id = p_attempt_id OR r.reason <> 'not_accepted_in_time')
     ORDER BY r.reason LIMIT 1;
  END IF;
  IF v_refusal = 'insufficient_credits' THEN
    SELECT w.balance_micro_eur - w.held_micro_eur INTO after_micro_eur FROM workspaces w WHERE w.id = p_workspace_id FOR UPDATE;
    outcome := v_refusal;
    RETURN;
  ELSIF v_refusal IS NOT NULL THEN
    outcome := v_refusal;
    RETURN;
  END IF;

  IF p_accept_by_ms IS NOT NULL AND clock_timestamp() > to_timestamp(p_accept_by_ms / 1000.0) THEN
    PERFORM video_job_record_refusal(v_job_id, p_attempt_id, p_workspace_id, 'not_accepted_in_time', p_request_fingerprint);
    outcome := 'not_accepted_in_time';
    RETURN;
  END IF;

  SELECT w.balance_micro_eur, w.held_micro_eur INTO v_balance, v_held FROM workspaces w WHERE w.id = p_workspace_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'workspace % not found', p_workspace_id;
  END IF;
  before_micro_eur := v_balance;

  -- The workspace's pending jobs, counted under its row lock (every charge of the workspace takes it
  -- first), so concurrent creates can never together exceed the limit. Its own figure, else the
  -- session's setting (the worker's MAX_PENDING_JOBS_PER_WORKSPACE), else 50. Nothing is recorded: a
  -- retry once a job has finished is a new decision.
  SELECT w.max_pending_jobs INTO v_max_pending FROM workspaces w WHERE w.id = p_workspace_id;
  v_max_pending := COALESCE(v_max_pending, NULLIF(current_setting('video_api.max_pending_jobs', true), '')::integer, 50);
  SELECT count(*) INTO v_pending FROM video_jobs j WHERE j.workspace_id = p_workspace_id AND j.status = 'pending';
  IF v_pending >= v_max_pending THEN
    outcome := 'too_many_pending_jobs';
    after_micro_eur := v_balance;
    charged_micro_eur := NULL;
    RETURN;
  END IF;

  IF v_balance - v_held < p_estimated_cost_micro_eur THEN
    IF p_sticky_refusal AND p_attempt_id IS NOT NULL THEN
      PERFORM video_job_record_refusal(v_job_id, p_attempt_id, p_workspace_id, 'insufficient_credits', p_request_fingerprint);
    END IF;
    outcome := 'insufficient_credits';
    after_micro_eur := v_balance - v_held;
    RETURN;
  END IF;

  -- The job and its key's spend: both, or neither when the key's limit does not cover the estimate.
  WITH spent AS (
    UPDATE api_keys k SET spent_micro_eur = k.spent_micro_eur + p_estimated_cost_micro_eur
     WHERE k.id = p_api_key_id AND (k.spend_limit_micro_eur IS NULL OR k.spent_micro_eur + p_estimated_cost_micro_eur <= k.spend_limit_micro_eur)
    RETURNING 1
  )
  INSERT INTO video_jobs (id, workspace_id, workflow_id, model, prompt, request_fingerprint, params, status, estimated_cost_micro_eur,
                          created_at, attempt_id, backend, deadline_at, api_key_id)
  SELECT v_job_id, p_workspace_id, p_workflow_id, p_model, p_prompt, p_request_fingerprint, p_params, 'pending', p_estimated_cost_micro_eur,
         to_timestamp(p_created_at_ms / 1000.0), p_attempt_id, p_backend, to_timestamp(p_deadline_at_ms / 1000.0), p_api_key_id
   WHERE p_api_key_id IS NULL OR EXISTS (SELECT 1 FROM spent);
  GET DIAGNOSTICS v_recorded = ROW_COUNT;
  IF v_recorded = 0 THEN
    IF p_sticky_refusal AND p_attempt_id IS NOT NULL THEN
      PERFORM video_job_record_refusal(v_job_id, p_attempt_id, p_workspace_id, 'key_spend_limit_exceeded', p_request_fingerprint);
    END IF;
    outcome := 'key_spend_limit_exceeded';
    RETURN;
  END IF;

  -- The ledger entry records the balance it left (as src/billing/ledger.ts applyEntry does).
  WITH moved AS (
    UPDATE workspaces w SET balance_micro_eur = w.balance_micro_eur - p_estimated_cost_micro_eur WHERE w.id = p_workspace_id RETURNING w.balance_micro_eur
  )
  INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, video_job_id, balance_after_micro_eur)
  SELECT p_workspace_id, 'charge', -p_estimated_cost_micro_eur, 'video_job:' || p_job_id || ':charge', v_job_id, moved.balance_micro_eur FROM moved
  RETURNING balance_after_micro_eur INTO after_micro_eur;
  -- Asserted before the commit: a charge moves the balance by exactly the estimate (else nothing commits).
  IF after_micro_eur IS DISTINCT FROM v_balance - p_estimated_cost_micro_eur THEN
    RAISE EXCEPTION 'invariant: charge moved the balance of % from % to % (estimate %)', p_workspace_id, v_balance, after_micro_eur, p_estimated_cost_micro_eur;
  END IF;
  outcome := 'charged';
  charged_micro_eur := p_estimated_cost_micro_eur;
END $$;
