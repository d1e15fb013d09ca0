import Foundation
import RdKafka

/// What `reddot bench backlog` prints: each phase's time and rate, the ratios the targets name,
/// and what was checked. `--json` prints it in snake-case JSON.
public struct BacklogReport: Sendable, Encodable {
    var build: String
    var date: String
    var processors: Int
    var postgresql: String
    var postgresqlFsync: String
    var postgresqlSynchronousCommit: String
    var postgresqlDurable: Bool
    /// The settings that size PostgreSQL's memory and write-ahead log, as the bench read them.
    var postgresqlSettings: [String: String]
    var librdkafka: String
    var kafka: String
    var partitions: Int
    var events: Int
    var users: Int
    var paths: Int
    /// The executable the ingest and rollup processes ran.
    var reddot: String
    /// What `--rollup-argument` added to the rollup processes' command lines.
    var rollupArguments: [String]
    var publishSeconds: Double
    var dirtyUsers: Int
    var ingestAlone: BacklogBenchmark.Phase?
    var rollupOfBacklog: BacklogBenchmark.Phase?
    var wholePipeline: BacklogBenchmark.Phase?
    var plainConsumer: BacklogBenchmark.Phase?
    var plainConsumerSkipped: String?
    /// Bytes on disk after the whole pipeline, per table; per event retained and per user.
    var tableBytes: [String: Int64]
    var bytesPerEventRetained: Double
    var bytesPerUser: Double
    /// User versions the whole pipeline made: once per user is the least; more means rounds that
    /// came before the user's last writes.
    var pipelineVersions: Int
    /// One retention prune of everything stored: rows deleted or folded, seconds.
    var prunedRows: Int
    var pruneSeconds: Double
    /// Users the prune left dirty (work for the rollup; the pipeline had left none).
    var pruneDirtiedUsers: Int
    /// The users' event ids emptied by starting two dedupe generations, seconds.
    var emptiedKeys: Int
    var generationSeconds: Double
    /// The whole pipeline's rate over ingest alone's (target ≥ 0.5) and over the plain
    /// consumer's (target ≥ 2).
    var wholeOverIngestAlone: Double?
    var wholeOverPlainConsumer: Double?
    /// Whether every check held.
    public var verified: Bool
    /// What was checked, or what failed.
    public var verification: String

    /// The report of `measurement`, a run of `settings` on `kafka` (its name in reports) with
    /// `partitions`.
    public init(settings: BacklogBenchmark.Settings, measurement: BacklogBenchmark.Measurement, kafka: String, partitions: Int32) {
        (build, date, processors) = (BenchMachine.build, BenchMachine.date, BenchMachine.processors)
        postgresql = measurement.serverVersion
        postgresqlFsync = measurement.postgresqlSettings["fsync"] ?? "?"
        postgresqlSynchronousCommit = measurement.postgresqlSettings["synchronous_commit"] ?? "?"
        postgresqlDurable = postgresqlFsync == "on" && postgresqlSynchronousCommit == "on"
        postgresqlSettings = measurement.postgresqlSettings
        librdkafka = RdKafkaVersion.text
        self.kafka = kafka
        self.partitions = Int(partitions)
        (events, users, paths) = (settings.events, settings.users, settings.paths)
        reddot = settings.executable
        rollupArguments = settings.rollupArguments
        publishSeconds = measurement.publishSeconds
        dirtyUsers = measurement.dirtyUsers
        ingestAlone = measurement.ingestAlone
        rollupOfBacklog = measurement.rollupOfBacklog
        wholePipeline = measurement.wholePipeline
        plainConsumer = measurement.plainConsumer
        plainConsumerSkipped = measurement.plainConsumerSkipped
        tableBytes = measurement.tableBytes
        let retained = BacklogBenchmark.retainedTables.reduce(Int64(0)) { $0 + (measurement.tableBytes[$1] ?? 0) }
        let perUser = BacklogBenchmark.userTables.reduce(Int64(0)) { $0 + (measurement.tableBytes[$1] ?? 0) }
        bytesPerEventRetained = Double(retained) / Double(max(settings.events, 1))
        bytesPerUser = Double(perUser) / Double(max(measurement.dirtyUsers, 1))
        (prunedRows, pruneSeconds, pruneDirtiedUsers) = (measurement.prunedRows, measurement.pruneSeconds, measurement.pruneDirtiedUsers)
        (emptiedKeys, generationSeconds) = (measurement.emptiedKeys, measurement.generationSeconds)
        pipelineVersions = measurement.pipelineVersions
        if let whole = wholePipeline?.rate {
            wholeOverIngestAlone = ingestAlone.map { whole / $0.rate }
            wholeOverPlainConsumer = plainConsumer.map { whole / $0.rate }
        }
        let problems = [wholePipeline, plainConsumer].compactMap { $0 }.flatMap { phase in phase.problems.map { "\(phase.name): \($0)" } }
        verified = problems.isEmpty
        verification =
            problems.isEmpty
            ? "the whole pipeline's leaves sum to \(settings.events) and reddot verify found 0 mismatches"
                + (plainConsumer == nil ? "" : "; the plain consumer's roots sum to \(settings.events)")
            : problems.joined(separator: "; ")
    }

