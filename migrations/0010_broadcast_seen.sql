-- RedDot schema, part 10: a user can mark a broadcast seen (DESIGN §2).
--
-- A seen that reaches an active broadcast (within its path, stored up to its time, shown in
-- the version the client rendered) records it here, stamped with the user's write number like
-- a dismissal in broadcast_clear: from the first own version whose writes reach the stamp, the
-- broadcast still shows, with its count, but no longer counts as unseen. A new table only:
-- older processes run on beside it (their reads do not see the seen broadcasts).
CREATE TABLE broadcast_seen (
    user_id       text        NOT NULL,
    broadcast_id  bigint      NOT NULL REFERENCES broadcast (id) ON DELETE CASCADE,
    shown_in      bigint      NOT NULL CHECK (shown_in >= 0),
    seen_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, broadcast_id)
);
