public import BadgeStore
public import Foundation
import LibPQ
public import Logging
import RdKafka

/// The pieces of `reddot dev` that are not command-line parsing: its data folder, the database
/// set-up, the development secret, the demo rules and events, and the cheat sheet it prints.
public enum DevStack {
    public static let topic = "reddot.events"
    /// The change feed's topic.
    public static let changesTopic = "reddot.changes"

    /// What `reddot dev` itself puts in its data folder: all `--reset` may wipe.
    public static let dataFolderEntries: Set<String> = ["env", "dev-secret", "rules.yaml", "postgres", "postgres.log"]

    /// Why `--reset` must not wipe `folder` (the file system root, the home or current folder,
    /// or a folder holding anything `reddot dev` did not put there), or nil.
    public static func wipeProblem(_ folder: URL) -> String? {
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

    /// Creates the database (first start) and applies the migrations.
    public static func prepareDatabase(_ postgres: DevPostgres, migrations files: [MigrationFile], logger: Logger) async throws {
        let admin = PGPool(configuration: PGConfiguration(connectionString: postgres.adminURL), maximumConnections: 1, logger: logger)
        defer { admin.close() }
        try await admin.withConnection { connection in
            try Migrator.createDatabaseIfMissing(named: DevPostgres.database, on: connection)
        }
        let pool = PGPool(configuration: PGConfiguration(connectionString: postgres.url), maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let applied = try await pool.withConnection { connection in try Migrator(files: files, logger: logger).up(on: connection) }
        for file in applied {
            FileHandle.standardError.write(Data("reddot dev: applied \(file.fileName)\n".utf8))
        }
    }

    /// The development HS256 secret, made on the first start and kept in the data folder.
    public static func secret(in folder: URL) throws -> String {
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

    public static let demoRules = """
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
    public static let demoEvents: [(key: String, json: String)] = [
        ("alice", #"{"id":"demo-1","type":"chat.message","users":["alice","bob"],"attrs":{"conversation":"c1"}}"#),
        ("alice", #"{"id":"demo-2","type":"chat.message","users":["alice"],"attrs":{"conversation":"c1"}}"#),
        ("alice", #"{"id":"demo-3","type":"chat.message","users":["alice"],"attrs":{"conversation":"c2"}}"#),
        ("alice", #"{"id":"demo-4","type":"promotion.item","users":["alice","carol"],"attrs":{"item":"spring_sale"}}"#),
        ("bob", #"{"id":"demo-5","op":"set","user":"bob","path":"root.promotion.bundle","count":2}"#),
        ("carol", #"{"id":"demo-6","op":"incr","user":"carol","path":"root.chat.c9","by":120}"#),
        ("*", #"{"id":"demo-7","type":"feature.launched","audience":"all","attrs":{"feature":"dark_mode"}}"#),
    ]

    /// Waits (up to a minute) until the last demo event is applied and no user waits for a rollup.
    public static func waitForDemo(databaseURL: String, logger: Logger) async {
        let pool = PGPool(configuration: PGConfiguration(connectionString: databaseURL), maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let lastID = demoEvents.last.map { Self.eventID(of: $0.json) } ?? ""
        let deadline = ContinuousClock.now + .seconds(60)
        while !Task.isCancelled, ContinuousClock.now < deadline {
            let done = try? await pool.withConnection { connection in
                // The last demo event is a broadcast: its key is its id alone.
                try !IngestTransaction.appliedAmong([AppliedKey(user: "", eventID: lastID)], on: connection).isEmpty
                    && BadgeStore.queueDepth(on: connection) == 0
            }
            if done == true { return }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    public static func eventID(of json: String) -> String {
        guard let range = json.range(of: #""id":""#), let end = json[range.upperBound...].firstIndex(of: "\"") else { return "" }
        return String(json[range.upperBound..<end])
    }

    public static func publishDemo(brokers: String, logger: Logger) async throws {
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers), logger: logger)
        try await producer.closing {
            for event in demoEvents {
                _ = try await producer.send(KafkaOutgoingRecord(topic: topic, key: Array(event.key.utf8), payload: Array(event.json.utf8)))
            }
        }
    }

    public static func cheatSheet(
        host: String, port: Int, postgres: DevPostgres, brokers: String, secret: String, folder: URL, rulesFile: URL,
        aliceToken: String, adminToken: String
    ) throws -> String {
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
              Kafka        \(brokers)   (in-process mock broker, memory only; topics \(topic), \(topic).dlq, \(changesTopic))
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
              reddot watch --url \(base) --token $TOKEN --user alice    # the tree live in this terminal (RedDotClient)
              kcat -C -b \(brokers) -t \(changesTopic) -o beginning -f '%k %s\\n'    # the change feed

            """
    }

    /// Finds or makes the private cluster (wiping it first with --reset) and starts it unless it
    /// runs already. Returns whether this run started it (and so stops it).
    ///
    /// - Throws: ``DevStartError`` with a sentence: usage errors (an account that does not exist,
    ///   a folder `--reset` must not wipe) and unavailability (binaries missing, a busy port, a
    ///   server that does not start).
    public static func startPostgres(
        folder: URL, reset: Bool, apiPort port: Int, apiHost host: String, postgresPort: Int, say: (String) -> Void
    ) throws(DevStartError) -> (DevPostgres, startedHere: Bool) {
        guard let binaries = DevPostgres.findBinaries() else {
            throw DevStartError("the PostgreSQL server binaries (initdb, pg_ctl) were not found in /usr/lib/postgresql/*/bin; install postgresql (deploy/dev.sh does) or set REDDOT_PG_BIN",
                isUsage: false)
        }
        let account = geteuid() == 0 ? (ProcessInfo.processInfo.environment["REDDOT_DEV_PG_USER"] ?? "reddot-dev") : nil
        if let account, account.isEmpty || account.contains("/") || account.hasPrefix(".") || getpwnam(account) == nil {
            throw DevStartError("PostgreSQL refuses to run as root, and REDDOT_DEV_PG_USER names no account ('\(account.prefix(40))'): run deploy/dev.sh (it creates reddot-dev), or: useradd --system --home-dir /var/lib/\(account.prefix(40)) \(account.prefix(40))", isUsage: true)
        }

        if portIsBusy(port, host: host) {
            throw DevStartError("port \(port) is busy (another RedDot or server?); choose another with --port", isUsage: false)
        }
        if reset {
            if let problem = DevStack.wipeProblem(folder) { throw DevStartError(problem, isUsage: true) }
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
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw DevStartError("cannot create the data folder \(folder.path): \(error.localizedDescription)", isUsage: false)
        }
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
                    throw DevStartError("port \(postgresPort) is busy (another PostgreSQL?); choose another with --pg-port", isUsage: false)
                }
                try postgres.start()
                startedHere = true
            }
        } catch let error as DevStartError {
            throw error
        } catch {
            throw DevStartError("\(error)", isUsage: false)
        }
        return (postgres, startedHere)
    }
}

/// Why `reddot dev` could not start its PostgreSQL.
public struct DevStartError: Error, CustomStringConvertible {
    /// A sentence for the operator.
    public var description: String
    /// Whether the arguments or environment are at fault (exit 64) rather than the machine (69).
    public var isUsage: Bool

    /// An error.
    public init(_ description: String, isUsage: Bool) {
        self.description = description
        self.isUsage = isUsage
    }
}
