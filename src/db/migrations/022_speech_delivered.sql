-- A streamed speech is marked delivered (delivered_at, with its audio's size and key) before its last
-- bytes go out, while its hold is still held: the capture follows, retried, and a hold whose capture
-- never landed (the database failed meanwhile) is captured by the reconciler, never released. Null for
-- every request that was not delivered before its capture (all of them before this column).
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';
ALTER TABLE speech_requests ADD COLUMN delivered_at timestamptz;

-- Audio that went out is never given back, whichever release's code asks: releasing a delivered hold
-- leaves the row as it is (the UPDATE changes nothing, so a release reports nothing released).
CREATE FUNCTION speech_requests_keep_delivered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.delivered_at IS NOT NULL AND NEW.status = 'released' THEN
    RETURN NULL;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER speech_requests_keep_delivered BEFORE UPDATE OF status ON speech_requests
  FOR EACH ROW EXECUTE FUNCTION speech_requests_keep_delivered();
