-- RedDot schema, part 28: more of a push device (issue 28).
--
-- `wanted_at`: when the number the device should show was made (the change record's `at`; the
-- recount's for a broadcast change), so `reddot push` can measure the lag from a change to the
-- provider's acceptance (`reddot_push_lag_seconds`). Rows of an older build stay NULL until
-- their next number, and a NULL counts no lag.
--
-- `quiet_start`, `quiet_end`, `quiet_time_zone`: the device's quiet hours (minutes after
-- midnight in an IANA time zone; an end before the start runs over midnight), all three or none.
-- A number that comes then is sent when they end.
--
-- Nullable columns and a check that holds for every existing row: online.
ALTER TABLE push_device
    ADD COLUMN wanted_at timestamptz,
    ADD COLUMN quiet_start smallint CHECK (quiet_start BETWEEN 0 AND 1439),
    ADD COLUMN quiet_end smallint CHECK (quiet_end BETWEEN 0 AND 1439),
    ADD COLUMN quiet_time_zone text CHECK (length(quiet_time_zone) BETWEEN 1 AND 64),
    ADD CONSTRAINT push_device_quiet_whole CHECK (
        (quiet_start IS NULL) = (quiet_end IS NULL) AND (quiet_start IS NULL) = (quiet_time_zone IS NULL));
