import BadgeCore
public import BadgeStore
import Foundation
public import LibPQ
public import Logging
public import RdKafka
import Synchronization

/// The benchmark behind `reddot bench backlog`: a backlog of increments already in Kafka, brought
/// into PostgreSQL by separate processes, as an operator runs them, in one run: `reddot ingest`
/// alone; `reddot rollup` over what it left dirty; `reddot ingest` and `reddot rollup` started
/// together until every parent is current; and a plain at-least-once Python consumer
/// (`deploy/bench/plain_consumer.py`) that adds each increment to its node and every ancestor.
/// Each contender reads the same topic with its own consumer group into its own scratch database.
public struct BacklogBenchmark: Sendable {
    /// What to measure, and where.
    public struct Settings: Sendable {
        /// Events in the backlog, users and paths per user they spread over, and their seed.
        public var events: Int
        public var users: Int
        public var paths: Int
        public var seed: UInt64
        /// This run's id: event ids, groups and scratch databases carry it.
        public var runID: String
        /// The producer's Kafka properties (bootstrap servers included), the brokers' list the
        /// child processes get, the topic, and whether it is the in-process mock cluster.
        public var kafka: KafkaConfiguration
        public var brokers: String
        public var topic: String
        /// The server the scratch databases are made on, and the migrations they get.
        public var server: PGConfiguration
        public var migrations: [MigrationFile]
        /// The `reddot` executable the children run.
        public var executable: String
        /// The plain consumer's script and its Python (nil: the peer is left out).
        public var peerScript: String?
        public var python: String
        /// Why the peer is left out when `peerScript` is nil, as the report says it.
        public var peerLeftOut = "no --peer-script found"
        /// Arguments added to every `reddot rollup` the bench starts (`--rollup-argument`).
        public var rollupArguments: [String] = []
        /// How long each phase may take.
        public var timeoutSeconds: Int
        /// Keep the scratch databases.
        public var keep: Bool

        /// Settings with every field given.
        public init(
            events: Int, users: Int, paths: Int, seed: UInt64, runID: String, kafka: KafkaConfiguration, brokers: String, topic: String,
            server: PGConfiguration, migrations: [MigrationFile], executable: String, peerScript: String?, python: String,
            timeoutSeconds: Int, keep: Bool
        ) {
            (self.events, self.users, self.paths, self.seed, self.runID) = (events, users, paths, seed, runID)
            (self.kafka, self.brokers, self.topic) = (kafka, brokers, topic)
            (self.server, self.migrations, self.executable) = (server, migrations, executable)
            (self.peerScript, self.python, self.timeoutSeconds, self.keep) = (peerScript, python, timeoutSeconds, keep)
        }
    }

    /// One contender's run.
    public struct Phase: Sendable, Codable {
        /// What ran.
        public var name: String
        /// From the start of its processes to the moment it was done.
        public var seconds: Double
        /// From its first commit to the moment it was done (nil: not observed).
        public var secondsFromFirstCommit: Double?
        /// Events (or, for the rollup of the backlog, users) per second over `seconds`.
        public var rate: Double
        /// What was checked afterwards; empty when all was right.
        public var problems: [String]
        /// Where the CPU went meanwhile (nil where `/proc` is not available).
        public var cpu: PhaseCPU? = nil
        /// What the server wrote to its write-ahead log meanwhile (nil where it does not say).
        public var wal: PhaseWAL? = nil
        /// The rows the phase wrote to its database, per table (nil where it does not say).
        public var rows: PhaseRows? = nil
    }

    /// The CPU time of a phase, in core-seconds: of each of the contender's processes, of the
    /// PostgreSQL backends serving its database, and of the whole machine (busy, and cores ×
    /// seconds). Work per event or per user, whatever the machine's speed that day.
    public struct PhaseCPU: Sendable, Codable {
        /// Each process of the contender by name (`ingest`, `rollup`, `plain consumer`).
        public var processes: [String: Double]
        /// The backends of the phase's scratch database (the bench's own probe included).
        public var database: Double
        /// The whole machine: busy, and available.
        public var machineBusy: Double
        public var machineTotal: Double

        /// The CPU from `before` to `after` (samples of the phase's database) with `children`'s times.
        init(before: CPUSample, after: CPUSample, children: [BenchChild]) {
            var processes: [String: Double] = [:]
            for child in children { if let seconds = child.cpuSeconds { processes[child.name] = seconds } }
            self.processes = processes
            database = after.databaseSeconds - before.databaseSeconds
            machineBusy = after.machineBusySeconds - before.machineBusySeconds
            machineTotal = after.machineTotalSeconds - before.machineTotalSeconds
        }
    }

