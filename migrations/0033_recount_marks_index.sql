-- RedDot schema, part 33: the rollup's queue gets an index of the marks that ask for a recount
-- or a bump (issue 25: a round's cost per user).
--
-- Since part 31 nearly every mark ingest leaves only adds (`additive`). Yet each round asked,
-- per user, for the first mark that does not (`recount AND NOT additive`, or `bump`), and the
-- claim for whether any does, through the primary key: every mark of the user read from the
-- heap to find none (BENCHMARKS.md, "Marks that ask for a recount"). This partial index holds
-- only those marks, so that question costs one probe of an index that is nearly empty; writers
-- add an entry only for such a mark.
--
-- Not built concurrently: that is refused on a table partitioned by user (docs/SHARDING.md).
-- Writers of marks wait while it is built, for a time that grows with the marks waiting in the
-- queue (0.1 s for a million in memory); the rollup keeps the queue short.
CREATE INDEX IF NOT EXISTS dirty_mark_recount ON dirty_mark (user_id, seq) WHERE (recount AND NOT additive) OR bump;

