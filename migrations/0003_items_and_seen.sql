-- RedDot schema, part 3: items (counts that follow content), clear marks, and seen vs unseen.
--
-- A node's own count is its counter (badge_state) plus its live items (badge_item rows without
-- removed_at). Existing rows keep their values: every counter keeps its count, and what exists
-- before this migration counts as seen (seen_count NULL: all of the count), so every stored
-- aggregate's unseen part (0) stays true. No statement here rewrites a row.
--
-- The item rules give the same tree whatever order the operations arrive in (DESIGN §2): an
-- item is live when it was added, never removed, and the earliest time it was added is later
-- than every clear that reaches its node. So a removed or cleared item stays as a tombstone
-- (removed_at set), and each clear leaves a mark with the latest time it applies up to; both are
-- pruned with the applied event ids, after the dedupe retention.

-- Items per node. occurred_at is the earliest time an add said the item occurred.
CREATE TABLE badge_item (
    user_id      text        NOT NULL CHECK (length(user_id) BETWEEN 1 AND 128),
    path         ltree       NOT NULL CHECK (nlevel(path) BETWEEN 1 AND 17),
    item         text        NOT NULL CHECK (length(item) BETWEEN 1 AND 128),
    occurred_at  timestamptz NOT NULL,
    removed_at   timestamptz,
    PRIMARY KEY (user_id, path, item)
);
-- The prune of old tombstones.
CREATE INDEX badge_item_gone ON badge_item (removed_at) WHERE removed_at IS NOT NULL;

-- The latest time each clear applies up to: of one node, or (subtree) of a node and everything
-- below it.
CREATE TABLE badge_clear_mark (
    user_id          text        NOT NULL,
    path             ltree       NOT NULL,
    subtree          boolean     NOT NULL,
    cleared_through  timestamptz NOT NULL,
    marked_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path, subtree)
);
-- The prune of old marks.
CREATE INDEX badge_clear_mark_age ON badge_clear_mark (marked_at);

-- Seen vs unseen. A counter's seen part: set to its count by a seen, lowered with it, never
-- above it; NULL (the rows stored before this migration) means all of the count. New rows start
-- with nothing seen.
ALTER TABLE badge_state ADD COLUMN seen_count bigint CHECK (seen_count >= 0);
ALTER TABLE badge_state ALTER COLUMN seen_count SET DEFAULT 0;
-- Each aggregate's unseen part, summed like the count (written by the rollup step).
ALTER TABLE badge_aggregate ADD COLUMN unseen bigint NOT NULL DEFAULT 0 CHECK (unseen >= 0);

-- The latest time each seen of a node (covering its subtree) applies up to: an item that
-- occurred after every seen covering its node is unseen. One row per node ever seen; never
-- pruned (without it, the live items it covers would count as unseen again).
CREATE TABLE badge_seen_mark (
    user_id       text        NOT NULL,
    path          ltree       NOT NULL,
    seen_through  timestamptz NOT NULL,
    marked_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path)
);
CREATE INDEX badge_seen_mark_age ON badge_seen_mark (marked_at);
