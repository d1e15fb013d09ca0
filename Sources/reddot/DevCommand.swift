import ArgumentParser
import BadgeAPI
import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
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
            applies the migrations, and runs ingest, rollup and the API with the live view in one \
            process. Auth stays on: a development secret is kept in --data and a ready token is \
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

    func validate() throws {
        guard (1...65_535).contains(port) else { throw ValidationError("--port takes 1…65535") }
        guard (1...65_535).contains(postgresPort) else { throw ValidationError("--pg-port takes 1…65535") }
    }

    static let topic = "reddot.events"

    /// What `reddot dev` itself puts in its data folder: all `--reset` may wipe.
    static let dataFolderEntries: Set<String> = ["env", "dev-secret", "rules.yaml", "postgres", "postgres.log"]

    /// Why `--reset` must not wipe `folder` (the file system root, the home or current folder,
    /// or a folder holding anything `reddot dev` did not put there), or nil.
    static func wipeProblem(_ folder: URL) -> String? {
        let path = folder.standardizedFileURL.path
        let guarded = ["/", FileManager.default.homeDirectoryForCurrentUser.standardizedFileURL.path, FileManager.default.currentDirectoryPath]
        if guarded.contains(path) { return "--reset would wipe \(path); give --data a folder of its own" }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        let foreign = entries.filter { !dataFolderEntries.contains($0) }
        guard foreign.isEmpty else {
            return "--reset wipes only a folder reddot dev made, and \(path) also holds \(foreign.sorted().prefix(3).joined(separator: ", ")); remove it yourself or choose another --data"
        }
        return nil
    }

    func run() async throws {
        let logger = try LoggingSetup.logger(label: "reddot.dev", levelText: logLevel, defaultLevel: .warning)
        let folder = URL(fileURLWithPath: data ?? ProcessInfo.processInfo.environment["REDDOT_DEV_DATA"] ?? ".reddot-dev").standardizedFileURL
        guard let binaries = DevPostgres.findBinaries() else {
            throw fail(
                "the PostgreSQL server binaries (initdb, pg_ctl) were not found in /usr/lib/postgresql/*/bin; install postgresql (deploy/dev.sh does) or set REDDOT_PG_BIN",
                code: ExitCodes.unavailable)
        }
        let account = geteuid() == 0 ? (ProcessInfo.processInfo.environment["REDDOT_DEV_PG_USER"] ?? "reddot-dev") : nil
        if let account, account.isEmpty || account.contains("/") || account.hasPrefix(".") || getpwnam(account) == nil {
            throw fail(
                "PostgreSQL refuses to run as root, and REDDOT_DEV_PG_USER names no account ('\(account.prefix(40))'): run deploy/dev.sh (it creates reddot-dev), or: useradd --system --home-dir /var/lib/\(account.prefix(40)) \(account.prefix(40))",
                code: ExitCodes.usage)
        }

        if portIsBusy(port, host: host) {
            throw fail("port \(port) is busy (another RedDot or server?); choose another with --port", code: ExitCodes.unavailable)
        }
        if reset {
            if let problem = Self.wipeProblem(folder) { throw fail(problem, code: ExitCodes.usage) }
            var wiped = [folder]
            let placement = DevPostgres.placement(dataFolder: folder, account: account)
            let old = DevPostgres(clusterFolder: placement.clusterFolder, port: postgresPort, binDirectory: binaries, runAs: account)
            if (try? old.isRunning()) == true { old.stop() }
            try? FileManager.default.removeItem(at: folder)
            if let account {
                let outside = DevPostgres.outsideFolder(for: folder, account: account)
                if FileManager.default.fileExists(atPath: outside.path) {
                    try? FileManager.default.removeItem(at: outside)
                    wiped.append(outside)
                }
            }
            say("wiped \(wiped.map(\.path).joined(separator: " and "))")
        }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let placement = DevPostgres.placement(dataFolder: folder, account: account)
        let postgres = DevPostgres(clusterFolder: placement.clusterFolder, port: postgresPort, binDirectory: binaries, runAs: account)
        if let reason = placement.reason {
            say("the PostgreSQL cluster lives in \(placement.clusterFolder.path) (kept between runs, --reset wipes it), not in \(folder.path): \(reason)")
        }

        var startedHere = false
        do {
            if !postgres.isInitialized { say("creating a PostgreSQL cluster in \(postgres.dataDirectory.path) (first start)") }
            try postgres.initializeIfNeeded()
            if try postgres.isRunning() {
                say("PostgreSQL is already running on this data folder; reusing it")
            } else {
                if portIsBusy(postgresPort) {
                    throw fail("port \(postgresPort) is busy (another PostgreSQL?); choose another with --pg-port", code: ExitCodes.unavailable)
                }
                try postgres.start()
                startedHere = true
            }
        } catch let error as DevError {
            throw fail(error.description, code: ExitCodes.unavailable)
        }
        defer {
            if startedHere {
                say("stopping PostgreSQL")
                postgres.stop()
            }
        }
        try await Self.prepareDatabase(postgres, logger: logger)

        let secret = try Self.secret(in: folder)
        let rulesFile = folder.appendingPathComponent("rules.yaml")
        if !FileManager.default.fileExists(atPath: rulesFile.path) {
            try Data(Self.demoRules.utf8).write(to: rulesFile)
        }

        let cluster: KafkaMockCluster
        do {
            cluster = try KafkaMockCluster(logger: logger)
            try cluster.createTopic(Self.topic, partitions: 3)
            try cluster.createTopic(Self.topic + ".dlq", partitions: 1)
        } catch {
            throw fail("cannot start the in-process Kafka broker: \(error.message)", code: ExitCodes.failure)
        }
        defer { cluster.close() }
        let brokers = cluster.bootstrapServers

        if demo {
            try await Self.publishDemo(brokers: brokers, logger: logger)
        }

        setenv("REDDOT_JWT_HS256_SECRET", secret, 1)
        let database = try DatabaseOptions.parse(["--database-url", postgres.url] + (logLevel.map { ["--log-level", $0] } ?? []))
        let kafka = try KafkaOptions.parse(["--brokers", brokers, "--topic", Self.topic])
        let ingest = try IngestOptions.parse(["--rules", rulesFile.path, "--batch-wait-ms", "20"])
        let rollup = try RollupOptions.parse([])
        let serve = try ServeOptions.parse(["--host", host, "--port", "\(port)", "--pool-size", "4"])
        let registry = MetricsSetup.bootstrap()
        let ingestConfiguration = try ingest.configuration(kafka: kafka, database: database)
        let cheatSheet = try await Self.cheatSheet(
            host: host, port: port, postgres: postgres, brokers: brokers, secret: secret, folder: folder, rulesFile: rulesFile)
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Void.self)
        let (application, services) = try await serve.makeServices(
            database: database, registry: registry, logger: logger, kafka: (brokers, Self.topic), forceLiveView: true,
            onRunning: { _ in readyContinuation.yield() })
        let allServices: [any Service] =
            [IngestService(configuration: ingestConfiguration, logger: logger), rollup.service(database: database, logger: logger)]
            + [application] + services
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
                if loadDemo { await Self.waitForDemo(databaseURL: databaseURL, logger: logger) }
                if !Task.isCancelled { FileHandle.standardOutput.write(Data((cheatSheet + "\n").utf8)) }
                return false
            }
            while let servicesEnded = try await group.next() {
                if servicesEnded { group.cancelAll() }
            }
        }
        say("stopped")
    }

    func say(_ text: String) {
        FileHandle.standardError.write(Data("reddot dev: \(text)\n".utf8))
    }

    /// Creates the database (first start) and applies the migrations.
    static func prepareDatabase(_ postgres: DevPostgres, logger: Logger) async throws {
        let admin = PGPool(configuration: PGConfiguration(connectionString: postgres.adminURL), maximumConnections: 1, logger: logger)
        defer { admin.close() }
        try await admin.withConnection { connection in
            try Migrator.createDatabaseIfMissing(named: DevPostgres.database, on: connection)
        }
        let files = try MigrationFile.load(from: try MigrateCommand.Options.resolveDirectory(nil))
        let pool = PGPool(configuration: PGConfiguration(connectionString: postgres.url), maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let applied = try await pool.withConnection { connection in try Migrator(files: files, logger: logger).up(on: connection) }
        for file in applied {
            FileHandle.standardError.write(Data("reddot dev: applied \(file.fileName)\n".utf8))
        }
    }

    /// The development HS256 secret, made on the first start and kept in the data folder.
    static func secret(in folder: URL) throws -> String {
        let file = folder.appendingPathComponent("dev-secret")
        if let text = try? String(contentsOf: file, encoding: .utf8), text.utf8.count >= 32 {
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var bytes = [UInt8](repeating: 0, count: 32)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        let secret = bytes.map { String(format: "%02x", $0) }.joined()
        try Data(secret.utf8).write(to: file)
        chmod(file.path, 0o600)
        return secret
    }

    static let demoRules = """
        # Demo rules of reddot dev (edit and restart to change them).
        rules:
          - type: chat.message
            op: incr
            path: root.chat.{conversation}
          - type: chat.read
            op: clear
            path: root.chat.{conversation}
          - type: promotion.item
            op: set
            path: root.promotion.{item}
          - type: feature.launched
            op: set
            icon: new
            path: root.settings.{feature}
        """

    /// A few users with chat and promotion badges, and a broadcast "new feature" dot.
    static let demoEvents: [(key: String, json: String)] = [
        ("alice", #"{"id":"demo-1","type":"chat.message","users":["alice","bob"],"attrs":{"conversation":"c1"}}"#),
        ("alice", #"{"id":"demo-2","type":"chat.message","users":["alice"],"attrs":{"conversation":"c1"}}"#),
        ("alice", #"{"id":"demo-3","type":"chat.message","users":["alice"],"attrs":{"conversation":"c2"}}"#),
        ("alice", #"{"id":"demo-4","type":"promotion.item","users":["alice","carol"],"attrs":{"item":"spring_sale"}}"#),
        ("bob", #"{"id":"demo-5","op":"set","user":"bob","path":"root.promotion.bundle","count":2}"#),
        ("carol", #"{"id":"demo-6","op":"incr","user":"carol","path":"root.chat.c9","by":120}"#),
        ("*", #"{"id":"demo-7","type":"feature.launched","audience":"all","attrs":{"feature":"dark_mode"}}"#),
    ]

    /// Waits (up to a minute) until the last demo event is applied and no user waits for a rollup.
    static func waitForDemo(databaseURL: String, logger: Logger) async {
        let pool = PGPool(configuration: PGConfiguration(connectionString: databaseURL), maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let lastID = demoEvents.last.map { Self.eventID(of: $0.json) } ?? ""
        let deadline = ContinuousClock.now + .seconds(60)
        while !Task.isCancelled, ContinuousClock.now < deadline {
            let done = try? await pool.withConnection { connection in
                try IngestTransaction.appliedAmong([lastID], on: connection).contains(lastID)
                    && BadgeStore.queueDepth(on: connection) == 0
            }
            if done == true { return }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    static func eventID(of json: String) -> String {
        guard let range = json.range(of: #""id":""#), let end = json[range.upperBound...].firstIndex(of: "\"") else { return "" }
        return String(json[range.upperBound..<end])
    }

    static func publishDemo(brokers: String, logger: Logger) async throws {
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers), logger: logger)
        defer { producer.close() }
        for event in demoEvents {
            _ = try await producer.send(KafkaOutgoingRecord(topic: topic, key: Array(event.key.utf8), payload: Array(event.json.utf8)))
        }
    }

    static func cheatSheet(
        host: String, port: Int, postgres: DevPostgres, brokers: String, secret: String, folder: URL, rulesFile: URL
    ) async throws -> String {
        let aliceToken = try await Authenticator.makeHS256Token(secret: secret, subject: "alice", expiresIn: 30 * 86_400)
        let adminToken = try await Authenticator.makeHS256Token(
            secret: secret, subject: nil, scopes: [Principal.adminScope], expiresIn: 30 * 86_400)
        let base = "http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)"
        // For `source .reddot-dev/env`: the tour's variables, and reddot on PATH.
        let executableFolder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
        let environment = """
            export REDDOT_API=\(base)
            export TOKEN=\(aliceToken)
            export ADMIN=\(adminToken)
            export BROKERS=\(brokers)
            export REDDOT_JWT_HS256_SECRET=\(secret)
            export PATH="\(executableFolder):$PATH"

            """
        let environmentFile = folder.appendingPathComponent("env")
        try Data(environment.utf8).write(to: environmentFile)
        chmod(environmentFile.path, 0o600)
        return """

            RedDot dev is running (Ctrl-C stops it; data stays in \(folder.path), --reset wipes it).

              API          \(base)   (OpenAPI: \(base)/openapi.yaml)
              live view    \(base)/?user=alice&token=\(aliceToken)
              PostgreSQL   \(postgres.url)
              Kafka        \(brokers)   (in-process mock broker, memory only; topics \(topic), \(topic).dlq)
              rules        \(rulesFile.path)

            Tokens (HS256, 30 days; REDDOT_JWT_HS256_SECRET=\(secret)):
              export TOKEN=\(aliceToken)
              export ADMIN=\(adminToken)
            (source \(environmentFile.path) sets TOKEN, ADMIN, BROKERS, REDDOT_API and puts reddot on PATH.)

            Try:
              curl -s -H "Authorization: Bearer $TOKEN" \(base)/v1/users/alice/badges
              reddot publish --brokers \(brokers) --user alice --op incr --path root.chat.c7
              echo '{"id":"kcat-1","op":"incr","user":"alice","path":"root.chat.c7","by":2}' | kcat -P -b \(brokers) -t \(topic) -k alice
              curl -s -H "Authorization: Bearer $ADMIN" -d '{"id":"http-1","type":"chat.message","users":["alice"],"attrs":{"conversation":"c3"}}' \(base)/v1/events
              curl -s -H "Authorization: Bearer $TOKEN" -d '{"path":"root.chat","force":true}' \(base)/v1/users/alice/badges/clear
              curl -sN -H "Authorization: Bearer $TOKEN" \(base)/v1/users/alice/badges/stream

            """
    }
}
