-- A speech streamed over a WebSocket grows its hold as its text arrives (characters and cost_micro_eur
-- rise while it is held) and records here how many of its characters the provider has spoken so far,
-- refreshing held_at as it does. When its socket drops, is cancelled, or its process dies, what was
-- spoken is charged and the rest released: by the socket, else by the reconciler from this column.
-- NULL for every request spoken whole (HTTP), and for a streamed one before its first audio.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';
ALTER TABLE speech_requests ADD COLUMN spoken_characters bigint;
