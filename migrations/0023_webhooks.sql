-- RedDot schema, part 23: signed webhooks (issue 28). `reddot webhooks` follows the change feed
-- (`reddot.changes`) and delivers what subscriptions ask for, signed the Standard Webhooks way.
-- New tables only: online.

-- Subscriptions: a URL, the secret deliveries are signed with (whsec_ + base64), the badge paths
-- (a subtree each) and the kinds wanted. Few rows, read by every delivery: a reference table
-- when distributed. `origin` tells rows from the admin API from rows a subscriptions file wrote
-- (the file's are replaced whole at each start).
CREATE TABLE webhook_subscription (
    id          text        PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
    url         text        NOT NULL CHECK (url ~ '^https?://'),
    secret      text        NOT NULL CHECK (secret ~ '^whsec_'),
    paths       text[]      NOT NULL CHECK (cardinality(paths) BETWEEN 1 AND 32),
    kinds       text[]      NOT NULL CHECK (cardinality(kinds) >= 1
                                            AND kinds <@ ARRAY['cleared', 'seen', 'root', 'broadcasts']),
    origin      text        NOT NULL DEFAULT 'api' CHECK (origin IN ('api', 'file')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Per user: the last feed version turned into deliveries and the root totals it carried (a
-- record at or below `own_version` was handled before and is dropped; `root` deliveries need
-- the totals before). Keyed by user.
CREATE TABLE webhook_user (
    user_id      text   PRIMARY KEY,
    own_version  bigint NOT NULL CHECK (own_version >= 0),
    root_count   bigint NOT NULL CHECK (root_count >= 0),
    root_unseen  bigint NOT NULL CHECK (root_unseen >= 0)
);

-- Deliveries: one per subscription and feed record it matched, its id the `webhook-id` header
-- (the same id on every retry and replay). `user_id` is '' for a broadcasts record. A delivery is
-- pending until the endpoint answers 2xx (delivered) or its last try fails (dead); `reddot
-- webhooks replay` makes dead ones pending again.
CREATE TABLE webhook_delivery (
    user_id          text        NOT NULL,
    id               text        NOT NULL,
    subscription_id  text        NOT NULL,
    kind             text        NOT NULL,
    payload          text        NOT NULL,
    state            text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    PRIMARY KEY (user_id, id)
);
CREATE INDEX webhook_delivery_due ON webhook_delivery (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_delivery_finished ON webhook_delivery (finished_at) WHERE state <> 'pending';
