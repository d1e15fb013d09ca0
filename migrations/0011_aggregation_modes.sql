-- RedDot schema, part 11: aggregation modes (DESIGN §2, Aggregation modes).
--
-- The modes the rules file declares (its `modes` list), as ingest last stored them at its start:
-- one row per pattern, in file order (`position`); a node takes the mode of the first pattern
-- that matches it, else sum. The rollup and the HTTP actions read this table when they recount
-- a user; with no row, every node sums, as before. `query` is the pattern as an lquery, made
-- by RedDot from checked labels (`*` is `*{1}`), never from user input; `below` matches the
-- pattern's nodes and everything under them (the rollup recounts a user whose new increments
-- fall there, instead of adding them to every ancestor). A new table only:
-- older processes run on beside it and sum every node.
CREATE TABLE aggregation_mode (
    position  integer     PRIMARY KEY CHECK (position >= 1),
    pattern   text        NOT NULL UNIQUE,
    query     lquery      NOT NULL,
    below     lquery      NOT NULL,
    mode      text        NOT NULL CHECK (mode IN ('sum', 'children', 'dot', 'exclude')),
    stored_at timestamptz NOT NULL DEFAULT now()
);
