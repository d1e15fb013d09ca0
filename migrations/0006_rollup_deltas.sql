-- RedDot schema, part 6: the rollup folds additive changes instead of recounting (DESIGN §5).
--
-- Ingest records, beside each new increment, what it adds to its node's count and unseen part
-- (badge_delta), and marks on the user's dirty mark whether anything else changed (recount). A
-- rollup round adds a user's deltas to the stored aggregates of each node and its ancestors
-- when nothing else changed, and recounts the user's tree from its own state otherwise; either
-- way it consumes the user's deltas. Both give the same aggregates and the same change log.
--
-- No statement here rewrites a row: the new column has a constant default, and every mark
-- stored before this migration asks for a recount, as every mark did before.

-- Whether the user's next rollup must recount their tree (true: something other than an
-- increment changed, or the writer did not say).
ALTER TABLE dirty_user ADD COLUMN recount boolean NOT NULL DEFAULT true;

-- What new increments add to a node's own count and unseen part, per ingest statement, until
-- the rollup round that consumes them. Keyed by the user first (DESIGN §7); no primary key, as
-- rows are only inserted by ingest and deleted, all of a user's at once, by the rollup.
-- version is the user's version when the row was written: a row from before the user's current
-- version was counted by a recount that did not consume it (an older rollup, during an upgrade),
-- so the rollup drops it instead of adding it.
CREATE TABLE badge_delta (
    user_id  text    NOT NULL,
    path     ltree   NOT NULL,
    amount   bigint  NOT NULL CHECK (amount > 0),
    unseen   bigint  NOT NULL CHECK (unseen >= 0),
    version  bigint  NOT NULL
);
CREATE INDEX badge_delta_user ON badge_delta (user_id);
