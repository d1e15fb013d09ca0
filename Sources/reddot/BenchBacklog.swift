import ArgumentParser
import BadgeBench
import Foundation
import LibPQ
import Logging
import RedDotCommandLine

extension BenchCommand {
    /// `reddot bench backlog`.
    struct Backlog: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "backlog",
            abstract: "Measure a Kafka backlog brought current: ingest alone, the rollup, both as separate processes, and a plain Python consumer.",
            discussion: BenchScratch.discussion + BacklogBenchmark.discussion)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var kafka: KafkaOptions

        @Option(help: "Events in the backlog.")
        var events: Int = 300_000

        @Option(help: "Users the events spread over.")
        var users: Int = 100_000

        @Option(help: "Paths per user (root.bench.p0…).")
        var paths: Int = 30

        @Option(help: "Partitions of the mock cluster's topic (ignored with --brokers).")
        var partitions: Int32 = 32

        @Option(help: "The seed of the events' users and paths.")
        var seed: UInt64 = 42

        @Option(name: .customLong("peer-script"), help: "The plain consumer. Default: deploy/bench/plain_consumer.py under the working directory, else the source tree's.")
        var peerScript: String?

        @Flag(name: .customLong("no-peer"), help: "Leave the plain consumer out.")
        var noPeer = false

        @Option(help: "The Python that runs the plain consumer (it needs confluent_kafka and psycopg). Default: /usr/bin/python3 if present, else python3.")
        var python: String?

        @Option(help: "The reddot executable the ingest and rollup processes run (to compare builds in one run). Default: this one.")
        var reddot: String?

        @Option(
            name: .customLong("rollup-argument"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp(
                "One more argument for every reddot rollup process the bench starts (repeatable, in order), to measure a "
                    + "rollup flag: --rollup-argument --rollup-backlog-settle-seconds --rollup-argument 30.",
                valueName: "argument"))
        var rollupArguments: [String] = []

        @Option(name: .customLong("timeout-seconds"), help: "How long each phase may take.")
        var timeoutSeconds: Int = 900

        @OptionGroup var scratchSettings: BenchScratchOptions

        func validate() throws {
            if let problem = BacklogBenchmark.problem(
                events: events, users: users, paths: paths, partitions: partitions, timeoutSeconds: timeoutSeconds)
            {
                throw ValidationError(problem)
            }
        }

        func run() async throws {
            let logger = try LoggingSetup.logger(label: "reddot.bench", levelText: database.logLevel, defaultLevel: .warning)
            let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let files = try scratchSettings.migrations()
            let kafka = try BenchCommand.kafka(self.kafka, partitions: partitions, runID: runID, logger: logger)
            defer { kafka.close() }
            let executable = reddot ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
            var settings = BacklogBenchmark.Settings(
                events: events, users: users, paths: paths, seed: seed, runID: runID, kafka: kafka.configuration,
                brokers: kafka.configuration["bootstrap.servers"] ?? self.kafka.brokers, topic: kafka.topic,
                server: database.configuration(), migrations: files, executable: executable,
                peerScript: noPeer ? nil : peerScriptPath(executable: URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path),
                python: python ?? (FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"),
                timeoutSeconds: timeoutSeconds, keep: scratchSettings.keep)
            if noPeer { settings.peerLeftOut = "left out (--no-peer)" }
            settings.rollupArguments = rollupArguments
            let measurement: BacklogBenchmark.Measurement
            do {
                measurement = try await BacklogBenchmark(settings: settings, logger: logger).run()
            } catch let error as BenchScratch.CreateError {
                throw fail(error.description, code: error.underlying.exitCode)
            } catch let error as PGError {
                throw fail("database error: \(error)", code: error.exitCode)
            } catch {
                throw fail("\(error)", code: ExitCodes.failure)
            }
            let report = BacklogReport(settings: settings, measurement: measurement, kafka: kafka.reportName, partitions: partitions)
            try scratchSettings.print(report, text: report.text)
            if !report.verified {
                throw fail("the backlog did not verify: \(report.verification)", code: ExitCodes.failure)
            }
        }

        /// `--peer-script`, else `deploy/bench/plain_consumer.py` under the working directory or
        /// the source tree of a development build; nil when none exists.
        private func peerScriptPath(executable: String) -> String? {
            if let peerScript { return peerScript }
            let relative = "deploy/bench/plain_consumer.py"
            let folder = URL(fileURLWithPath: executable).deletingLastPathComponent()
            let candidates = [
                URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(relative),
                folder.appendingPathComponent("../../../" + relative).standardized,
                folder.appendingPathComponent("../../../../" + relative).standardized,
            ]
            return candidates.first { FileManager.default.fileExists(atPath: $0.path) }?.path
        }
    }
}
