-- reddot:no-transaction
-- RedDot schema, part 18: the change log by writing transaction, so the feed finds the records
-- that committed after the snapshot it last read (part 16 says why). With the `seq`, so the
-- index alone tells which of the last moments' records lie below the cursor. Built
-- concurrently: no writer waits, and the file can run again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS badge_change_xid ON badge_change (xid, seq);
