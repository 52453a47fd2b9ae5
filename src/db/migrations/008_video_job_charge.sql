-- A video job's charge in one statement (the cost of a create). The charge was a transaction
-- of seven round trips (BEGIN with its limits, the job's lock, what decides the attempt, the workspace's
-- lock, the job with its key's spend, the ledger entry, COMMIT) and held the workspace row's lock
-- across three of them, so concurrent creates of one workspace queued on it. It is now this function,
-- called as one autocommitted statement: the same steps in the same order under the same locks, its
-- plans cached by the session, the workspace lock held for the time the server takes to run them.
--
-- Bounds: every lock wait ends after lock_timeout (the function's own setting); the statement runs
-- without pausing for a client, so nothing else can hold an attempt undecided (the API's refusal of
-- an attempt waits for the job's lock, src/video-jobs/billing.ts).
--
-- The outcome (src/video-jobs/billing.ts maps it to a ChargeResult and checks its figures):
--   charged                     the job is recorded and charged now; before/after are the balance
--   already_charged             this attempt charged it earlier (a replayed charge); after = balance
--   charged_by_another_attempt  another attempt of the same Idempotency-Key did
--   insufficient_credits        after = what was available
--   key_spend_limit_exceeded    the API key's spend limit does not cover the estimate
--   not_accepted_in_time        the attempt's acceptance deadline has passed on this clock, or was refused
-- Records why an attempt of a job was refused (for good: see video_job_refusals); a second record of the
-- same attempt changes nothing. Also the API's refusal of an attempt it stopped waiting for.
CREATE FUNCTION video_job_record_refusal(p_job_id uuid, p_attempt_id uuid, p_workspace_id uuid, p_reason text, p_request_fingerprint text)
RETURNS void LANGUAGE sql VOLATILE AS $$
  INSERT INTO video_job_refusals (job_id, attempt_id, workspace_id, reason, request_fingerprint)
  VALUES (p_job_id, p_attempt_id, p_workspace_id, p_reason, p_request_fingerprint)
  ON CONFLICT (job_id, attempt_id) DO NOTHING;
$$;

CREATE FUNCTION video_job_charge(
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
