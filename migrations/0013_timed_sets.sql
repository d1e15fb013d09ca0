-- RedDot schema, part 13: timed, order-free sets and decrements (DESIGN §2, Order of operations).
--
-- A set is the node's value as of the time it occurred: `badge_state.set_at` keeps that time,
-- so that a set or an increment that occurred at or before it and arrives later changes nothing,
-- and a clear takes the state only when it occurred at or after it. NULL for states stored
-- before this migration (and for carriers no set left): any set supersedes them, as before.
--
-- A decrement is an increment row with a negative amount, kept by the time it occurred like
-- every increment: it takes from what occurred before it, whatever order they arrive in.
-- `badge_state.debited` marks a counter that has (or had) decrement rows: its count is the fold of
-- its rows in time order (`badge_fold`, below), where a decrement that meets a count of its size
-- or less leaves nothing; the others are a plain sum, as before (the fold gives the same there).
--
-- New nullable or defaulted columns, a dropped check and new functions: no row is rewritten.
-- Processes of an older build write decrements and sets the old way; stop them before this one
-- starts writing (the runbook's upgrade notes).
ALTER TABLE badge_state ADD COLUMN set_at timestamptz;
-- When the operation that gave `expires_at` occurred (the set, or the latest increment that gave
-- one): an increment's expiry applies only when it occurred later, whatever order they arrive
-- in, and a clear keeps on a carrier only an expiry given after it.
ALTER TABLE badge_state ADD COLUMN expires_from timestamptz;
ALTER TABLE badge_state ADD COLUMN debited boolean NOT NULL DEFAULT false;
ALTER TABLE badge_increment DROP CONSTRAINT badge_increment_amount_check;

-- One step of a counter's fold: `state` is {count, unseen, dot, icon} (dot and icon 0 or 1), the
-- row's `amount` (a decrement below 0), `unseen` (for an increment the part of its amount not
-- seen, for a decrement 1 when not seen, else 0) and `keeps` (the state's own row, first: whether
-- it shows a dot at 0). The model is BadgeState.folded in BadgeCore.
CREATE FUNCTION badge_fold_step(state bigint[], amount bigint, unseen bigint, keeps boolean) RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN amount >= 0 THEN ARRAY[
            least(state[1]::numeric + amount, 9223372036854775807)::bigint,
            least(state[2]::numeric + unseen, 9223372036854775807)::bigint,
            CASE WHEN keeps THEN 1 ELSE state[3] END,
            state[4]]
        WHEN state[1] <= -amount THEN ARRAY[0, 0, 0, 0]::bigint[]
        WHEN unseen > 0 THEN ARRAY[state[1] + amount, greatest(state[2] + amount, 0), state[3], state[4]]
        ELSE ARRAY[state[1] + amount, least(state[2], state[1] + amount), state[3], state[4]]
    END
$$;

-- A counter's fold over its state's row and its increment rows, ordered by time:
-- `badge_fold(amount, unseen, keeps ORDER BY occurred_at)` is {count, unseen, dot, icon}.
CREATE AGGREGATE badge_fold(bigint, bigint, boolean) (
    SFUNC = badge_fold_step,
    STYPE = bigint[],
    INITCOND = '{0,0,0,1}'
);
