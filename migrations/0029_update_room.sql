-- RedDot schema, part 29: room on each page of the tables that are updated row by row, so that
-- an update can put the row's new version on its own page (a HOT update): no new index entry,
-- and the old version is pruned on the page without a vacuum.
--
-- `badge_aggregate` (the rollup rewrites a user's changed nodes every version), `user_version`
-- (one update per version), `user_write` (one per writing transaction and user) and
-- `badge_state` (sets, decrements, clears, expiries) fill their pages to 80% from now on. Filled
-- to 100%, a rollup pass over 100,000 users updated 0.5% of their aggregates and 2% of their
-- versions on the page; at 80%, 63% and 29% (BENCHMARKS.md, "Room for updates on the page").
--
-- Only pages written from now on are filled less: no table is rewritten, and the lock taken
-- (SHARE UPDATE EXCLUSIVE) blocks neither reads nor writes: online. To give existing pages the
-- room at once, rewrite a table off-peak (`VACUUM FULL`, which locks it, or pg_repack).
ALTER TABLE badge_aggregate SET (fillfactor = 80);
ALTER TABLE user_version SET (fillfactor = 80);
ALTER TABLE user_write SET (fillfactor = 80);
ALTER TABLE badge_state SET (fillfactor = 80);
