-- RedDot schema, part 2: what the query service needs to merge broadcasts into every user's tree.
--
-- A user's visible version is user_version.version + broadcast_version.version: both only grow,
-- so their sum grows with every change a user can see, their own or a broadcast's.

-- The version of the set of active broadcasts: bumped when one is stored, withdrawn or expires.
CREATE TABLE broadcast_version (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    version     bigint      NOT NULL CHECK (version >= 0),
    changed_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO broadcast_version (version) VALUES (0);

-- A dirty user whose visible tree changed without a change to their aggregates (they dismissed
-- a broadcast): the rollup bumps their version even if no aggregate row changes.
ALTER TABLE dirty_user ADD COLUMN bump boolean NOT NULL DEFAULT false;

-- The rollup's expiry sweep of broadcasts.
CREATE INDEX broadcast_expiry ON broadcast (expires_at) WHERE withdrawn_at IS NULL AND expires_at IS NOT NULL;
