-- The sum of bigints as a bigint. The built-in sum(bigint) answers a numeric: each group keeps a 128-bit
-- state allocated per group and ends in a numeric the reads cast back to bigint, which made up most of a
-- usage read's aggregation (10 counters over thousands of rollup rows). This one keeps its state in the
-- bigint itself (int8pl, the + of bigints), so an overflow is an error, never a wrapped total.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '30s';
CREATE AGGREGATE bigint_sum(bigint) (
  SFUNC = int8pl,
  STYPE = bigint,
  COMBINEFUNC = int8pl,
  PARALLEL = SAFE
);
