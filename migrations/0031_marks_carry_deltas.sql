-- RedDot schema, part 31: a write that only adds carries its deltas on its dirty mark (issue 25:
-- fewer rows per event).
--
-- Until now an ingest write that only added (increments without expiry: DESIGN §5) left a
-- dirty mark and, beside it, one `badge_delta` row per node it added to; the rollup deleted
-- both. Each event made and removed about two queue rows and two index entries
-- (BENCHMARKS.md, "Where each event's rows go"). Now that write's mark holds its deltas, as
-- three arrays (nodes, amounts, unseen amounts), and the rollup adds them when it deletes the
-- mark: one row and one index entry per user and write.
--
-- Such a mark has `additive` set, and `recount` set too, so that a build before this part,
-- which does not read the arrays, recounts that user (slow, never wrong) rather than dropping
-- the deltas. This build recounts a user for a mark with `recount` and not `additive`. Marks
-- of earlier builds have `additive` false: their meaning is unchanged. `badge_delta` stays:
-- other writers (an earlier build's ingest during a rolling update, the rare writes that are
-- not ingest's) still record deltas there, and the rollup reads both.
--
-- Online: columns with a constant default or none (no table rewrite).
ALTER TABLE dirty_mark
    ADD COLUMN additive boolean NOT NULL DEFAULT false,
    ADD COLUMN delta_paths ltree[],
    ADD COLUMN delta_amounts bigint[],
    ADD COLUMN delta_unseen bigint[];
