import Dispatch
import Foundation
import LibPQ
import TestSupport
import Testing

/// The built `reddot` executable, run as a child process against a real PostgreSQL: exit codes,
/// stdout and stderr as an operator sees them.
@Suite("reddot CLI as a child process")
struct CLITests {
    // MARK: - migrate

    @Test("migrate up applies the real migrations, then has nothing to apply")
    func migrateUpTwice() async throws {
        try await withDatabase { url in
            let first = try await reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path])
            #expect(first.exitCode == 0, "\(first)")
            #expect(first.stdout.contains("applied 0001_init.sql\n"), "\(first)")
            #expect(first.stdout.contains("the schema is current"), "\(first)")

            let second = try await reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path])
            #expect(second.exitCode == 0, "\(second)")
            #expect(second.stdout.hasPrefix("nothing to apply"), "\(second)")
            #expect(!second.stdout.contains("applied 0001"), "\(second)")

            let verify = try await reddot(["migrate", "verify", "--fail-if-pending", "--database-url", url, "--migrations", Repository.migrationsDirectory.path])
            #expect(verify.exitCode == 0, "\(verify)")
            #expect(verify.stdout.hasPrefix("ok: "), "\(verify)")
        }
    }

    @Test("migrate status notes a collation other than C on stderr (ICU en-US, C.UTF-8) until migration 32 makes the keys bytewise; exit 0; a C database gets no note")
    func collationNote() async throws {
        let migrations = Repository.migrationsDirectory.path
        try await withDatabase(options: "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'") { url in
            let before = try await reddot(["migrate", "status", "--json", "--database-url", url, "--migrations", migrations])
            #expect(before.exitCode == 0, "\(before)")
            #expect(before.stderr.contains("reddot migrate: note: this database compares text with an ICU collation, not byte by byte"), "\(before)")
            #expect(before.stderr.contains("until migration 32 declares them bytewise"), "\(before)")
            #expect(before.stderr.contains(#""Creating the database" in RedDot's deploy/README.md"#), "\(before)")
            #expect(!before.stdout.contains("note"), "\(before)")
            let up = try await reddot(["migrate", "up", "--database-url", url, "--migrations", migrations])
            #expect(up.exitCode == 0, "\(up)")
            #expect(up.stdout.contains("the schema is current"), "\(up)")
            #expect(!up.stderr.contains("note"), "\(up)")
            let after = try await reddot(["migrate", "status", "--database-url", url, "--migrations", migrations])
            #expect(after.exitCode == 0 && !after.stderr.contains("note"), "\(after)")
        }
        // A libc locale other than C or POSIX goes through the locale library too, even C.UTF-8.
        try await withDatabase(options: "TEMPLATE template0 LOCALE_PROVIDER libc LOCALE 'C.UTF-8'") { url in
            let before = try await reddot(["migrate", "status", "--database-url", url, "--migrations", migrations])
            #expect(before.stderr.contains("compares text with the collation C.UTF-8, not byte by byte"), "\(before)")
            let up = try await reddot(["migrate", "up", "--database-url", url, "--migrations", migrations])
            #expect(up.exitCode == 0, "\(up)")
            #expect(!up.stderr.contains("note"), "\(up)")
        }
        try await withDatabase(options: "TEMPLATE template0 LOCALE_PROVIDER libc LOCALE 'C'") { url in
            let up = try await reddot(["migrate", "up", "--database-url", url, "--migrations", migrations])
            #expect(up.exitCode == 0, "\(up)")
            #expect(!up.stderr.contains("note"), "\(up)")
        }
    }

    @Test("migrate plan --online and up --online apply migration 32 through its index builds; an index it would not rebuild exits 1 naming it")
    func onlineMigration() async throws {
        // The files up to 31, for a schema-31 database.
        let older = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-mig31-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: older, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: older) }
        for name in try FileManager.default.contentsOfDirectory(atPath: Repository.migrationsDirectory.path)
        where name.hasSuffix(".sql") && (Int(name.prefix(4)) ?? 99) <= 31 {
            try FileManager.default.copyItem(at: Repository.migrationsDirectory.appendingPathComponent(name), to: older.appendingPathComponent(name))
        }
        let migrations = Repository.migrationsDirectory.path
        try await withDatabase(options: "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'") { url in
            #expect(try await reddot(["migrate", "up", "--database-url", url, "--migrations", older.path]).exitCode == 0)
            let plan = try await reddot(["migrate", "plan", "--online", "--database-url", url, "--migrations", migrations])
            #expect(plan.exitCode == 0, "\(plan)")
            #expect(plan.stdout.contains("CREATE UNIQUE INDEX CONCURRENTLY reddot_bytewise_"), "\(plan)")
            #expect(plan.stdout.contains("ADD CONSTRAINT badge_aggregate_pkey PRIMARY KEY USING INDEX reddot_bytewise_"), "\(plan)")
            // A run stopped after one build: status says so.
            let connection = try PGConnection.connect(PGConfiguration(connectionString: url), logger: TestServer.logger)
            try connection.execute(
                script: "CREATE UNIQUE INDEX CONCURRENTLY reddot_bytewise_1 ON user_version (user_id COLLATE \"C\")", name: "test.one_build")
            connection.close()
            let waiting = try await reddot(["migrate", "status", "--database-url", url, "--migrations", migrations])
            #expect(waiting.exitCode == 0, "\(waiting)")
            #expect(waiting.stderr.contains("reddot migrate: note: 1 index built by 'reddot migrate up --online' (reddot_bytewise_…) wait"), "\(waiting)")
            let up = try await reddot(["migrate", "up", "--online", "--database-url", url, "--migrations", migrations])
            #expect(up.exitCode == 0, "\(up)")
            #expect(up.stdout.contains("applied 0032_bytewise_keys.sql"), "\(up)")
            let after = try await reddot(["migrate", "status", "--database-url", url, "--migrations", migrations])
            #expect(!after.stderr.contains("note"), "\(after)")
            #expect(!up.stderr.contains("note"), "\(up)")
            let verify = try await reddot(["migrate", "verify", "--fail-if-pending", "--database-url", url, "--migrations", migrations])
            #expect(verify.exitCode == 0, "\(verify)")
        }
        try await withDatabase(options: "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'") { url in
            #expect(try await reddot(["migrate", "up", "--database-url", url, "--migrations", older.path]).exitCode == 0)
            let connection = try PGConnection.connect(PGConfiguration(connectionString: url), logger: TestServer.logger)
            try connection.execute(script: "CREATE INDEX chat_states ON badge_state (user_id) WHERE path <@ 'root.chat'", name: "test.partial")
            connection.close()
            let up = try await reddot(["migrate", "up", "--online", "--database-url", url, "--migrations", migrations])
            #expect(up.exitCode == 1, "\(up)")
            #expect(up.stderr.contains("the index chat_states on badge_state is partial"), "\(up)")
            #expect(up.stderr.contains("run 'reddot migrate up' without --online"), "\(up)")
            let status = try await reddot(["migrate", "status", "--database-url", url, "--migrations", migrations])
            #expect(status.stdout.contains("pending"), "\(status)")
        }
    }

    @Test("migrate status --json matches the golden file: two applied, one pending")
    func statusJSONGolden() async throws {
        let directory = try FixtureMigrations()
        defer { directory.delete() }
        try await withDatabase { url in
            let third = try directory.take("0003_index_note_author.sql")
            let up = try await reddot(["migrate", "up", "--database-url", url, "--migrations", directory.url.path])
            #expect(up.exitCode == 0, "\(up)")
            #expect(up.stdout.hasPrefix("applied 0001_create_note.sql\napplied 0002_add_note_author.sql\n"), "\(up)")
            try directory.put(third)

            let status = try await reddot(["migrate", "status", "--json", "--database-url", url, "--migrations", directory.url.path])
            #expect(status.exitCode == 0, "\(status)")

            // applied_at changes on every run: check that it is a recent UTC time, then mask it.
            let appliedAt = status.stdout.matches(of: Self.appliedAtPattern).map { String($0.output.1) }
            #expect(appliedAt.count == 2, "\(status.stdout)")
            for text in appliedAt {
                let date = try #require(ISO8601DateFormatter().date(from: text), "applied_at \(text)")
                #expect(abs(date.timeIntervalSinceNow) < 600, "applied_at \(text)")
                #expect(text.hasSuffix("Z"), "applied_at \(text)")
            }
            let masked = status.stdout.replacing(Self.appliedAtPattern) { _ in #""applied_at" : "<applied_at>""# }

            let goldenURL = Self.fixtures.appendingPathComponent("status.golden.json")
            if ProcessInfo.processInfo.environment["REDDOT_UPDATE_GOLDEN"] == "1" {
                try Data(masked.utf8).write(to: goldenURL)
            }
            let golden = try String(contentsOf: goldenURL, encoding: .utf8)
            #expect(masked == golden)
        }
    }

    @Test("verify --fail-if-pending exits 3; plan prints only the pending SQL, then nothing to apply")
    func pendingAndPlan() async throws {
        let directory = try FixtureMigrations()
        defer { directory.delete() }
        try await withDatabase { url in
            let third = try directory.take("0003_index_note_author.sql")
            #expect(try await reddot(["migrate", "up", "--database-url", url, "--migrations", directory.url.path]).exitCode == 0)
            try directory.put(third)

            let verify = try await reddot(["migrate", "verify", "--database-url", url, "--migrations", directory.url.path])
            #expect(verify.exitCode == 0, "\(verify)")
            #expect(verify.stdout.contains("2 applied migration(s) match their files; 1 pending"), "\(verify)")

            let strict = try await reddot(["migrate", "verify", "--fail-if-pending", "--database-url", url, "--migrations", directory.url.path])
            #expect(strict.exitCode == 3, "\(strict)")
            #expect(strict.stderr.contains("0003_index_note_author.sql"), "\(strict)")

            let plan = try await reddot(["migrate", "plan", "--database-url", url, "--migrations", directory.url.path])
            #expect(plan.exitCode == 0, "\(plan)")
            #expect(plan.stdout.contains("-- 0003_index_note_author.sql (sha256:ce059a157765a5e9655eb56e69697da2f377e3f6d290a7eef4b6f47d505e7ba0, in a transaction)"), "\(plan)")
            #expect(plan.stdout.contains("CREATE INDEX note_author ON note (author);"), "\(plan)")
            #expect(plan.stdout.contains("BEGIN;") && plan.stdout.contains("COMMIT;"), "\(plan)")
            #expect(!plan.stdout.contains("CREATE TABLE note"), "applied files are not planned: \(plan)")
            // plan changes nothing.
            #expect(try await reddot(["migrate", "verify", "--fail-if-pending", "--database-url", url, "--migrations", directory.url.path]).exitCode == 3)

            let up = try await reddot(["migrate", "up", "--database-url", url, "--migrations", directory.url.path])
            #expect(up.exitCode == 0, "\(up)")
            #expect(up.stdout.hasPrefix("applied 0003_index_note_author.sql\n"), "\(up)")

            let current = try await reddot(["migrate", "plan", "--database-url", url, "--migrations", directory.url.path])
            #expect(current.exitCode == 0, "\(current)")
            #expect(current.stdout.contains("nothing to apply"), "\(current)")
            #expect(try await reddot(["migrate", "verify", "--fail-if-pending", "--database-url", url, "--migrations", directory.url.path]).exitCode == 0)
        }
    }

    @Test("an edited applied file: verify, up and status exit 65 and name it")
    func editedAppliedFile() async throws {
        let directory = try FixtureMigrations()
        defer { directory.delete() }
        try await withDatabase { url in
            #expect(try await reddot(["migrate", "up", "--database-url", url, "--migrations", directory.url.path]).exitCode == 0)
            try Data("-- Who wrote each note (edited).\nALTER TABLE note ADD COLUMN author text;\n".utf8)
                .write(to: directory.url.appendingPathComponent("0002_add_note_author.sql"))

            for command in [["migrate", "verify"], ["migrate", "up"], ["migrate", "plan"]] {
                let result = try await reddot(command + ["--database-url", url, "--migrations", directory.url.path])
                #expect(result.exitCode == 65, "\(command): \(result)")
                #expect(result.stderr.contains("0002_add_note_author.sql"), "\(command): \(result)")
                #expect(result.stderr.contains("edited"), "\(command): \(result)")
            }

            let status = try await reddot(["migrate", "status", "--database-url", url, "--migrations", directory.url.path])
            #expect(status.exitCode == 65, "\(status)")
            #expect(status.stdout.contains("modified      0002_add_note_author.sql"), "\(status)")
            #expect(status.stdout.contains("2 applied, 0 pending, 1 problem(s)"), "\(status)")

            // A misnamed file is refused before the database is asked anything.
            try Data("SELECT 1;\n".utf8).write(to: directory.url.appendingPathComponent("4_misnamed.sql"))
            let misnamed = try await reddot(["migrate", "status", "--database-url", url, "--migrations", directory.url.path])
            #expect(misnamed.exitCode == 65, "\(misnamed)")
            #expect(misnamed.stderr.contains("4_misnamed.sql"), "\(misnamed)")
        }
    }

    @Test("an unreachable database exits 69 with a sentence on stderr")
    func unreachableDatabase() async throws {
        let unreachable = "postgresql://nobody@127.0.0.1:1/x"
        let migrate = try await reddot(["migrate", "up", "--database-url", unreachable, "--migrations", Self.fixtures.appendingPathComponent("migrations").path])
        #expect(migrate.exitCode == 69, "\(migrate)")
        #expect(migrate.stderr.contains("reddot: cannot connect to the database"), "\(migrate)")
        #expect(migrate.stdout.isEmpty, "\(migrate)")

        let show = try await reddot(["badges", "show", "--user", "u1", "--database-url", unreachable])
        #expect(show.exitCode == 69, "\(show)")
        #expect(show.stderr.hasPrefix("reddot: ") || show.stderr.contains("\nreddot: "), "\(show)")
        #expect(show.stdout.isEmpty, "\(show)")
    }

    @Test("migrate up gives up with exit 75 while another migrator holds the lock")
    func lockBusy() async throws {
        try await withDatabase { url in
            let started = ContinuousClock.now
            let result = try await withHeldSession(PGConfiguration(connectionString: url), holding: "SELECT pg_advisory_lock(\(Self.advisoryLockKey))") {
                try await reddot(["migrate", "up", "--lock-wait", "0.3", "--database-url", url, "--migrations", Self.fixtures.appendingPathComponent("migrations").path])
            }
            #expect(result.exitCode == 75, "\(result)")
            #expect(result.stderr.contains("reddot: another migrator has held the migration lock for more than 0.3 s"), "\(result)")
            // It gives up instead of waiting for the lock, which is held for as long as the test
            // runs: a wait for it would never end. The bound is loose on purpose: under the whole
            // suite's load on a 2-core machine a spawn took 11.7 s once, and this test 36 s.
            #expect(ContinuousClock.now - started < .seconds(120))
            // Nothing was applied: every file is still pending.
            let status = try await reddot(["migrate", "status", "--database-url", url, "--migrations", Self.fixtures.appendingPathComponent("migrations").path])
            #expect(status.exitCode == 0, "\(status)")
            #expect(status.stdout.contains("0 applied, 3 pending, 0 problem(s)"), "\(status)")
        }
    }

    // MARK: - badges

    @Test("badges apply and show: aggregates, display text, versions, subtrees, clears")
    func badgesApplyAndShow() async throws {
        try await withDatabase { url in
            #expect(try await reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path]).exitCode == 0)
            let user = ["--user", "cli-user-1", "--database-url", url]

            let empty = try await badges(["show"] + user)
            #expect(empty.user == "cli-user-1")
            #expect(empty.tree?.path == "root")
            #expect(empty.tree?.shown == false)
            #expect(empty.tree?.count == 0)

            let chat = try await badges(["apply", "--op", "incr", "--path", "root.chat.c7", "--by", "3"] + user)
            #expect(chat.version > empty.version)
            #expect(chat.tree?.count == 3)
            #expect(chat.tree?.text == "3")
            #expect(chat.tree?.child("root.chat")?.child("root.chat.c7")?.count == 3)

            let icon = try await badges(["apply", "--op", "set", "--path", "root.promotion.item1", "--icon", "new"] + user)
            #expect(icon.version > chat.version)
            let item1 = try #require(icon.tree?.child("root.promotion")?.child("root.promotion.item1"))
            #expect(item1.shown && item1.count == 0 && item1.text == nil && item1.icon == "new")
            #expect(icon.tree?.count == 3)

            let big = try await badges(["apply", "--op", "set", "--path", "root.promotion.item2", "--count", "150"] + user)
            #expect(big.version > icon.version)
            let root = try #require(big.tree)
            #expect(root.path == "root" && root.shown)
            #expect(root.count == 153)
            #expect(root.text == "99+")
            #expect(root.children.map(\.path) == ["root.chat", "root.promotion"])
            #expect(root.child("root.chat")?.count == 3)
            #expect(root.child("root.chat")?.text == "3")
            let promotion = try #require(root.child("root.promotion"))
            #expect(promotion.count == 150 && promotion.text == "99+" && promotion.icon == nil)
            #expect(promotion.children.map(\.path) == ["root.promotion.item1", "root.promotion.item2"])
            #expect(promotion.child("root.promotion.item1")?.text == nil)
            #expect(promotion.child("root.promotion.item1")?.icon == "new")
            #expect(promotion.child("root.promotion.item2")?.text == "99+")

            // Every node carries all six keys, nulls included; the answer has four.
            let raw = try await reddot(["show"].badgesCommand + user)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(raw.stdout.utf8)) as? [String: Any])
            #expect(Set(object.keys) == ["mutes", "tree", "user", "version"])
            let rootObject = try #require(object["tree"] as? [String: Any])
            #expect(Set(rootObject.keys) == ["children", "count", "icon", "path", "shown", "text", "unseen"])
            #expect(rootObject["icon"] is NSNull)
            #expect(raw.stdout.contains(#""text" : null"#), "\(raw.stdout)")

            let capped = try await badges(["show", "--count-cap", "500"] + user)
            #expect(capped.tree?.text == "153")
            #expect(capped.version == big.version)

            let chatOnly = try await badges(["show", "--path", "root.chat", "--depth", "0"] + user)
            #expect(chatOnly.version == big.version)
            #expect(chatOnly.tree?.path == "root.chat")
            #expect(chatOnly.tree?.count == 3)
            #expect(chatOnly.tree?.children.isEmpty == true)

            let nothingRaw = try await reddot(["show", "--path", "root.nothing"].badgesCommand + user)
            #expect(nothingRaw.exitCode == 0, "\(nothingRaw)")
            #expect(nothingRaw.stdout.contains(#""tree" : null"#), "\(nothingRaw.stdout)")
            let nothing = try JSONDecoder().decode(BadgeAnswer.self, from: Data(nothingRaw.stdout.utf8))
            #expect(nothing.tree == nil)
            #expect(nothing.version == big.version)

            // Clearing what is not set, or a parent whose children are still set, changes nothing.
            let unset = try await badges(["apply", "--op", "clear", "--path", "root.promotion.item3"] + user)
            #expect(unset.version == big.version)
            #expect(unset.tree == big.tree)
            let parent = try await badges(["apply", "--op", "clear", "--path", "root.promotion"] + user)
            #expect(parent.version == big.version)
            #expect(parent.tree == big.tree)

            let forced = try await badges(["apply", "--op", "clear", "--force", "--path", "root.promotion"] + user)
            #expect(forced.version > big.version)
            #expect(forced.tree?.count == 3)
            #expect(forced.tree?.text == "3")
            #expect(forced.tree?.children.map(\.path) == ["root.chat"])
            let promotionGone = try await badges(["show", "--path", "root.promotion"] + user)
            #expect(promotionGone.tree == nil)

            let before = try await reddot(["show"].badgesCommand + user)
            #expect(before.exitCode == 0)
            for badPath in ["root.a*b", "root..x"] {
                let result = try await reddot(["apply", "--op", "set", "--path", badPath].badgesCommand + user)
                #expect(result.exitCode == 64, "\(badPath): \(result)")
                #expect(result.stderr.contains(badPath), "\(badPath): \(result)")
                #expect(result.stdout.isEmpty, "\(badPath): \(result)")
                let shown = try await reddot(["show", "--path", badPath].badgesCommand + user)
                #expect(shown.exitCode == 64, "\(badPath): \(shown)")
            }
            let usage = try await reddot(["apply", "--op", "incr", "--path", "root.chat.c7", "--count", "5"].badgesCommand + user)
            #expect(usage.exitCode == 64, "\(usage)")
            #expect(usage.stderr.contains("--count"), "\(usage)")
            let after = try await reddot(["show"].badgesCommand + user)
            #expect(after.stdout == before.stdout, "nothing changed")

            // Another user sees nothing of it.
            let stranger = try await badges(["show", "--user", "cli-user-2", "--database-url", url])
            #expect(stranger.tree?.count == 0)
            #expect(stranger.tree?.shown == false)
        }
    }

    // MARK: - running reddot

    /// What a child process printed, and how it ended.
    /// `reddot badges show|apply` as the command prints it.
    struct BadgeAnswer: Decodable, Sendable {
        var user: String
        var version: Int64
        var tree: BadgeTreeNode?
    }

    struct BadgeTreeNode: Decodable, Equatable, Sendable {
        var path: String
        var shown: Bool
        var count: Int64
        var text: String?
        var icon: String?
        var children: [BadgeTreeNode]

        func child(_ path: String) -> BadgeTreeNode? { children.first { $0.path == path } }
    }

    /// Runs `reddot badges …`, expects exit 0 and decodes the answer.
    func badges(_ arguments: [String]) async throws -> BadgeAnswer {
        let result = try await reddot(arguments.badgesCommand)
        try #require(result.exitCode == 0, "\(arguments): \(result)")
        return try JSONDecoder().decode(BadgeAnswer.self, from: Data(result.stdout.utf8))
    }

    /// Runs the built `reddot` with `arguments`, off Swift's cooperative threads, and waits for it;
    /// never hangs the suite: a command still running after `timeoutSeconds` (30 s unless the
    /// command is a whole benchmark run) is killed (and fails its test).
    func reddot(_ arguments: [String], setting extra: [String: String] = [:], timeoutSeconds: Int = 30) async throws -> CommandOutput {
        try await ChildProcess.capture(
            try Self.binary.get(), arguments, removing: ["REDDOT_DATABASE_URL", "REDDOT_MIGRATIONS_DIR", "REDDOT_LOG_LEVEL"],
            setting: extra.merging(["REDDOT_LOG_LEVEL": "warning"]) { own, _ in own }, in: FileManager.default.temporaryDirectory,
            timeoutSeconds: timeoutSeconds)
    }

    /// The built executable (see `ReddotBinary`).
    static var binary: Result<URL, TestSetupError> { ReddotBinary.url }

    // MARK: - fixtures

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    /// `Migrator.advisoryLockKey` ("reddot" in ASCII); this target does not import BadgeStore.
    static let advisoryLockKey: Int64 = 0x7265_6464_6F74
    static var appliedAtPattern: Regex<(Substring, Substring)> { #/"applied_at" : "([^"]*)"/# }

    /// A copy of `Fixtures/migrations` in a temporary directory of its own.
    struct FixtureMigrations {
        let url: URL

        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-cli-migrations-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            let source = CLITests.fixtures.appendingPathComponent("migrations")
            for name in try FileManager.default.contentsOfDirectory(atPath: source.path) where name.hasSuffix(".sql") {
                try FileManager.default.copyItem(at: source.appendingPathComponent(name), to: url.appendingPathComponent(name))
            }
        }

        /// Removes a file and returns it, to `put` back later.
        func take(_ name: String) throws -> (name: String, data: Data) {
            let file = url.appendingPathComponent(name)
            let data = try Data(contentsOf: file)
            try FileManager.default.removeItem(at: file)
            return (name, data)
        }

        func put(_ file: (name: String, data: Data)) throws {
            try file.data.write(to: url.appendingPathComponent(file.name))
        }

        func delete() {
            try? FileManager.default.removeItem(at: url)
        }
    }

    /// Runs `body` with the URL of a fresh database (made with `options`, see
    /// `TestDatabase.create`), dropped afterwards.
    func withDatabase(options: String = "", _ body: (String) async throws -> Void) async throws {
        let database = try await TestDatabase.create(prefix: "cli", options: options)
        do {
            try await body(database.url)
        } catch {
            await database.drop()
            throw error
        }
        await database.drop()
    }
}

extension [String] {
    /// `["badges"] + self`.
    fileprivate var badgesCommand: [String] { ["badges"] + self }
}
