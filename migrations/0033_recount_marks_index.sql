-- RedDot schema, part 33: the rollup's queue gets an index of the marks that ask for a recount
-- or a bump, and keeps its pages after a vacuum (issue 25: a round's cost per user).
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
-- queue (about half a second per million); the rollup keeps the queue short.
CREATE INDEX IF NOT EXISTS dirty_mark_recount ON dirty_mark (user_id, seq) WHERE (recount AND NOT additive) OR bump;

-- A vacuum that finds the queue empty no longer cuts its file to nothing (`vacuum_truncate`).
-- PostgreSQL plans a table with no pages and a vacuumed row count as empty for certain, and a
-- statement prepared then (the rollup's claim) kept that plan, a scan of the whole queue per
-- user, while the next backlog filled it: the claim took 137 ms instead of 3 ms until the next
-- autovacuum (BENCHMARKS.md, "The queue after a backlog"). The pages stay for the marks to come.
-- A storage parameter of the table itself, or of each partition where it is partitioned (a
-- partition added later needs `ALTER TABLE … SET (vacuum_truncate = false)` too).
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT relid FROM pg_partition_tree('dirty_mark'::regclass) WHERE isleaf LOOP
        EXECUTE format('ALTER TABLE %s SET (vacuum_truncate = false)', part);
    END LOOP;
END
$$;
