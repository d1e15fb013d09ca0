-- RedDot schema, part 4: increments kept with the time they occurred, so that a clear or a seen
-- applies to the increments that occurred up to its time, whatever order they arrive in
-- (DESIGN §2), as it already does to items; and, on states, increments and items, the first
-- version of the user's tree each can show in, so that a clear at the version a client rendered
-- takes only what it showed; and whether a seen at a rendered version marked an increment or an
-- item seen.
--
-- A node's counter is its badge_state row (what sets and decrements left, its icon and expiry)
-- plus its badge_increment rows. Existing rows keep their values: every counter's count stays in
-- badge_state, and keeps_dot (true for every existing row) keeps a stored plain dot shown. No
-- statement here rewrites a row.

-- The increments of a node, by the time they occurred (amounts at one time add up). A row
-- lives until a clear that reaches it by time, a set of its node, a decrement that takes it, the
-- expiry of its node's state, or the fold: once stored longer than the dedupe retention and
-- shown, it becomes part of its state's count.
CREATE TABLE badge_increment (
    user_id      text        NOT NULL,
    path         ltree       NOT NULL,
    occurred_at  timestamptz NOT NULL,
    amount       bigint      NOT NULL CHECK (amount > 0),
    shown_in     bigint      NOT NULL,
    seen         boolean     NOT NULL DEFAULT false,
    arrived_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path, occurred_at)
);
-- The fold of increments stored longer than the dedupe retention into their states' counts
-- (rows arrive in time order, so a BRIN index stays small and cheap to keep).
CREATE INDEX badge_increment_age ON badge_increment USING brin (arrived_at);

-- Whether the state shows a dot at count 0: true for a set; false for a state that only
-- carries increments (made by an increment, or left by a clear that kept later increments).
ALTER TABLE badge_state ADD COLUMN keeps_dot boolean NOT NULL DEFAULT true;

-- The first version of the user's tree a row can show in: the user's version plus one when the
-- row is written (ingest holds the user's dirty mark first, so no rollup of the user runs in
-- between). Rows from before this migration count as shown in every version (0).
ALTER TABLE badge_state ADD COLUMN shown_in bigint NOT NULL DEFAULT 0;
ALTER TABLE badge_item ADD COLUMN shown_in bigint NOT NULL DEFAULT 0;

-- Whether a seen at a rendered version marked the item seen (besides the seen marks by time).
ALTER TABLE badge_item ADD COLUMN seen boolean NOT NULL DEFAULT false;
