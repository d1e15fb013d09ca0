-- reddot:no-transaction
-- RedDot schema, part 8: the rollup's queue loses its index by age (DESIGN §10).
--
-- Rollup rounds find dirty users in user order (dirty_mark's primary key) since the sweep
-- claim; nothing reads the marks by the time they were written any more, and every mark ingest
-- writes paid for one more index entry. Dropped concurrently: no writer waits, and the file can
-- run again.
DROP INDEX CONCURRENTLY IF EXISTS dirty_mark_queue;
