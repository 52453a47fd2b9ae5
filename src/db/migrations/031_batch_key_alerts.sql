-- A batch's reservation is a charge of its API key (the key's spend moves by it, and its limit is checked
-- against it): it crosses the key's spend thresholds like a job's or a speech's charge does, and sends
-- `api_key.spend_threshold` the same way. The function of the alerts' trigger learns the batch's key;
-- the rest of it is as before.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';
CREATE OR REPLACE FUNCTION ledger_entry_key_alerts(e ledger_entries) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_key_id  uuid;
  v_spent   bigint;
  v_limit   bigint;
  v_alerted bigint;
  v_percent integer;
BEGIN
  SELECT k.id, k.spent_micro_eur, k.spend_limit_micro_eur, k.spend_alerted_percent INTO v_key_id, v_spent, v_limit, v_alerted
    FROM api_keys k
   WHERE k.id = CASE WHEN e.video_job_id IS NOT NULL THEN (SELECT j.api_key_id FROM video_jobs j WHERE j.id = e.video_job_id)
                     WHEN e.speech_request_id IS NOT NULL THEN (SELECT s.api_key_id FROM speech_requests s WHERE s.id = e.speech_request_id)
                     ELSE (SELECT b.api_key_id FROM batches b WHERE b.id = e.batch_id) END
     AND k.spend_limit_micro_eur > 0 AND k.spend_alerted_percent < 100
     AND k.spent_micro_eur * 100 >= k.spend_limit_micro_eur * CASE WHEN k.spend_alerted_percent < 50 THEN 50
                                                                  WHEN k.spend_alerted_percent < 80 THEN 80 ELSE 100 END;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOREACH v_percent IN ARRAY ARRAY[50, 80, 100] LOOP
    CONTINUE WHEN v_percent <= v_alerted OR v_spent * 100 < v_limit * v_percent;
    PERFORM webhook_alert_record(e.workspace_id, 'api_key.spend_threshold', 'api_key.spend_threshold:' || v_key_id || ':' || v_percent, e.id,
      json_build_object('object', 'api_key', 'id', v_key_id, 'spend_in_euro', micro_eur_to_eur(v_spent),
                        'spend_limit_in_euro', micro_eur_to_eur(v_limit), 'threshold_percent', v_percent));
    v_alerted := v_percent;
  END LOOP;
  UPDATE api_keys k SET spend_alerted_percent = v_alerted WHERE k.id = v_key_id;
END $$;
