-- RedDot schema, part 12: per-user mute and snooze of a subtree (DESIGN §2, Mute and snooze).
--
-- One row per (user, node) that was ever muted: the mute or unmute with the latest time
-- (occurred_at; at one time an unmute, then the longer mute, wins), so that an older mute
-- arriving late changes nothing. A node muted now (muted, and until is NULL or later) keeps its
-- own aggregate but gives its ancestors nothing. A snooze's row stays after it ends (its
-- time still orders later mutes); the rollup's wake sweep sets `woken` and recounts the user
-- when `until` passes. `written_in` is the user's write number of the last change of the row
-- (the store, or the wake): the first version whose writes reach it recounts the user's muted
-- nodes, and when they changed, keeps them in `user_version.mutes` and logs them in
-- `badge_change.mutes` (a new version even if no count moved). Keyed by the user first, as
-- every per-user table. A new table and new nullable columns: older processes run on beside
-- them and ignore mutes.
CREATE TABLE badge_mute (
    user_id     text        NOT NULL,
    path        ltree       NOT NULL CHECK (nlevel(path) >= 2),
    muted       boolean     NOT NULL,
    until       timestamptz CHECK (muted OR until IS NULL),
    occurred_at timestamptz NOT NULL,
    woken       boolean     NOT NULL DEFAULT false,
    written_in  bigint      NOT NULL CHECK (written_in >= 0),
    stored_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path)
);

-- The snoozes still to wake, by their end.
CREATE INDEX badge_mute_wake ON badge_mute (until) WHERE muted AND NOT woken AND until IS NOT NULL;

-- The user's muted nodes at their current version (`[[path, until_microseconds], …]`, until
-- NULL for no end; NULL: none yet), and in the log after a version that changed them (NULL
-- when it changed none).
ALTER TABLE user_version ADD COLUMN mutes jsonb;
ALTER TABLE badge_change ADD COLUMN mutes jsonb;
