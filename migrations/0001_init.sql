-- RedDot schema, part 1: badge state, aggregates, versions, the dirty-user queue, stored Kafka
-- offsets, applied event ids, rejected records, broadcasts and per-user broadcast clears.
--
-- Every per-user table leads its primary key with user_id, and every hot query names one user,
-- so each is a single-user index range scan and the tables can be hash-partitioned by user_id
-- (or distributed by it with Citus) without changing a query.

CREATE EXTENSION IF NOT EXISTS ltree;

-- A node's own state. A row exists only while the node is set (shown); clearing deletes it.
-- count 0 is a plain dot. Rows whose expires_at has passed count as cleared.
CREATE TABLE badge_state (
    user_id     text        NOT NULL CHECK (length(user_id) BETWEEN 1 AND 128),
    path        ltree       NOT NULL CHECK (nlevel(path) BETWEEN 1 AND 17),
    count       bigint      NOT NULL DEFAULT 0 CHECK (count >= 0),
    icon        text        CHECK (icon ~ '^[a-z0-9_-]{1,32}$'),
    expires_at  timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path)
);
-- The rollup's expiry sweep finds users whose badges expire.
CREATE INDEX badge_state_expiry ON badge_state (expires_at) WHERE expires_at IS NOT NULL;

-- Every shown node of a user's tree with its aggregate: count = own count + children's counts.
-- Written only by the rollup step; a node with nothing shown in its subtree has no row.
CREATE TABLE badge_aggregate (
    user_id  text    NOT NULL,
    path     ltree   NOT NULL,
    count    bigint  NOT NULL CHECK (count >= 0),
    icon     text,
    PRIMARY KEY (user_id, path)
);

-- A user's tree version: bumped on every visible change; the API's ETag and stream cursor.
CREATE TABLE user_version (
    user_id     text        PRIMARY KEY,
    version     bigint      NOT NULL CHECK (version >= 0),
    changed_at  timestamptz NOT NULL DEFAULT now()
);

-- Users whose own state changed since their aggregates were computed. dirtied_at is the first
-- unprocessed change (rollup lag is measured from it); generation counts later changes.
CREATE TABLE dirty_user (
    user_id     text        PRIMARY KEY,
    dirtied_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    generation  bigint      NOT NULL DEFAULT 1
);
CREATE INDEX dirty_user_queue ON dirty_user (dirtied_at);

-- The authoritative Kafka offsets: the next offset to read, per group, topic and partition,
-- written in the same transaction as the badge changes (compare-and-set on the previous value).
CREATE TABLE consumer_offset (
    consumer_group  text        NOT NULL,
    topic           text        NOT NULL,
    partition       integer     NOT NULL CHECK (partition >= 0),
    next_offset     bigint      NOT NULL CHECK (next_offset >= 0),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, partition)
);

-- Event ids already applied (duplicates are skipped); pruned after the retention period.
CREATE TABLE applied_event (
    event_id    text        PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX applied_event_age ON applied_event USING brin (applied_at);

-- Records that could not be applied, kept with their reason and origin; published to the
-- dead-letter topic from here (published_at), and replayable (replayed_at).
CREATE TABLE rejected_record (
    id            bigserial   PRIMARY KEY,
    topic         text        NOT NULL,
    partition     integer     NOT NULL,
    record_offset bigint      NOT NULL,
    record_key    bytea,
    payload       bytea,
    reason        text        NOT NULL,
    message       text        NOT NULL,
    event_id      text,
    rejected_at   timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz,
    replayed_at   timestamptz,
    UNIQUE (topic, partition, record_offset)
);
CREATE INDEX rejected_record_unpublished ON rejected_record (id) WHERE published_at IS NULL;
CREATE INDEX rejected_record_reason ON rejected_record (reason, id);

-- Badges for every user ("audience": "all"), stored once. Each user sees an active broadcast in
-- their tree until they clear it (broadcast_clear); withdrawn_at ends it for everyone.
CREATE TABLE broadcast (
    id            bigserial   PRIMARY KEY,
    event_id      text        NOT NULL UNIQUE,
    path          ltree       NOT NULL CHECK (nlevel(path) BETWEEN 1 AND 17),
    count         bigint      NOT NULL DEFAULT 0 CHECK (count >= 0),
    icon          text        CHECK (icon ~ '^[a-z0-9_-]{1,32}$'),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    withdrawn_at  timestamptz
);
CREATE INDEX broadcast_active ON broadcast (id) WHERE withdrawn_at IS NULL;

CREATE TABLE broadcast_clear (
    user_id       text        NOT NULL,
    broadcast_id  bigint      NOT NULL REFERENCES broadcast (id) ON DELETE CASCADE,
    cleared_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, broadcast_id)
);
