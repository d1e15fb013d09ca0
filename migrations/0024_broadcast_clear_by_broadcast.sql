-- reddot:no-transaction
-- RedDot schema, part 24: users' dismissals of a broadcast found by the broadcast, so that the
-- rollup's retention deletes those of a long-withdrawn broadcast in chunks (issue 28) instead
-- of scanning every dismissal. Built concurrently: no writer waits, and the file can run again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS broadcast_clear_broadcast ON broadcast_clear (broadcast_id);
