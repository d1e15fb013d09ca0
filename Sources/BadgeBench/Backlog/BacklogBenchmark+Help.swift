extension BacklogBenchmark {
    /// What `reddot bench backlog --help` says after ``BenchScratch/discussion``.
    public static let discussion = """


        What runs: a backlog of --events increments (incr by 1 of one of --paths paths \
        root.bench.p0… of one of --users users, drawn from --seed, keyed by user) is published \
        to Kafka first (by default an in-process librdkafka mock cluster with a fresh topic of \
        --partitions partitions; the mock keeps about 5 MB per partition, so give a large \
        backlog enough partitions). Then each contender reads the whole topic with a consumer \
        group of its own into a scratch database of its own, as separate processes, one after \
        the other:

        1. ingest alone: reddot ingest (this executable, its defaults but \
        --no-rollup-in-ingest, so that it leaves every user to the rollup, as a build before \
        that flag did), until the offsets it stored in PostgreSQL cover the backlog;
        2. the rollup of that backlog: reddot rollup on the same database, until no user is \
        dirty (reported in users/s);
        3. the whole write pipeline: reddot ingest and reddot rollup started together, with \
        their defaults (ingest brings each batch's users current where no rollup round holds \
        them), until the backlog is stored and no user is dirty: every parent is current. Then the \
        aggregates are checked as reddot verify checks them, and the leaves' counts must sum \
        to --events. Then how many user versions the pipeline made (once per user at best: more \
        means rounds that came before a user's last writes), and the bytes that database holds \
        on disk (after a VACUUM): per event \
        retained (event ids, increments, deltas, items, clear marks: what the dedupe \
        retention keeps) and per user (states, aggregates, versions, the change log, marks); \
        and one retention prune of all of it, timed, as ingest's prune every 10 minutes runs \
        it (broadcasts' and clients' ids, tombstones and clear marks deleted, increments folded \
        into their counts), and the users' event ids emptied a dedupe generation at a time, \
        timed apart, and how many users the prune left dirty: work it leaves the rollup;
        4. the peer: deploy/bench/plain_consumer.py, a plain at-least-once consumer \
        (confluent-kafka and psycopg: each batch adds every incr to its node and every \
        ancestor with one batched upsert, then commits the offsets to Kafka; no dedupe, no \
        dead letters, no versions). It stops once it has consumed the backlog; its root \
        counts must sum to --events. It needs python3 with confluent_kafka and psycopg \
        (Debian: python3-confluent-kafka python3-psycopg); without a script (--peer-script, \
        else deploy/bench/plain_consumer.py under the working directory or the source tree) \
        it is left out.

        Each time runs from the start of the contender's processes (their start and the \
        consumer group's join included) to done; the report also gives the time from each \
        one's first commit. The rollups run with their change feed to the topic's name plus \
        .changes, as reddot rollup does next to Kafka. The report prints PostgreSQL's fsync and \
        synchronous_commit: durable (both on) is the headline. On Linux it also prints the CPU \
        each phase used, in core-seconds per 1,000 events (per 1,000 users for the rollup of the \
        backlog): of each of its processes (read from /proc; a rollup's CPU includes its \
        change feed) and of the PostgreSQL backends serving its database (the bench's own probe \
        included; PostgreSQL's background processes and the kernel are not; not read for the \
        plain consumer, whose backend exits with it), with how busy the \
        whole machine was. These figures change less than the rates with the machine's speed \
        of the day, and say what each stage costs. Then what the server wrote to its \
        write-ahead log in each phase (pg_stat_wal and pg_stat_bgwriter, PostgreSQL 14 and \
        later; the whole server's, so run the bench on a server nothing else writes to): \
        bytes, records and full-page images per event (per user for the rollup of the \
        backlog), the checkpoints that came meanwhile, and advice when max_wal_size forced \
        one; with shared_buffers, max_wal_size, checkpoint_timeout and wal_compression. And the \
        rows each phase wrote to its database, per event (per user for the rollup of the \
        backlog), read from pg_stat_user_tables once the phase's sessions have ended: inserted, \
        updated (and how many in place, HOT) and deleted, the index entries they made, and the \
        tables that wrote most, each as inserted/updated/deleted.

        Exit codes: 0 measured and verified; 1 a phase failed, timed out or did not verify; \
        64 bad arguments; 65 no migrations; 69 the database cannot be reached.
        """
}
