-- reddot:no-transaction
-- RedDot schema, part 21: finds the event ids that a build before part 20 recorded (audience
-- NULL) with one index probe per batch, for as long as any is kept (part 20 says why). Built
-- concurrently: no writer waits, and the file can run again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS applied_event_legacy ON applied_event (applied_at) WHERE audience IS NULL;
