import ArgumentParser
import BadgeAPI
import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import RedDotCommandLine
import RedDotDev
import ServiceLifecycle

/// `reddot dev`: everything on embedded defaults, for a newcomer's first five minutes.
struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "Run RedDot on one machine with embedded defaults (development only).",
        discussion: """
            Starts a private PostgreSQL cluster in --data (initdb on the first start, kept between \
            runs; as root, the server runs as the account reddot-dev, and when that account cannot \
            enter the data folder the cluster lives in /var/lib/reddot-dev/<name>-<hash> instead, \
            which the output says), an in-process Kafka broker \
            (librdkafka's mock cluster: memory only, never production) with the topics created, \
            applies the migrations, and runs ingest, rollup, the API with the live view and the \
            webhook sender (reddot webhooks put adds a subscription) in one process, and the push sender \
            when a provider's credentials are given. Auth stays on: a development secret is kept in --data and a ready token is \
            printed, with copy-paste curl, reddot publish and kcat lines. --demo loads a few users \
            with chat, promotion and a broadcast "new feature" dot.

            Ctrl-C stops everything and exits 0; the next start reuses the data (--reset wipes it). \
            Exit codes: 0 stopped; 64 bad arguments; 69 a port is busy or PostgreSQL cannot start.
            """)

    @Option(help: ArgumentHelp("The data folder (PostgreSQL cluster, secret, rules). Default: REDDOT_DEV_DATA, else .reddot-dev.", valueName: "dir"))
    var data: String?

    @Flag(help: "Wipe the data folder first (and its cluster in /var/lib, when it lives there).")
    var reset = false

    @Flag(help: "Load demo users and events (idempotent: their event ids are fixed).")
    var demo = false

    @Option(help: "The API port.")
    var port = 8080

    @Option(help: "The address the API listens on.")
    var host = "127.0.0.1"

    @Option(name: .customLong("pg-port"), help: "The private PostgreSQL's port (127.0.0.1 only).")
    var postgresPort = 55432

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. Default: REDDOT_LOG_LEVEL, else warning.")
    var logLevel: String?

    @OptionGroup var providers: PushProviderOptions

    func validate() throws {
        guard (1...65_535).contains(port) else { throw ValidationError("--port takes 1…65535") }
        guard (1...65_535).contains(postgresPort) else { throw ValidationError("--pg-port takes 1…65535") }
    }

    func run() async throws {
        let logger = try LoggingSetup.logger(label: "reddot.dev", levelText: logLevel, defaultLevel: .warning)
        let folder = URL(fileURLWithPath: data ?? ProcessInfo.processInfo.environment["REDDOT_DEV_DATA"] ?? ".reddot-dev").standardizedFileURL
        let (postgres, startedHere) = try startPostgres(folder: folder)
        defer {
            if startedHere {
                say("stopping PostgreSQL")
                postgres.stop()
            }
        }
        try await DevStack.prepareDatabase(
            postgres, migrations: try MigrationFile.load(from: try MigrateCommand.Options.resolveDirectory(nil)), logger: logger)

        let cluster: KafkaMockCluster
        do {
            cluster = try KafkaMockCluster(logger: logger)
            try cluster.createTopic(DevStack.topic, partitions: 3)
            try cluster.createTopic(DevStack.topic + ".dlq", partitions: 1)
            try cluster.createTopic(DevStack.changesTopic, partitions: 3)
        } catch {
            throw fail("cannot start the in-process Kafka broker: \(error.message)", code: ExitCodes.failure)
        }
        defer { cluster.close() }
        if demo {
            try await DevStack.publishDemo(brokers: cluster.bootstrapServers, logger: logger)
        }
        try await runStack(folder: folder, postgres: postgres, brokers: cluster.bootstrapServers, logger: logger)
        say("stopped")
    }

    /// Finds or makes the private cluster (wiping it first with --reset) and starts it unless it
    /// runs already (see `DevStack.startPostgres`). Returns whether this run started it.
    private func startPostgres(folder: URL) throws -> (DevPostgres, startedHere: Bool) {
        do {
            return try DevStack.startPostgres(
                folder: folder, reset: reset, apiPort: port, apiHost: host, postgresPort: postgresPort, say: say)
        } catch {
            throw fail(error.description, code: error.isUsage ? ExitCodes.usage : ExitCodes.unavailable)
        }
    }

    /// Runs ingest, rollup and the API on `postgres` and `brokers` until Ctrl-C, and prints the
    /// cheat sheet once everything in it works.
    private func runStack(folder: URL, postgres: DevPostgres, brokers: String, logger: Logger) async throws {
        let secret = try DevStack.secret(in: folder)
        let rulesFile = folder.appendingPathComponent("rules.yaml")
        if !FileManager.default.fileExists(atPath: rulesFile.path) {
            try Data(DevStack.demoRules.utf8).write(to: rulesFile)
        }

        setenv("REDDOT_JWT_HS256_SECRET", secret, 1)
        let database = try DatabaseOptions.parse(["--database-url", postgres.url] + (logLevel.map { ["--log-level", $0] } ?? []))
        let kafka = try KafkaOptions.parse(["--brokers", brokers, "--topic", DevStack.topic])
        let ingest = try IngestOptions.parse(["--rules", rulesFile.path, "--batch-wait-ms", "20"])
        let rollup = try RollupOptions.parse(["--changes-topic", DevStack.changesTopic])
        let serve = try ServeOptions.parse(["--host", host, "--port", "\(port)", "--pool-size", "4"])
        let registry = MetricsSetup.bootstrap()
        let ingestConfiguration = try ingest.configuration(kafka: kafka, database: database)
        let aliceToken = try await Authenticator.makeHS256Token(secret: secret, subject: "alice", expiresIn: 30 * 86_400)
        let adminToken = try await Authenticator.makeHS256Token(
            secret: secret, subject: nil, scopes: [Principal.adminScope], expiresIn: 30 * 86_400)
        let cheatSheet = try DevStack.cheatSheet(
            host: host, port: port, postgres: postgres, brokers: brokers, secret: secret, folder: folder, rulesFile: rulesFile,
            aliceToken: aliceToken, adminToken: adminToken)
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Void.self)
        let (application, services) = try await serve.makeServices(
            database: database, registry: registry, logger: logger, kafka: (brokers, DevStack.topic), forceLiveView: true,
            onRunning: { _ in readyContinuation.yield() })
        var senderOptions = try InProcessSenderOptions.parse([])
        senderOptions.providers = providers
        let senders = try await senderOptions.services(
            database: database, feed: (brokers, DevStack.changesTopic), webhooksByDefault: true, logger: logger)
        let allServices: [any Service] =
            [IngestService(configuration: ingestConfiguration, logger: logger)]
            + (try rollup.services(database: database, brokers: brokers, logger: logger))
            + [application] + services + senders
        let loadDemo = demo
        let databaseURL = postgres.url
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await runServices(allServices, logger: logger)
                return true
            }
            group.addTask {
                // The cheat sheet comes once the API listens and, with --demo, once the demo
                // events are applied and rolled up (the consumer group has joined): every line
                // of it works when it shows.
                for await _ in ready { break }
                if loadDemo { await DevStack.waitForDemo(databaseURL: databaseURL, logger: logger) }
                if !Task.isCancelled { FileHandle.standardOutput.write(Data((cheatSheet + "\n").utf8)) }
                return false
            }
            while let servicesEnded = try await group.next() {
                if servicesEnded { group.cancelAll() }
            }
        }
    }

    func say(_ text: String) {
        FileHandle.standardError.write(Data("reddot dev: \(text)\n".utf8))
    }
}
