-- reddot:no-transaction
-- RedDot schema, part 25: as part 24, for the broadcasts users marked seen.
CREATE INDEX CONCURRENTLY IF NOT EXISTS broadcast_seen_broadcast ON broadcast_seen (broadcast_id);
