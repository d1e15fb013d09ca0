-- RedDot schema, part 9: a client's clear or seen applies once (DESIGN §6).
--
-- A clear or a seen over HTTP may carry an `action_id`; the API records it with the action, in
-- the same transaction, and answers a second request with the same id without applying it
-- again: a retry after a lost answer, or a tap the client queued offline and sends when it is
-- back. Kept for the event-id retention, pruned with the applied event ids. A new table only:
-- older processes run on beside it.
CREATE TABLE applied_action (
    user_id     text        NOT NULL,
    action_id   text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, action_id)
);
CREATE INDEX applied_action_age ON applied_action USING brin (applied_at);
