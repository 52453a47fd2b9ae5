-- Budget alerts, as webhook events recorded by the database in the very statement that writes the
-- ledger entry crossing the line, so every path that moves money (the function video_job_charge, a
-- speech capture, a top-up, and whatever a later release adds) is covered, and a crash either keeps the
-- entry with its event or neither:
--
-- - `balance.low`: a charge (an entry below zero) leaves the workspace's balance below its
--   low_balance_threshold_micro_eur while the alert is armed; the alert is then disarmed, and armed again
--   only by a credit (an entry above zero that is not a refund) leaving the balance at or above the
--   threshold, or by a new threshold.
-- - `api_key.spend_threshold`: a charge of a key's request (its job or speech) leaves the key's spend
--   (spent_micro_eur, what its limit is checked against) at or above 50, 80 or 100 % of its spend limit,
--   once per threshold: spend_alerted_percent is the highest threshold already sent.
--
-- Every ledger entry of a workspace is written under its workspace row lock (the balance moves in the
-- same statement), so the entries of a workspace are checked one after another: concurrent charges
-- crossing together record one event. An event is recorded, with one delivery per endpoint subscribed
-- to its type, only when an endpoint subscribes; the armed state moves either way. Its deliveries are
-- started by the process that wrote the entry, else by the reconciler (src/webhooks/dispatch.ts).
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';

-- NULL: no alert.
ALTER TABLE workspaces ADD COLUMN low_balance_threshold_micro_eur bigint;
ALTER TABLE workspaces ADD CONSTRAINT workspaces_low_balance_threshold_range
  CHECK (low_balance_threshold_micro_eur BETWEEN 0 AND 1000000000000) NOT VALID;
ALTER TABLE workspaces ADD COLUMN low_balance_armed boolean NOT NULL DEFAULT true;
ALTER TABLE api_keys ADD COLUMN spend_alerted_percent bigint NOT NULL DEFAULT 0;

-- Events that belong to a ledger entry rather than to a job: the entry that crossed the line. Code of the
-- previous release reads job events by their job (a NULL job matches none of its reads) and delivers
-- any event by its id and stored body, so it serves these rows as they are.
-- squawk-ignore ban-drop-not-null
ALTER TABLE webhook_events ALTER COLUMN video_job_id DROP NOT NULL;
ALTER TABLE webhook_events ADD COLUMN ledger_entry_id bigint;
-- The event types, two more (replaced, not widened in place: a CHECK cannot be altered).
-- squawk-ignore ban-drop-constraint
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
-- NOT VALID: every existing row already holds (they are all job events); new rows are checked.
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check
  CHECK (type IN ('video.generation.succeeded', 'video.generation.failed', 'balance.low', 'api_key.spend_threshold')) NOT VALID;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_one_origin
  CHECK ((video_job_id IS NULL) <> (ledger_entry_id IS NULL)) NOT VALID;

-- Euros as the API writes them: a JSON number with no trailing zeros (12.5, 0.000001).
CREATE FUNCTION micro_eur_to_eur(p_micro_eur bigint) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
  SELECT trim_scale(p_micro_eur::numeric / 1000000)
$$;

-- Records an alert event of ledger entry p_entry_id and its deliveries, when an endpoint of the workspace
-- subscribes to its type. The id derives from the workspace and p_origin: the same alert is one event.
CREATE FUNCTION webhook_alert_record(p_workspace_id uuid, p_type text, p_origin text, p_entry_id bigint, p_data json)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_id      text := 'evt_' || left(encode(sha256(convert_to('webhook-event:' || p_workspace_id || ':' || p_origin, 'UTF8')), 'hex'), 32);
  v_created bigint := floor(extract(epoch FROM now()));
BEGIN
  IF NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.workspace_id = p_workspace_id AND e.deleted_at IS NULL AND p_type = ANY(e.events)) THEN
    RETURN;
  END IF;
  INSERT INTO webhook_events (id, workspace_id, type, ledger_entry_id, payload, created_at)
  VALUES (v_id, p_workspace_id, p_type, p_entry_id,
          json_build_object('id', v_id, 'object', 'event', 'type', p_type, 'created', v_created, 'data', p_data)::text,
          to_timestamp(v_created))
  ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  INSERT INTO webhook_deliveries (id, event_id, endpoint_id, workspace_id)
  SELECT gen_random_uuid(), v_id, e.id, e.workspace_id FROM webhook_endpoints e
   WHERE e.workspace_id = p_workspace_id AND e.deleted_at IS NULL AND p_type = ANY(e.events);
END $$;

-- The key's spend thresholds a charge entry crossed (the key's row locked after the workspace's, as
-- every writer of a key's spend does).
CREATE FUNCTION ledger_entry_key_alerts(e ledger_entries) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_key_id  uuid;
  v_spent   bigint;
  v_limit   bigint;
  v_alerted bigint;
  v_percent integer;
BEGIN
  IF e.video_job_id IS NOT NULL THEN
    SELECT j.api_key_id INTO v_key_id FROM video_jobs j WHERE j.id = e.video_job_id;
  ELSIF e.speech_request_id IS NOT NULL THEN
    SELECT s.api_key_id INTO v_key_id FROM speech_requests s WHERE s.id = e.speech_request_id;
  END IF;
  IF v_key_id IS NULL THEN
    RETURN;
  END IF;
  SELECT k.spent_micro_eur, k.spend_limit_micro_eur, k.spend_alerted_percent INTO v_spent, v_limit, v_alerted
    FROM api_keys k WHERE k.id = v_key_id AND k.spend_limit_micro_eur > 0 FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOREACH v_percent IN ARRAY ARRAY[50, 80, 100] LOOP
    CONTINUE WHEN v_percent <= v_alerted OR v_spent * 100 < v_limit * v_percent;
    PERFORM webhook_alert_record(e.workspace_id, 'api_key.spend_threshold', 'api_key.spend_threshold:' || v_key_id || ':' || v_percent, e.id,
      json_build_object('object', 'api_key', 'id', v_key_id, 'spend_in_euro', micro_eur_to_eur(v_spent),
                        'spend_limit_in_euro', micro_eur_to_eur(v_limit), 'threshold_percent', v_percent));
    UPDATE api_keys k SET spend_alerted_percent = v_percent WHERE k.id = v_key_id;
  END LOOP;
END $$;

CREATE FUNCTION ledger_entries_alerts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_threshold bigint;
BEGIN
  IF NEW.amount_micro_eur < 0 THEN
    UPDATE workspaces w SET low_balance_armed = false
     WHERE w.id = NEW.workspace_id AND w.low_balance_armed AND NEW.balance_after_micro_eur < w.low_balance_threshold_micro_eur
    RETURNING w.low_balance_threshold_micro_eur INTO v_threshold;
    IF FOUND THEN
      PERFORM webhook_alert_record(NEW.workspace_id, 'balance.low', 'balance.low:' || NEW.id, NEW.id,
        json_build_object('object', 'balance', 'balance_in_euro', micro_eur_to_eur(NEW.balance_after_micro_eur),
                          'low_balance_threshold_in_euro', micro_eur_to_eur(v_threshold)));
    END IF;
    PERFORM ledger_entry_key_alerts(NEW);
  ELSIF NEW.kind <> 'refund' THEN
    UPDATE workspaces w SET low_balance_armed = true
     WHERE w.id = NEW.workspace_id AND NOT w.low_balance_armed
       AND (w.low_balance_threshold_micro_eur IS NULL OR NEW.balance_after_micro_eur >= w.low_balance_threshold_micro_eur);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER ledger_entries_alerts AFTER INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_entries_alerts();
