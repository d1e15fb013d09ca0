extension PipelineBenchmark {
    /// What `reddot bench pipeline --help` says after ``BenchScratch/discussion``: what is measured,
    /// how, and the exit codes.
    public static let discussion = """
        What runs: ingest, the rollup workers, the change feed and the query service in this \
        process, as reddot run runs them (one service group; the ingest and rollup options \
        below are reddot run's, with its defaults), against the scratch database. The change \
        feed publishes to the events topic's name plus .changes on the same brokers \
        (--no-change-feed turns it off). The query service \
        listens on 127.0.0.1 (a free port) with HS256 auth. Kafka: by default an in-process \
        librdkafka mock cluster with a fresh topic of --partitions partitions; with --brokers, \
        real brokers and the topic of --topic (use a new or empty topic).

        The clients: the first --streams of the --users users (u0, u1, …; default: all), \
        each with one Server-Sent Events stream (GET /v1/users/{user}/badges/stream with \
        the user's own token), read by one thread of this process that parses every \
        event's id: and data:. The streams are open before the first event is published; \
        only the events of users with a stream are timed to visibility.

        The load, open loop: events are published on schedule at --rate events/s (whatever \
        happens downstream; the producer sleeps at least 1 ms at a time and then sends every \
        event due, and it only waits when the mock broker's memory would overflow; the report \
        says how far it fell behind; on the mock cluster it lets a batch fill for 20 ms, \
        linger.ms, unless -X or --kafka-config gives it, since the mock's cost grows with \
        the number of batches in its log; that wait counts in publish → visible), for --warmup seconds \
        unmeasured and then --seconds measured. Each event is an incr by 1 of one of \
        --paths paths (root.bench.p0…) of one of the users, drawn from --seed (with \
        --hot-users N, a --hot-share of the events goes to u0 … u(N-1) and the rest to any \
        user: a few hot users and a long tail), JSON as \
        producers send it, keyed by user. So the n-th event on a (user, path) implies a \
        count of n there: it counts as visible at the moment the user's stream delivers \
        a snapshot or change whose node at that path shows a count of n or more.

        Reported, for the events scheduled in the measured window: \
        publish → visible p50/p99/max (from the event's produce() call to the read of the \
        SSE event that shows it); its two parts, publish → ingest commit (matched by \
        partition and offset from the delivery reports, as bench ingest does) and ingest \
        commit → visible; the p99 of publish → ingest commit of each second's events, in \
        publish order (a stall shows as a few slow seconds, a pipeline behind its load as \
        seconds that grow); how many batches ingest sent in the window because its writers \
        were free, because they had waited --batch-wait-ms, or because they were full \
        (reddot_ingest_batches_total); how many users of the window's batches ingest brought current in \
        the batch's own transaction and how many it left to the rollup \
        (reddot_ingest_users_total; --no-rollup-in-ingest leaves them all); the rollup lag \
        p50/p99/max of the users left: every sample of the rollup's own \
        metric reddot_rollup_lag_seconds recorded in the window (a user's dirty mark, \
        written in the ingest transaction, to the commit of the rollup transaction that \
        recomputed that user; DESIGN's target is p99 under 100 ms); visible → \
        reddot.changes p50/p99/max: every sample of the change feed's own metric \
        reddot_feed_lag_seconds in the window (from the start of the rollup transaction that \
        made a version visible to Kafka's acknowledgement of its record); the offered and the \
        achieved publish rate; stream events and errors; the rate of ingest alone in the same \
        run (unless --no-ingest-alone: after the pipeline, --rate × --seconds incr events, \
        10,000 to 1,000,000, over the same users and paths, on a topic and a scratch database \
        of their own, as fast as ingest takes them, without the rollup); and the CPU the machine spent \
        (Linux /proc: RedDot's services in this process, the PostgreSQL backends of the \
        scratch database, the mock cluster's thread when it stands in for Kafka (a real \
        cluster runs on other machines; the mock walks its log from the start, one batch at a \
        time, to find each fetch's offset, so its cost grows with the batches its log holds, \
        up to about 5 MB a partition), the load \
        generator's two threads, everything else); and what the server wrote to its \
        write-ahead log in the window (pg_stat_wal and pg_stat_bgwriter, PostgreSQL 14 and \
        later: bytes, records and full-page images per event, and the checkpoints, with \
        advice when max_wal_size forced one); and, about (a busy PostgreSQL backend publishes \
        its counts about once a second), the rows written to the database in the window per \
        event and per table (pg_stat_user_tables: inserted, updated and deleted, the index \
        entries they made, the tables that wrote most). The report names \
        PostgreSQL's fsync and synchronous_commit settings: durable (both on) is the \
        headline; anything else is labelled relaxed.

        After the last event is published the bench waits up to --drain-seconds for every \
        event to become visible, then checks the database: every event id applied once, \
        nothing rejected, and the leaves' counts summing to the number of events.

        The report says whether this is a debug or a release build; only release figures \
        mean anything. Exit codes: 0 measured and verified (every event became visible); \
        1 events not visible, lost, stream errors or another failure; 64 bad arguments; \
        65 no migrations; 69 the database cannot be reached.
        """
}
