-- The simulated providers' usage counters, spread over shards: every submit and poll of every job
-- incremented one row per operation, so concurrent calls queued on that row's lock (a mean wait of
-- 5 ms per call under the create benchmark, holding a pooled connection meanwhile). A call now
-- increments one of PROVIDER_CALL_SHARDS rows (src/providers/simulator-usage.ts); readers sum them.
ALTER TABLE simulator.provider_calls ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard >= 0 AND shard < 64);
ALTER TABLE simulator.provider_calls DROP CONSTRAINT provider_calls_pkey;
ALTER TABLE simulator.provider_calls ADD PRIMARY KEY (operation, shard);
