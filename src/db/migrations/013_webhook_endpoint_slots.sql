-- Webhook attempt slots also know their endpoint: of its workspace's slots, one endpoint holds at most
-- one at a time, so a workspace's own slow or dead endpoint never starves its healthy ones either.
ALTER TABLE webhook_attempt_slots ADD COLUMN endpoint_id uuid;
CREATE INDEX webhook_attempt_slots_endpoint ON webhook_attempt_slots (endpoint_id);
