-- RedDot schema, part 20: event ids deduplicated per user (issue 27: a schema that shards by
-- user). `applied_user_event` holds, per user, the ids of the events applied to that user, keyed
-- by the user first, so it can be hash-partitioned or distributed by user like the other
-- per-user tables; a multi-user event is deduplicated per user. `applied_event` keeps the ids of
-- broadcasts (`audience` 'all'), a small table.
--
-- Online: no table is rewritten or scanned, and the only lock on `applied_event` is the
-- moment of adding a column without a default. Processes of the previous build keep running
-- while this file and part 21 apply, and go on writing ids to `applied_event` (audience NULL).
-- While any such row is kept (the dedupe retention after the last of them), this build also
-- writes its users' event ids there (audience 'users') and reads them there, so that builds
-- on either side of the upgrade skip each other's duplicates.
CREATE TABLE applied_user_event (
    user_id     text        NOT NULL,
    event_id    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, event_id)
);
CREATE INDEX applied_user_event_age ON applied_user_event USING brin (applied_at);

ALTER TABLE applied_event ADD COLUMN audience text;
-- Not validated: the rows already there are all NULL, and checking them would scan the table
-- under the lock. New rows are checked.
ALTER TABLE applied_event ADD CONSTRAINT applied_event_audience CHECK (audience IN ('all', 'users')) NOT VALID;
