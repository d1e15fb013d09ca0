-- RedDot schema, part 5: the change log (DESIGN §6a). Every version of a user's own layer (their
-- aggregates and the broadcasts they dismissed) is recorded in the transaction that makes it
-- visible, and every version of the set of active broadcasts once, globally. With them a query
-- service rebuilds a user's tree at any recent visible version (user_version.version +
-- broadcast_version.version), so it can answer "what changed since V" (delta polling, SSE
-- resume) with the exact difference of the two trees.
--
-- The two kinds of change are totally ordered: a rollup holds a shared advisory lock while it
-- records a user's version, and a broadcast change holds it exclusively, so each visible version
-- of a user is one point on a path of single steps, and a client's version names one point.
--
-- No statement here rewrites a row: the new columns are NULL or have constant defaults. The log
-- starts empty; a client whose version predates it reads the tree (410), as it would after the
-- retention.

-- One row per version of a user's own layer.
CREATE TABLE badge_change (
    user_id            text        NOT NULL,
    -- The user's own version after the change, and the broadcast version it was made under.
    version            bigint      NOT NULL CHECK (version >= 1),
    broadcast_version  bigint      NOT NULL CHECK (broadcast_version >= 0),
    -- The aggregates that changed: [[path, before, after], …], each side {"count", "unseen",
    -- "icon"} or null (no aggregate: the node did not show).
    nodes              jsonb       NOT NULL,
    -- The user's own root totals after the change (broadcasts not included).
    -- The user's visible root totals after the change (their own, plus the active broadcasts
    -- they have not dismissed): what a push sender sets the app-icon badge to.
    root_count         bigint      NOT NULL,
    root_unseen        bigint      NOT NULL,
    -- When the version was made (the end of the statement that made it; it shows at its commit).
    changed_at         timestamptz NOT NULL DEFAULT now(),
    -- The change feed's order (one user's versions get increasing numbers) and when the record
    -- was acknowledged by Kafka (NULL: not yet).
    seq                bigserial   NOT NULL,
    published_at       timestamptz,
    PRIMARY KEY (user_id, version)
);
-- The retention prune deletes the oldest rows; rows arrive in time order.
CREATE INDEX badge_change_age ON badge_change USING brin (changed_at);
-- What the change feed has yet to publish (small while it keeps up).
CREATE INDEX badge_change_unpublished ON badge_change (seq) WHERE published_at IS NULL;

-- One row per version of the set of active broadcasts: what it added and what it withdrew,
-- each [{"id", "path", "count", "icon"}, …].
CREATE TABLE broadcast_change (
    version     bigint      PRIMARY KEY CHECK (version >= 1),
    added       jsonb       NOT NULL,
    withdrawn   jsonb       NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);
CREATE INDEX broadcast_change_unpublished ON broadcast_change (version) WHERE published_at IS NULL;

-- Which process publishes the change feed: one at a time, for a lease it renews while it works
-- (another takes over once the lease has run out).
CREATE TABLE change_feed_lease (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    holder      text        NOT NULL,
    expires_at  timestamptz NOT NULL
);
INSERT INTO change_feed_lease (holder, expires_at) VALUES ('', '-infinity');

-- The broadcast version at which the user's current own version was reached (NULL: before the
-- log began).
ALTER TABLE user_version ADD COLUMN broadcast_version bigint;

-- The broadcast versions at which a broadcast became active and stopped being active (NULL: before
-- the log began).
ALTER TABLE broadcast ADD COLUMN shown_in bigint, ADD COLUMN withdrawn_in bigint;

-- The user's own version at which a dismissal shows (0: every version; rows stored before this
-- migration).
ALTER TABLE broadcast_clear ADD COLUMN shown_in bigint NOT NULL DEFAULT 0;