    let settings: Settings
    let logger: Logger

    /// A benchmark of `settings`, logging to `logger`.
    public init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The first problem with these option values, as the sentence `reddot bench backlog`
    /// prints (naming the flag); nil when they are all in range.
    public static func problem(events: Int, users: Int, paths: Int, partitions: Int32, timeoutSeconds: Int) -> String? {
        guard (1...20_000_000).contains(events) else { return "--events takes 1…20000000" }
        guard (1...10_000_000).contains(users) else { return "--users takes 1…10000000" }
        guard (1...1_000).contains(paths) else { return "--paths takes 1…1000" }
        guard (1...10_000).contains(partitions) else { return "--partitions takes 1…10000" }
        guard (1...86_400).contains(timeoutSeconds) else { return "--timeout-seconds takes 1…86400" }
        return nil
    }

    /// What a run measured: PostgreSQL's durability settings, each phase, and the distinct
    /// users the backlog touched.
    public struct Measurement: Sendable {
        public var postgresqlSettings: [String: String] = [:]
        /// The server's version (`SHOW server_version`), as the scratch database's creation read it.
        public var serverVersion = ""
        public var publishSeconds = 0.0
        public var dirtyUsers = 0
        public var ingestAlone: Phase?
        public var rollupOfBacklog: Phase?
        public var wholePipeline: Phase?
        public var plainConsumer: Phase?
        public var plainConsumerSkipped: String?
        /// After the whole pipeline: bytes on disk per table, and one retention prune of
        /// everything stored (event ids, tombstones, clear marks; increments folded).
        public var tableBytes: [String: Int64] = [:]
        /// User versions the whole pipeline made (change-log records).
        public var pipelineVersions = 0
        public var pruneSeconds = 0.0
        public var prunedRows = 0
        /// Users the prune left dirty: work it left for the rollup.
        public var pruneDirtiedUsers = 0
        /// The users' event ids emptied by starting two dedupe generations, and its seconds.
        public var emptiedKeys = 0
        public var generationSeconds = 0.0
    }

    /// The tables whose size is per event retained (the dedupe retention's rows), and per user.
    static let retainedTables = ["applied_user_event_generation", "applied_event", "badge_increment", "badge_delta", "badge_item", "badge_clear_mark"]
    static let userTables = ["badge_state", "badge_aggregate", "user_version", "user_write", "badge_change", "dirty_mark", "badge_seen_mark"]

    /// Publishes the backlog, then runs each phase in a scratch database of its own.
    ///
    /// - Throws: `BenchFailure` when a phase cannot run (a child that exits early, a timeout);
    ///   `PGError`, `KafkaError`.
    public func run() async throws -> Measurement {
        var measurement = Measurement()
        try await publish(&measurement)
        try await withScratch("a") { database, url, serverVersion in
            measurement.serverVersion = serverVersion
            measurement.postgresqlSettings = try await BenchScratch.durabilitySettings(database, logger: logger)
            measurement.ingestAlone = try await ingestAlone(database: database, url: url)
            measurement.dirtyUsers = try await connect(database) { try $0.countDirtyUsers() }
            measurement.rollupOfBacklog = try await rollupOfBacklog(database: database, url: url, users: measurement.dirtyUsers)
        }
        try await withScratch("b") { database, url, _ in
            measurement.wholePipeline = try await wholePipeline(database: database, url: url)
            try await measureStorage(database: database, into: &measurement)
        }
        if let script = settings.peerScript {
            try await withScratch("c") { database, url, _ in
                measurement.plainConsumer = try await plainConsumer(script: script, database: database, url: url)
            }
        } else {
            measurement.plainConsumerSkipped = settings.peerLeftOut
        }
        return measurement
    }

