import Foundation
import LibPQ
import Logging
import RdKafka
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A pipeline for tests that run `reddot ingest`, `rollup` and `dlq` as child processes: a
/// migrated throwaway database, librdkafka's mock cluster in this process (a unique topic and its
/// `.dlq`), a rules file, and a producer.
final class PipelineHarness: Sendable {
    let database: TestDatabase
    let cluster: KafkaMockCluster
    let producer: KafkaProducer
    let topic: String
    let folder: URL
    let logger: Logger
    /// One connection for the test's own queries (not one per query: the machine may be busy).
    let pool: PGPool

    /// The rules of the tests: `chat.message` only (so `promo.flash` is an unknown type until
    /// `rulesWithPromotions` is used).
    static let chatRules = """
        rules:
          - type: chat.message
            op: incr
            path: root.chat.{conversation}
        """
    static let rulesWithPromotions = chatRules + """

          - type: promo.flash
            op: set
            path: root.promotion.{item}
        """

    init(partitions: Int32 = 2) async throws {
        var logger = Logger(label: "reddot.test.pipeline")
        logger.logLevel = .critical
        self.logger = logger
        let topic = "reddot.events.t\(UInt32.random(in: 0...UInt32.max))"
        self.topic = topic
        cluster = try await mockCluster(topics: [(topic, partitions), (topic + ".dlq", 1)], logger: logger)
        producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-pipeline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(Self.chatRules.utf8).write(to: folder.appendingPathComponent("rules.yaml"))
        try Data(Self.rulesWithPromotions.utf8).write(to: folder.appendingPathComponent("rules-fixed.yaml"))
        database = try await TestDatabase.create(prefix: "pipe")
        pool = PGPool(configuration: database.configuration, maximumConnections: 1, logger: logger)
        let migrated = try await CLITests().reddot(
            ["migrate", "up", "--database-url", database.url, "--migrations", Repository.migrationsDirectory.path])
        try #require(migrated.exitCode == 0, "\(migrated)")
    }

    var rulesFile: URL { folder.appendingPathComponent("rules.yaml") }
    var fixedRulesFile: URL { folder.appendingPathComponent("rules-fixed.yaml") }

    func tearDown() async {
        pool.close()
        let (producer, cluster) = (producer, cluster)
        _ = try? await onThread {
            producer.close()
            cluster.close()
        }
        await database.drop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// `reddot ingest` against this pipeline (metrics on `metricsPort` when given; with
    /// `batchWhenIdle` false, each batch waits `batchWaitMilliseconds` to fill).
    func ingestArguments(
        group: String, rules: URL? = nil, metricsPort: Int? = nil, batchWaitMilliseconds: Int = 20, batchWhenIdle: Bool = true
    ) -> [String] {
        [
            "ingest", "--brokers", cluster.bootstrapServers, "--topic", topic, "--group", group,
            "--database-url", database.url, "--rules", (rules ?? rulesFile).path, "--batch-wait-ms", "\(batchWaitMilliseconds)",
            "--log-level", "error", "-X", "statistics.interval.ms=200",
        ] + (batchWhenIdle ? [] : ["--no-batch-when-idle"]) + (metricsPort.map { ["--metrics-port", "\($0)"] } ?? [])
    }

    /// Sends `records` (key, payload) and waits for the broker's acknowledgements.
    func publish(_ records: [(key: String, payload: String)]) async throws {
        let outgoing = records.map { KafkaOutgoingRecord(topic: topic, key: Array($0.key.utf8), payload: Array($0.payload.utf8)) }
        for result in await producer.sendAll(outgoing) { _ = try result.get() }
    }

    /// The first column of the first row of `sql`, as an integer.
    func count(_ sql: String) async throws -> Int {
        try await pool.withConnection { connection in
            Int(try connection.query(PGStatement("test.count", sql, prepared: false)).singleRow().decode(0, as: Int64.self))
        }
    }

    /// Waits (up to `seconds`) until `sql` counts `expected`; returns the last count.
    @discardableResult
    func waitForCount(_ sql: String, _ expected: Int, seconds: Int = 30) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var last = -1
        while ContinuousClock.now < deadline {
            last = try await count(sql)
            if last == expected { return last }
            try await Task.sleep(for: .milliseconds(100))
        }
        return last
    }
}

/// A `reddot` child process (or `executable`, such as a script that runs it), its standard error
/// kept in a file of `folder`.
final class ReddotChild: @unchecked Sendable {
    let process = Process()
    let errors: URL

    init(
        _ arguments: [String], in folder: URL, name: String,
        executable: URL? = nil, environment: [String: String]? = nil, directory: URL? = nil
    ) throws {
        errors = folder.appendingPathComponent("\(name).err")
        process.executableURL = try executable ?? CLITests.binary.get()
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = directory }
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: errors)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var standardError: String { (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }

    /// Sends `signal` and waits (up to `seconds`) for the exit; returns the status, nil if it did not exit.
    func stop(_ signal: Int32 = SIGTERM, seconds: Int = 30) async throws -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            return nil
        }
        return process.terminationStatus
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// A Prometheus text page: `name{labels} value` lines.
struct PrometheusPage {
    var samples: [(series: String, value: Double)]

    init(_ text: String) {
        samples = text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                return nil
            }
            return (String(line[..<space]), value)
        }
    }

    /// The value of the series named exactly `series` (for example `a_total{reason="x"}`).
    func value(_ series: String) -> Double? { samples.first { $0.series == series }?.value }

    /// The samples of metric `name` whose labels contain every `label="value"` in `matching`.
    func values(_ name: String, matching: [String] = []) -> [Double] {
        samples.filter { sample in
            (sample.series == name || sample.series.hasPrefix(name + "{")) && matching.allSatisfy { sample.series.contains($0) }
        }.map(\.value)
    }

    /// Fetches `/metrics` on 127.0.0.1:`port`.
    static func scrape(port: Int) async throws -> PrometheusPage {
        let (status, body) = try await ServeCLITests.get(port: port, "/metrics", token: nil)
        guard status == 200 else { throw TestSetupError("/metrics on \(port) answered \(status)") }
        return PrometheusPage(body)
    }

    /// Scrapes every 100 ms until `condition` holds (up to `seconds`); returns the last page.
    static func waitFor(
        port: Int, seconds: Int = 30, _ condition: (PrometheusPage) -> Bool
    ) async throws -> (page: PrometheusPage, held: Bool) {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var page = PrometheusPage("")
        while ContinuousClock.now < deadline {
            if let scraped = try? await scrape(port: port) {
                page = scraped
                if condition(page) { return (page, true) }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return (page, false)
    }

    var text: String { samples.map { "\($0.series) \($0.value)" }.joined(separator: "\n") }
}
