-- reddot:no-transaction
-- RedDot schema, part 18: the change log by writing transaction, so the feed finds the records
-- that committed after the snapshot it last read (part 16 says why). One rollup round writes
-- all its records in one transaction; deduplicated, the index stays small. Built concurrently.
CREATE INDEX CONCURRENTLY IF NOT EXISTS badge_change_xid ON badge_change (xid);
