-- RedDot schema, part 7: ingest never waits for a rollup round (DESIGN §5).
--
-- Until now a row's first version was stamped by its writer as "the user's version plus one",
-- which is right only if no rollup round of that user commits while the row is written; so
-- ingest locked the user's dirty mark, and waited for any round that held it.
--
-- Now every writer of a user's own state takes the next number of the user's write sequence
-- (user_write, a row only writers lock) and stamps its rows with it (the shown_in columns). A
-- rollup round reads the sequence in the statement that reads the state, and records with the
-- version it makes how far the version's writes reach (writes_through): a row shows in every
-- version whose writes_through is at or above its stamp. A writer holds its sequence row until
-- it commits, so every write numbered up to what a round reads is visible to that round.
--
-- The rollup's queue becomes a set of marks, one per writing transaction and user, that writers
-- only insert (dirty_mark): a round deletes the marks its version covers and no writer ever
-- waits for it.
--
-- Stop every ingest, rollup and serve process of an older build before applying this migration
-- (they use dirty_user, which it drops). It rewrites no large table: it copies one row per user
-- with a version, and the waiting marks.

-- Each user's last write number. Stamps stored before this migration are versions (at most
-- the user's version plus one), so the sequence continues above them.
CREATE TABLE user_write (
    user_id  text    PRIMARY KEY,
    seq      bigint  NOT NULL CHECK (seq >= 0)
);
INSERT INTO user_write (user_id, seq) SELECT user_id, version + 1 FROM user_version;
INSERT INTO user_write (user_id, seq)
SELECT d.user_id, 1 FROM dirty_user d
WHERE NOT EXISTS (SELECT 1 FROM user_version v WHERE v.user_id = d.user_id);

-- How far the writes of the user's current version reach (NULL: a version made before this
-- migration, whose stamps are versions: its own number).
ALTER TABLE user_version ADD COLUMN writes_through bigint;

-- The same for each logged version, and for the version before it (NULL as above).
ALTER TABLE badge_change ADD COLUMN writes_through bigint, ADD COLUMN prior_writes_through bigint;

-- The rollup's queue: one mark per writing transaction and user. seq is the write's number;
-- bump: the user's version must move even if no aggregate does (a dismissed broadcast);
-- recount: something other than an increment without an expiry changed; dirtied_at: when the
-- mark was written (rollup lag is measured from a user's oldest mark).
CREATE TABLE dirty_mark (
    user_id     text        NOT NULL,
    seq         bigint      NOT NULL,
    bump        boolean     NOT NULL,
    recount     boolean     NOT NULL,
    dirtied_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (user_id, seq)
);
CREATE INDEX dirty_mark_queue ON dirty_mark (dirtied_at);

-- Waiting marks move over, each asking for a recount (their deltas go below).
INSERT INTO dirty_mark (user_id, seq, bump, recount, dirtied_at)
SELECT d.user_id, w.seq, d.bump, true, d.dirtied_at
FROM dirty_user d JOIN user_write w ON w.user_id = d.user_id;
DROP TABLE dirty_user;

-- Deltas are stamped with their write's number from now on; those waiting are dropped (their
-- users recount, which counts what they held).
DELETE FROM badge_delta;
ALTER TABLE badge_delta RENAME COLUMN version TO seq;
