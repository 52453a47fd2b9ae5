-- The operator's gauges read the webhook backlog at every scrape (src/metrics.ts: how many deliveries
-- are pending, and since when). Deliveries are kept after they end, so without this index each scrape
-- would read the whole table; with it, only the pending ones.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (created_at) WHERE status = 'pending';