    /// The report as text.
    public var text: String {
        let number = BenchReport.number
        let durability =
            postgresqlDurable
            ? "durable: fsync on, synchronous_commit on"
            : "RELAXED: fsync \(postgresqlFsync), synchronous_commit \(postgresqlSynchronousCommit)"
        func line(_ label: String, _ phase: BacklogBenchmark.Phase?, unit: String = "events/s") -> String {
            guard let phase else { return "\(label)(not run)" }
            let fromCommit = phase.secondsFromFirstCommit.map { String(format: "; %.2f s from its first commit", $0) } ?? ""
            return "\(label)\(String(format: "%.2f", phase.seconds)) s\(fromCommit): \(number(phase.rate)) \(unit)"
        }
        // Core-seconds per 1,000 events (per 1,000 users for the rollup of the backlog).
        // The plain consumer's backend exits with it, before its CPU can be read reliably: its
        // line gives the process only.
        func cpu(_ label: String, _ phase: BacklogBenchmark.Phase?, per count: Int, unit: String = "events", database: Bool = true) -> String? {
            guard let cpu = phase?.cpu, count > 0 else { return nil }
            let thousands = Double(count) / 1_000
            let parts = cpu.processes.sorted { $0.key < $1.key }.map { String(format: "%@ %.3f", $0.key, $0.value / thousands) }
                + (database ? [String(format: "PostgreSQL %.3f", cpu.database / thousands)] : [])
            let busy = cpu.machineTotal > 0 ? cpu.machineBusy / cpu.machineTotal * 100 : 0
            return "\(label)\(parts.joined(separator: ", ")) core-s per 1,000 \(unit)\(database ? "" : " (its PostgreSQL backend not read)"); "
                + "machine \(String(format: "%.0f", busy))% busy"
        }
        let cpuLines = [
            cpu("cpu:        ingest alone: ", ingestAlone, per: events),
            cpu("            rollup of the backlog: ", rollupOfBacklog, per: dirtyUsers, unit: "users"),
            cpu("            pipeline: ", wholePipeline, per: events),
            cpu("            peer: ", plainConsumer, per: events, database: false),
        ].compactMap { $0 }
        // One line per phase that has `text`: per event (per user for the rollup of the
        // backlog), the first one headed by `heading`.
        func perPhase(_ heading: String, _ text: (BacklogBenchmark.Phase, Int, String) -> String?) -> [String] {
            let phases = [
                ("ingest alone: ", ingestAlone, events, "event"), ("rollup of the backlog: ", rollupOfBacklog, dirtyUsers, "user"),
                ("pipeline: ", wholePipeline, events, "event"), ("peer: ", plainConsumer, events, "event"),
            ]
            var lines: [String] = []
            for (label, phase, count, unit) in phases {
                guard let phase, count > 0, let line = text(phase, count, unit) else { continue }
                lines.append((lines.isEmpty ? heading : String(repeating: " ", count: heading.count)) + label + line)
            }
            return lines
        }
        // The server's WAL, and the checkpoints that came meanwhile.
        let walLines = perPhase("wal:        ") { phase, count, unit in phase.wal?.text(per: count, unit: unit) }
        let forced = [ingestAlone, rollupOfBacklog, wholePipeline, plainConsumer].compactMap { $0?.wal?.checkpointsRequested }.reduce(0, +)
        let walNote =
            walLines.isEmpty
            ? "wal:        not read (the server has no pg_stat_wal before PostgreSQL 14, or this role may not read it)"
            : "            (the whole server's WAL; \(PhaseWAL.sizing(postgresqlSettings)))"
                + (forced > 0 ? "\n            " + PhaseWAL.forcedAdvice(forced) : "")
        // The rows each phase wrote.
        let rowLines = perPhase("rows:       ") { phase, count, unit in phase.rows?.text(per: count, unit: unit) }
        func ratio(_ value: Double?, target: Double) -> String {
            guard let value else { return "n/a" }
            return String(format: "%.2f× (target ≥ %.1f×: %@)", value, target, value >= target ? "met" : "NOT met")
        }
        return """
            reddot bench backlog: \(build) build, \(date), \(processors) CPUs, PostgreSQL \(postgresql) (\(durability)), librdkafka \(librdkafka)
            backlog:    \(number(Double(events))) incr by 1 over \(number(Double(users))) users × \(paths) paths (root.bench.p0…), in Kafka before anything starts (\(kafka), \(partitions) partitions; published in \(String(format: "%.1f", publishSeconds)) s)
            processes:  \(reddot) ingest / rollup, with their defaults\(rollupArguments.isEmpty ? "" : "; rollup also with " + rollupArguments.joined(separator: " "))
            \(line("ingest:     reddot ingest alone, until its offsets cover the backlog: ", ingestAlone))
            \(line("rollup:     reddot rollup over the \(number(Double(dirtyUsers))) users ingest alone left dirty: ", rollupOfBacklog, unit: "users/s"))
            \(line("pipeline:   reddot ingest + reddot rollup started together, until every parent is current: ", wholePipeline))
            \(plainConsumerSkipped.map { "peer:       plain consumer not run: \($0)" } ?? line("peer:       plain at-least-once consumer (deploy/bench/plain_consumer.py), node and ancestors per incr: ", plainConsumer))
            ratios:     pipeline / ingest alone \(ratio(wholeOverIngestAlone, target: 0.5)); pipeline / plain consumer \(ratio(wholeOverPlainConsumer, target: 2))
            \(cpuLines.joined(separator: "\n"))
            \((walLines + [walNote]).joined(separator: "\n"))
            \((rowLines.isEmpty ? ["rows:       not read (pg_stat_user_tables)"] : rowLines).joined(separator: "\n"))
            versions:   the pipeline made \(number(Double(pipelineVersions))) user versions, \(String(format: "%.2f", Double(pipelineVersions) / Double(max(dirtyUsers, 1)))) per user written (1.00 at best: every user brought current once)
            storage:    after the pipeline: \(String(format: "%.0f", bytesPerEventRetained)) bytes on disk per event retained (\(BacklogBenchmark.retainedTables.joined(separator: ", "))), \(String(format: "%.0f", bytesPerUser)) per user (\(BacklogBenchmark.userTables.joined(separator: ", "))); one retention prune of all of it: the users' \(number(Double(emptiedKeys))) event ids in two dedupe generations emptied in \(String(format: "%.2f", generationSeconds)) s, and \(number(Double(prunedRows))) other rows deleted or folded in \(String(format: "%.2f", pruneSeconds)) s, leaving \(number(Double(pruneDirtiedUsers))) users dirty for the rollup
            timing:     each from its processes' start (process start and the consumer group's join included) to done
            verified:   \(verified ? "yes, " : "NO: ")\(verification)
            """
    }
}
