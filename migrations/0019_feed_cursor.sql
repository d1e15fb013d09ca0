-- RedDot schema, part 19: the change feed's cursor (part 16 says why). The feed's lease row
-- holds it: the highest `seq` published, and the snapshot of the read that published it.
--
-- The cursor starts below the oldest record not yet marked published, so nothing is lost: the
-- records above it that were marked are sent once more (consumers drop a version they have
-- applied). The lock first: once it is granted, every transaction that wrote a record has ended,
-- and the snapshot taken below sees them all.
LOCK TABLE badge_change IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE change_feed_lease ADD COLUMN published_seq bigint, ADD COLUMN published_snapshot pg_snapshot;
UPDATE change_feed_lease SET
    published_seq = coalesce(
        (SELECT min(seq) - 1 FROM badge_change WHERE published_at IS NULL),
        (SELECT max(seq) FROM badge_change),
        0),
    published_snapshot = pg_current_snapshot();
ALTER TABLE change_feed_lease ALTER COLUMN published_seq SET NOT NULL, ALTER COLUMN published_snapshot SET NOT NULL;
DROP INDEX badge_change_unpublished;
ALTER TABLE badge_change DROP COLUMN published_at;
