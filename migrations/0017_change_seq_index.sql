-- reddot:no-transaction
-- RedDot schema, part 17: the change log by feed order, for the feed's cursor (part 16 says
-- why). Built concurrently: no writer waits, and the file can run again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS badge_change_seq ON badge_change (seq);