    /// Sends every event of the backlog and waits for each delivery report.
    private func publish(_ measurement: inout Measurement) async throws {
        let settings = self.settings
        benchProgress("generating \(settings.events) events over \(settings.users) users × \(settings.paths) paths")
        let workload = try await onThread(named: "reddot.bench.generate") {
            try PipelineWorkload(events: settings.events, users: settings.users, paths: settings.paths, seed: settings.seed, runID: settings.runID)
        }
        benchProgress("publishing them to \(settings.topic)")
        let producer = try KafkaProducer(configuration: settings.kafka, logger: logger)
        try await producer.closing { () async throws -> Void in
            let failures = FailureTally()
            let started = BenchClock.now
            try await onThread(named: "reddot.bench.publish") {
                let records = (0..<workload.payloads.count).lazy.map { index in
                    KafkaOutgoingRecord(topic: settings.topic, key: PipelineWorkload.key(of: workload.users[index]), payload: workload.payloads[index])
                }
                producer.sendAll(records, timeout: .seconds(300)) { _, result in
                    if case .failure(let error) = result { failures.record(error) }
                }
            }
            measurement.publishSeconds = Double(BenchClock.now - started) / 1e9
            if let failure = failures.first {
                throw BenchFailure("\(failures.count) events were not delivered to Kafka: \(failure)")
            }
        }
    }

    /// `reddot ingest` alone, until its stored offsets cover the backlog.
    private func ingestAlone(database: PGConfiguration, url: String) async throws -> Phase {
        benchProgress("ingest alone: reddot ingest")
        let group = "reddot-backlog-\(settings.runID)-a"
        // Ingest's own part: without bringing its users current (a build that does so by
        // default takes --no-rollup-in-ingest), so that the rollup of the backlog has it all.
        let leaveToRollup = Self.knowsFlag("--no-rollup-in-ingest", of: settings.executable, command: "ingest")
        let ingest = try BenchChild.start(
            settings.executable, ingestArguments(url: url, group: group) + (leaveToRollup ? ["--no-rollup-in-ingest"] : []), name: "ingest",
            logger: logger)
        defer { ingest.stop() }
        let timing = try await until(database, children: [ingest]) { connection in
            let consumed = try connection.sumOfStoredOffsets(group: group)
            return (consumed > 0, consumed >= Int64(settings.events))
        }
        ingest.stop()
        return Phase(
            name: "reddot ingest", seconds: timing.seconds, secondsFromFirstCommit: timing.fromFirstCommit,
            rate: Double(settings.events) / timing.seconds, problems: [], cpu: timing.cpu, wal: timing.wal,
            rows: PhaseRows(before: timing.rows, after: await settledRows(database)))
    }

    /// `reddot rollup` over the users ingest alone left dirty, until none is.
    private func rollupOfBacklog(database: PGConfiguration, url: String, users: Int) async throws -> Phase {
        benchProgress("rollup of the backlog: reddot rollup over \(users) dirty users")
        let rollup = try BenchChild.start(settings.executable, rollupArguments(url: url), name: "rollup", logger: logger)
        defer { rollup.stop() }
        let timing = try await until(database, children: [rollup]) { connection in
            let dirty = try connection.anyDirtyUser()
            return (true, !dirty)
        }
        rollup.stop()
        return Phase(name: "reddot rollup", seconds: timing.seconds, secondsFromFirstCommit: nil, rate: Double(users) / timing.seconds, problems: [],
            cpu: timing.cpu, wal: timing.wal, rows: PhaseRows(before: timing.rows, after: await settledRows(database)))
    }

