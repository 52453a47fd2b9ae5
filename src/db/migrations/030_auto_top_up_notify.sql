-- A recorded automatic top-up wakes the workers that start them: each new row of auto_top_ups notifies
-- the channel auto_top_up_recorded, delivered when the charge's transaction commits (and never if it rolls
-- back). The workers LISTEN on it and start the top-up at once; their poll stays the fallback (a worker not
-- listening, a notification lost with its connection). The payload is empty: the row is read from the table.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';
CREATE FUNCTION auto_top_ups_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('auto_top_up_recorded', '');
  RETURN NULL;
END $$;
CREATE TRIGGER auto_top_ups_notify AFTER INSERT ON auto_top_ups FOR EACH ROW EXECUTE FUNCTION auto_top_ups_notify();
