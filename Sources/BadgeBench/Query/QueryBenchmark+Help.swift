extension QueryBenchmark {
    /// What `reddot bench query --help` says after ``BenchScratch/discussion``: what is measured,
    /// how, and the exit codes.
    public static let discussion = """
        Load: --users users named by number (0, 1, …), each with the same 20 nodes \
        (root.chat.direct.d0…d5, root.chat.group.g0…g3, root.promotion.p0…p4, root.feed.like, \
        .comment, .follow, .mention, root.system.update) set to a count of 1-9 drawn from \
        --seed: badge_state rows in transactions of --load-batch-users users through \
        BadgeStore.apply, --load-writers connections in parallel, the users marked dirty; then \
        the rollup (recomputeDirtyUsers, one task per writer) fills badge_aggregate (27 rows per \
        user) and user_version; then VACUUM ANALYZE and CHECKPOINT. Reported: rows/s and users/s.

        Phase 1, HTTP: the query service (BadgeAPI, the ChangeHub with a tree cache of \
        --tree-cache-mb, a pool of --pool-size connections, Prometheus metrics as in reddot \
        serve) runs in this process on 127.0.0.1 and a free port. With the cache on (as \
        in reddot serve), repeated reads of an unchanged tree skip PostgreSQL: the report \
        gives the share answered from it; --tree-cache-mb 0 measures every read going to \
        PostgreSQL, the like-for-like comparison with pgbench. The readers are --sample-users users spread evenly over \
        all (user i × (--users / --sample-users)), each with its own HS256 token, signed before the \
        clock starts. A small HTTP/1.1 client (--client-threads threads polling --connections \
        keep-alive connections, one request in flight per connection) sends GET \
        /v1/users/{user}/badges (the whole tree) for random sampled users, with that user's \
        token, for --warmup seconds unmeasured and then --duration seconds measured. By \
        default each connection sends its next request as soon as its answer is in (closed \
        loop: the most the service can do, where latency is mostly queueing); --rate R \
        offers R requests/s on schedule instead (open loop; sent on a 1 ms tick), for \
        latency at a given load. \
        Reported: requests/s, latency p50/p99/max (from writing the request, or from its \
        scheduled time with --rate, to reading the last byte of the answer), and errors \
        (any answer but 200, any broken connection). \
        Before that, three answers are decoded and checked against the loaded counts.

        Phase 2, the machine's limit for the same read: after the server has stopped, \
        pgbench -n -M prepared runs BadgeStore.treeQuerySQL (only $1, $2, $3 renamed to \
        pgbench variables; the whole tree: 'root' and nlevel 17) for random users of the same \
        sample, with --pgbench-clients clients (default: --connections) on --pgbench-threads \
        threads, against the same database: a --warmup run, then a --duration run. \
        Reported: tps, latency average, failed transactions; and the HTTP rate as a \
        percentage of it (the target: 50% or more, with p99 under 10 ms at 200000 users).

        During both measurements the bench samples CPU time (Linux /proc: the machine, \
        this process, pgbench, and the PostgreSQL backends whose process title names the \
        scratch database; each client thread's own clock) and reports the CPU each request \
        costs in the service, the HTTP client or pgbench, and PostgreSQL, and the share of \
        the machine that everything else took (other processes: a busy machine shows here). \
        pgbench is looked up in --pgbench, then PATH, then /usr/lib/postgresql/*/bin.

        The report says whether this is a debug or a release build; only release figures \
        mean anything. Exit codes: 0 measured without errors; 1 errors or a failure; 64 bad \
        arguments; 65 no migrations; 69 the database cannot be reached, or no pgbench.
        """
}
