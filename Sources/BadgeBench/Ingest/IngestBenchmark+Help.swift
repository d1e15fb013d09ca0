extension IngestBenchmark {
    /// What `reddot bench ingest --help` says after ``BenchScratch/discussion``: what is measured,
    /// how, and the exit codes.
    public static let discussion = """
        Kafka: by default an in-process librdkafka mock cluster with a fresh topic of \
        --partitions partitions. That broker keeps only about the last 5 MB of each \
        partition, so ingest is started first and the producer never runs more than about \
        2 MB per partition ahead of the commits. With --brokers, the bench uses real brokers \
        and the topic of --topic (default: a new topic reddot.bench.<random>, which needs \
        auto.create.topics.enable); use a new or empty topic.

        The workload: --events direct-operation events (--workload counter: 90% incr by 1, \
        10% set with a count of 0-9; --workload items: 90% add of a new item, 10% remove of \
        an item added earlier) over --users users × --paths paths root.bench.p0…, JSON as producers send \
        them, keyed by user, from a seeded generator (--seed). Unthrottled by default; \
        --rate throttles the producer to that many events/s, which is how latency is measured \
        (the target is p99 under 1 s at 20000 events/s).

        Phase 1, ingest: one IngestService runs in-process, with --writers writer threads as \
        reddot ingest does (default 2); after one warm-up event per \
        partition is committed (the group has joined), the events are published while it \
        consumes. Reported: events/s from the first publish to the last commit, and each \
        event's latency from its produce() call to the commit of the batch that holds it \
        (matched by partition and offset from the delivery reports), p50/p99/max. Then \
        the bench checks that every event was committed: the offsets stored in PostgreSQL \
        equal the log-end offsets of every partition, and the number of applied event ids \
        equals --events. If not, it says what was lost and exits 1.

        Phase 2, the machine's limit: the same (user, path, count) rows, in batches of \
        --batch-size (rows made distinct within each batch), upserted into a fresh table \
        shaped like badge_state with INSERT … SELECT FROM unnest(…) ON CONFLICT DO UPDATE, \
        one writer, one transaction per batch, no Kafka, no JSON, no dedupe: rows/s. The \
        report gives ingest events/s as a percentage of it (the target is 60% or more).

        Phase 3, where ingest's time goes: a copy of the workload for other users is \
        decoded into batches on one thread (events/s), then written with ingest's own \
        transaction (offsets, dedupe, badge writes, dirty marks) by one writer without \
        Kafka (events/s).

        The report says whether this is a debug or a release build; only release figures \
        mean anything. Exit codes: 0 measured and verified; 1 events lost or a failure; \
        64 bad arguments; 65 no migrations; 69 the database cannot be reached.
        """
}