    /// `reddot ingest` and `reddot rollup` started together, until the backlog is stored and no
    /// user is dirty; then `reddot verify`'s check and the leaves' sum.
    private func wholePipeline(database: PGConfiguration, url: String) async throws -> Phase {
        benchProgress("whole pipeline: reddot ingest and reddot rollup, started together")
        let group = "reddot-backlog-\(settings.runID)-b"
        let ingest = try BenchChild.start(settings.executable, ingestArguments(url: url, group: group), name: "ingest", logger: logger)
        defer { ingest.stop() }
        let rollup = try BenchChild.start(settings.executable, rollupArguments(url: url), name: "rollup", logger: logger)
        defer { rollup.stop() }
        let events = Int64(settings.events)
        let timing = try await until(database, children: [ingest, rollup]) { connection in
            let consumed = try connection.sumOfStoredOffsets(group: group)
            // Every parent is current once the backlog is stored and no user waits for a rollup.
            let current = try consumed >= events && !connection.anyDirtyUser()
            return (consumed > 0, current)
        }
        ingest.stop()
        rollup.stop()
        let rows = PhaseRows(before: timing.rows, after: await settledRows(database))
        var problems: [String] = []
        var verifying = database
        verifying.sessionSettings += BadgeStore.recommendedSessionSettings  // as reddot verify runs
        let pool = PGPool(configuration: verifying, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let check = try await BadgeVerifier(store: BadgeStore(pool: pool)).run(repair: false)
        if check.mismatches > 0 { problems.append("reddot verify found \(check.mismatches) mismatched aggregates") }
        let leaves = try await pool.withConnection { try $0.sumOfBenchLeafCounts(excluding: "") }
        if leaves != events { problems.append("the leaves' counts sum to \(leaves), not \(events)") }
        return Phase(
            name: "reddot ingest + reddot rollup", seconds: timing.seconds, secondsFromFirstCommit: timing.fromFirstCommit,
            rate: Double(settings.events) / timing.seconds, problems: problems, cpu: timing.cpu, wal: timing.wal, rows: rows)
    }

    /// What the whole pipeline's database holds on disk (after `VACUUM (ANALYZE)`), then one retention prune of all of it
    /// (as ingest's hourly prune runs, with a cutoff after every row), timed.
    private func measureStorage(database: PGConfiguration, into measurement: inout Measurement) async throws {
        var session = database
        session.sessionSettings += BadgeStore.recommendedSessionSettings
        let pool = PGPool(configuration: session, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        measurement.tableBytes = try await pool.withConnection { connection in
            try connection.execute(script: "VACUUM (ANALYZE)", name: "bench.vacuum_all")
            return try connection.tableSizes(Self.retainedTables + Self.userTables)
        }
        measurement.pipelineVersions = try await pool.withConnection { try $0.countLoggedVersions() }
        benchProgress("one retention prune of everything stored")
        measurement.emptiedKeys = try await pool.withConnection { try $0.countAppliedEvents() }
        let rotating = BenchClock.now
        // The first generation started empties the older slot, the second the one ingest wrote.
        for _ in 0..<2 {
            _ = try await pool.withConnection { connection in
                try IngestTransaction.rotateDedupeGeneration(startedBefore: Date().addingTimeInterval(60), on: connection)
            }
        }
        measurement.generationSeconds = Double(BenchClock.now - rotating) / 1e9
        measurement.emptiedKeys -= try await pool.withConnection { try $0.countAppliedEvents() }
        let started = BenchClock.now
        measurement.prunedRows = try await pool.withConnection { connection in
            try IngestTransaction.pruneAppliedEvents(olderThan: Date().addingTimeInterval(60), limit: 10_000, on: connection)
        }
        measurement.pruneSeconds = Double(BenchClock.now - started) / 1e9
        measurement.pruneDirtiedUsers = try await pool.withConnection { try $0.countDirtyUsers() }
    }

    /// The plain consumer, until it exits (it stops once it has consumed the backlog).
    private func plainConsumer(script: String, database: PGConfiguration, url: String) async throws -> Phase {
        benchProgress("plain consumer: \(settings.python) \(script)")
        let name = try await connect(database) { try $0.currentDatabase() }
        let walBefore = try await connect(database) { WALSample.now(on: $0) }
        let rowsBefore = try await connect(database) { TableRowsSample.now(on: $0) }
        let before = CPUSample.now(database: name)
        let started = BenchClock.now
        let peer = try BenchChild.start(
            settings.python,
            [
                script, "--brokers", settings.brokers, "--topic", settings.topic, "--group", "reddot-backlog-\(settings.runID)-c",
                "--dsn", url, "--events", "\(settings.events)", "--timeout-seconds", "\(settings.timeoutSeconds)",
            ], name: "plain consumer", logger: logger)
        defer { peer.stop() }
        let status = try await peer.waitForExit(timeoutSeconds: settings.timeoutSeconds)
        let seconds = Double(BenchClock.now - started) / 1e9
        // Its process's CPU as last read while it ran (its backend's is not reported).
        let cpu = PhaseCPU(before: before, after: CPUSample.now(database: name), children: [peer])
        let wal = PhaseWAL(before: walBefore, after: try await connect(database) { WALSample.now(on: $0) })
        let rows = PhaseRows(before: rowsBefore, after: await settledRows(database))
        guard status == 0 else { throw BenchFailure("the plain consumer exited \(status): \(peer.outputTail)") }
        // Its last line: {"consumed", "applied", "batches", "seconds", "seconds_from_first_commit"}.
        let line = peer.outputTail.split(separator: "\n").last.map(String.init) ?? ""
        let reported = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        var problems: [String] = []
        let roots = try await connect(database) { try $0.sumOfPeerRootCounts() }
        if roots != Int64(settings.events) { problems.append("its root counts sum to \(roots), not \(settings.events)") }
        return Phase(
            name: "plain consumer", seconds: seconds, secondsFromFirstCommit: reported?["seconds_from_first_commit"] as? Double,
            rate: Double(settings.events) / seconds, problems: problems, cpu: cpu, wal: wal, rows: rows)
    }

    /// Whether `executable command --help` names `flag` (a build before the flag does not).
    static func knowsFlag(_ flag: String, of executable: String, command: String) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [command, "--help"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self).contains(flag)
    }

    private func ingestArguments(url: String, group: String) -> [String] {
        [
            "ingest", "--database-url", url, "--brokers", settings.brokers, "--topic", settings.topic, "--group", group,
            "--dlq-topic", settings.topic + ".dlq", "--log-level", "warning",
        ]
    }

    /// The rollup as an operator runs it next to Kafka: with its change feed.
    private func rollupArguments(url: String) -> [String] {
        ["rollup", "--database-url", url, "--changes-brokers", settings.brokers, "--changes-topic", settings.topic + ".changes", "--log-level", "warning"]
            + settings.rollupArguments
    }

    /// Polls `database` every 10 ms until `check` says done (its first value: whether a commit
    /// was seen), failing when a child exits or the phase times out.
    private func until(
        _ database: PGConfiguration, children: [BenchChild], _ check: @escaping @Sendable (PGConnection) throws -> (committed: Bool, done: Bool)
    ) async throws -> (seconds: Double, fromFirstCommit: Double?, cpu: PhaseCPU, wal: PhaseWAL?, rows: TableRowsSample?) {
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let name = try await pool.withConnection { try $0.currentDatabase() }
        let walBefore = try await pool.withConnection { WALSample.now(on: $0) }
        let rowsBefore = try await pool.withConnection { TableRowsSample.now(on: $0) }
        let before = CPUSample.now(database: name)
        let started = BenchClock.now
        var firstCommit: UInt64?
        let deadline = started + UInt64(settings.timeoutSeconds) * 1_000_000_000
        while true {
            let (committed, done) = try await pool.withConnection { try check($0) }
            let now = BenchClock.now
            if committed, firstCommit == nil { firstCommit = now }
            if done {
                let cpu = PhaseCPU(before: before, after: CPUSample.now(database: name), children: children)
                let wal = PhaseWAL(before: walBefore, after: try await pool.withConnection { WALSample.now(on: $0) })
                return (Double(now - started) / 1e9, firstCommit.map { Double(now - $0) / 1e9 }, cpu, wal, rowsBefore)
            }
            if let gone = children.first(where: { !$0.isRunning }) {
                throw BenchFailure("\(gone.name) exited early: \(gone.outputTail)")
            }
            if now > deadline { throw BenchFailure("not done within \(settings.timeoutSeconds) s (--timeout-seconds)") }
            // Every 20 ms: the probes run on the database being measured, and phases last seconds.
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The rows written to `database` so far (`TableRowsSample`), read once no other session
    /// is connected to it (at most 5 s after the phase's processes stopped): a backend counts its
    /// writes where others can read them when it ends, or when idle, at most once a second.
    private func settledRows(_ database: PGConfiguration) async -> TableRowsSample? {
        let deadline = BenchClock.now + 5_000_000_000
        while BenchClock.now < deadline {
            let others = try? await connect(database) { try $0.countOtherSessions() }
            if others == 0 { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return try? await connect(database) { TableRowsSample.now(on: $0) }
    }

    private func connect<T: Sendable>(_ database: PGConfiguration, _ body: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        return try await pool.withConnection { try body($0) }
    }

    /// A migrated scratch database `reddot_bench_<runID><suffix>` for `body` (with its
    /// connection string and the server's version), dropped afterwards unless `keep`.
    private func withScratch(_ suffix: String, _ body: (PGConfiguration, String, String) async throws -> Void) async throws {
        try await BenchScratch.run(
            runID: settings.runID + suffix, server: settings.server, applicationName: "reddot-bench-backlog",
            migrations: settings.migrations, keep: settings.keep, logger: logger
        ) { database, _, serverVersion in
            try await body(database, database.connectionString, serverVersion)
        }
    }
}

/// Failed deliveries, counted from the producer's thread.
private final class FailureTally: Sendable {
    private let state = Mutex<(count: Int, first: String?)>((0, nil))
    func record(_ error: KafkaError) { state.withLock { $0 = ($0.count + 1, $0.first ?? "\(error)") } }
    var count: Int { state.withLock { $0.count } }
    var first: String? { state.withLock { $0.first } }
}
