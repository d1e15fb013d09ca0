-- RedDot schema, part 28: when the number a push device should show was made (issue 28, push
-- metrics). `wanted_at` is the change's time (the change record's `at`; the recount's for a
-- broadcast change), so `reddot push` can measure the lag from a change to the provider's
-- acceptance (`reddot_push_lag_seconds`). A nullable column: online; rows of an older build
-- stay NULL until their next number, and a NULL counts no lag.
ALTER TABLE push_device ADD COLUMN wanted_at timestamptz;
