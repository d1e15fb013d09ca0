-- RedDot schema, part 12: per-user mute and snooze of a subtree (DESIGN §2, Mute and snooze).
--
-- One row per (user, node) that was ever muted: the mute or unmute with the latest time
-- (occurred_at; at one time an unmute, then the longer mute, wins), so that an older mute
-- arriving late changes nothing. A node muted now (muted, and until is NULL or later) keeps its
-- own aggregate but gives its ancestors nothing. A snooze's row stays after it ends (its
-- time still orders later mutes); the rollup's wake sweep sets `woken` and recounts the user
-- when `until` passes. Keyed by the user first, as every per-user table. A new table only:
-- older processes run on beside it and ignore mutes.
CREATE TABLE badge_mute (
    user_id     text        NOT NULL,
    path        ltree       NOT NULL CHECK (nlevel(path) >= 2),
    muted       boolean     NOT NULL,
    until       timestamptz CHECK (muted OR until IS NULL),
    occurred_at timestamptz NOT NULL,
    woken       boolean     NOT NULL DEFAULT false,
    stored_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path)
);

-- The snoozes still to wake, by their end.
CREATE INDEX badge_mute_wake ON badge_mute (until) WHERE muted AND NOT woken AND until IS NOT NULL;
