import Foundation
import LibPQ
import Logging
import Synchronization
import TestSupport
import Testing

@Suite("LibPQ against a real PostgreSQL")
struct LibPQTests {
    let logger = TestServer.logger

    func pool(_ maximumConnections: Int = 2, statementTimeout: Int? = nil) throws -> PGPool {
        PGPool(
            configuration: PGConfiguration(
                connectionString: try TestServer.adminURL(), statementTimeoutMilliseconds: statementTimeout),
            maximumConnections: maximumConnections, logger: logger)
    }

    @Test("bound parameters, NULLs and arrays round-trip untouched")
    func parametersRoundTrip() async throws {
        let pool = try pool()
        defer { pool.close() }
        let tricky = ["plain", "with \"quotes\"", "back\\slash", "comma,brace{}", "NULL", "", "ünïcode ✓", "'; DROP TABLE x; --"]
        let back = try await pool.withConnection { connection in
            try connection.query(
                PGStatement("test.unnest", "SELECT value FROM unnest($1::text[]) WITH ORDINALITY AS t(value, n) ORDER BY n"),
                [tricky]
            ).rows.map { try $0.decode(0, as: String.self) }
        }
        #expect(back == tricky)

        let optionals: [String?] = ["a", nil, "NULL"]
        let nullFlags = try await pool.withConnection { connection in
            try connection.query(
                PGStatement("test.unnest_nulls", "SELECT value IS NULL FROM unnest($1::text[]) WITH ORDINALITY AS t(value, n) ORDER BY n"),
                [optionals]
            ).rows.map { try $0.decode(0, as: Bool.self) }
        }
        #expect(nullFlags == [false, true, false])

        // Every kind of element writes itself into the array literal (no string per element).
        let integers: [Int64] = [Int64.min, -1, 0, 42, Int64.max]
        let smalls: [Int32?] = [Int32.min, nil, Int32.max]
        let flags: [Bool] = [true, false, true]
        let times: [Date?] = [Date(timeIntervalSince1970: 1_790_000_000.123456), nil, Date(timeIntervalSince1970: -62_135_596_800 - 86_400)]
        let doubles: [Double] = [-0.5, 1e300]
        let arrays = try await pool.withConnection { connection in
            try connection.query(
                PGStatement(
                    "test.arrays",
                    """
                    SELECT array_to_string($1::bigint[], ','), array_to_string($2::int[], ',', 'null'),
                           array_to_string($3::bool[], ','), array_to_string($5::float8[], ','),
                           (SELECT string_agg(coalesce(extract(epoch FROM t)::text, 'null'), ',' ORDER BY n)
                            FROM unnest($4::timestamptz[]) WITH ORDINALITY AS u(t, n))
                    """),
                [integers, smalls, flags, times, doubles]
            ).singleRow()
        }
        #expect(try arrays.decode(0, as: String.self) == "-9223372036854775808,-1,0,42,9223372036854775807")
        #expect(try arrays.decode(1, as: String.self) == "-2147483648,null,2147483647")
        #expect(try arrays.decode(2, as: String.self) == "t,f,t")
        #expect(try arrays.decode(3, as: String.self) == "-0.5,1e+300")
        #expect(try arrays.decode(4, as: String.self) == "1790000000.123456,null,-62135683200.000000")

        let row = try await pool.withConnection { connection in
            try connection.query(
                PGStatement("test.scalars", "SELECT $1::bigint + 1, $2::boolean, $3::text IS NULL, $4::double precision * 2"),
                [Int64.max - 1, true, String?.none, 1.25]
            ).singleRow()
        }
        #expect(try row.decode(0, as: Int64.self) == Int64.max)
        #expect(try row.decode(1, as: Bool.self) == true)
        #expect(try row.decode(2, as: Bool.self) == true)
        #expect(try row.decode(3, as: Double.self) == 2.5)
    }

    @Test("timestamps round-trip with microseconds")
    func timestamps() async throws {
        let pool = try pool()
        defer { pool.close() }
        // Leap days, the Gregorian switch of 1582 (PostgreSQL counts proleptically), year 1,
        // 1 BC, 9999, and random instants from year 1 to 9999.
        var dates = [
            1_790_000_000.123456, 0, -86_400.5, 951_782_400.999999, 1_709_164_800, -12_219_292_800, -12_220_156_800,
            -62_135_596_800, -62_135_596_800 - 86_400, 253_402_300_799,
        ].map { Date(timeIntervalSince1970: $0) }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            dates.append(Date(timeIntervalSince1970: Double(Int64.random(in: -62_135_596_800...253_402_300_799, using: &random)) + 0.25))
        }
        for date in dates {
            let (back, epoch) = try await pool.withConnection { connection in
                let row = try connection.query(
                    PGStatement("test.timestamp", "SELECT CASE WHEN $1::timestamptz >= '0001-01-01Z' THEN $1::timestamptz END, extract(epoch FROM $1::timestamptz)::float8"), [date]
                ).singleRow()
                return (try row.decode(0, as: Date?.self), try row.decode(1, as: Double.self))
            }
            // A microsecond, or what a Double holds of a time that far from 1970.
            let tolerance = max(0.000_001, date.timeIntervalSince1970.magnitude.ulp * 4)
            #expect(abs(epoch - date.timeIntervalSince1970) <= tolerance, "\(date.timeIntervalSince1970)")
            if date.timeIntervalSince1970 >= -62_135_596_800 {
                #expect(abs((back?.timeIntervalSince1970 ?? .nan) - date.timeIntervalSince1970) <= tolerance, "\(date.timeIntervalSince1970)")
            }
        }
    }

    @Test("a type mismatch is a decoding error that names the statement")
    func decodingError() async throws {
        let pool = try pool()
        defer { pool.close() }
        let error = await #expect(throws: PGError.self) {
            try await pool.withConnection { connection in
                try connection.query(PGStatement("test.text_as_int", "SELECT 'abc'::text")).singleRow().decode(0, as: Int.self)
            }
        }
        #expect(error?.code == .decoding)
        #expect(error?.statement == "test.text_as_int")
        #expect(error?.description.contains("'abc'") == true)
    }

    @Test("server errors keep SQLSTATE and say whether a retry can help")
    func serverErrors() async throws {
        let pool = try pool()
        defer { pool.close() }
        let unique = await #expect(throws: PGError.self) {
            try await pool.withConnection { connection in
                try connection.query(PGStatement("test.unique", "SELECT * FROM (VALUES (1)) v(x) WHERE 1/0 = 1", prepared: false))
            }
        }
        #expect(unique?.sqlState == "22012")
        #expect(unique?.isRetriable == false)
        #expect(unique?.statement == "test.unique")

        let serialization = await #expect(throws: PGError.self) {
            try await pool.withConnection { connection in
                try connection.execute(
                    script: "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$", name: "test.serialization")
            }
        }
        #expect(serialization?.sqlState == "40001")
        #expect(serialization?.isRetriable == true)
    }

    @Test("a failed connect is a clear error, not a crash")
    func connectFailure() async throws {
        let pool = PGPool(
            configuration: PGConfiguration(connectionString: "postgresql://nobody@127.0.0.1:1/none", connectTimeoutSeconds: 2),
            maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let error = await #expect(throws: PGError.self) {
            try await pool.withConnection { _ in 1 }
        }
        #expect(error?.code == .connectionFailed)
        #expect(error?.isRetriable == true)
        #expect(error?.message.contains("127.0.0.1") == true)
        // Logs say why (a service that retries would otherwise log only "connectionFailed error").
        #expect(error?.description.contains("127.0.0.1") == true, "\(String(describing: error))")
        #expect(PGConfiguration.connectionStringProblem("postgresql://nobody@127.0.0.1:1/none") == nil)
        #expect(PGConfiguration.connectionStringProblem("host=h dbname=d") == nil)
        #expect(PGConfiguration.connectionStringProblem("postgresql://%zz@h/d")?.contains("percent-encoded") == true)
        #expect(PGConfiguration.connectionStringProblem("not a url") != nil)
        // The slot is given back: the pool can still try (and fail) again rather than hang.
        await #expect(throws: PGError.self) { try await pool.withConnection { _ in 1 } }
    }

    @Test("transactions commit, roll back, and keep the original error")
    func transactions() async throws {
        let database = try await TestDatabase.create()
        let pool = PGPool(configuration: database.configuration, maximumConnections: 2, logger: logger)
        defer { pool.close() }
        try await pool.withConnection { try $0.execute(script: "CREATE TABLE t (x int PRIMARY KEY)", name: "test.create") }
        try await pool.withTransaction { connection in
            try connection.query(PGStatement("test.insert", "INSERT INTO t VALUES ($1)"), [1])
        }
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await pool.withTransaction { connection in
                try connection.query(PGStatement("test.insert", "INSERT INTO t VALUES ($1)"), [2])
                throw Boom()
            }
        }
        let duplicate = await #expect(throws: PGError.self) {
            try await pool.withTransaction { connection in
                try connection.query(PGStatement("test.insert", "INSERT INTO t VALUES ($1)"), [3])
                try connection.query(PGStatement("test.insert", "INSERT INTO t VALUES ($1)"), [1])
            }
        }
        #expect(duplicate?.sqlState == "23505")
        #expect(duplicate?.isIntegrityViolation == true)
        let rows = try await pool.withConnection { connection in
            try connection.query(PGStatement("test.select", "SELECT x FROM t ORDER BY x")).rows.map { try $0.decode(0, as: Int.self) }
        }
        #expect(rows == [1])
        await database.drop()
    }

    @Test("a prepared statement whose result a migration altered is prepared again: at once outside a transaction, on the retry inside one")
    func preparedShapeChanged() async throws {
        let database = try await TestDatabase.create()
        let pool = PGPool(configuration: database.configuration, maximumConnections: 1, logger: logger)
        let migrator = try PGConnection.connect(database.configuration, logger: logger)
        defer {
            migrator.close()
            pool.close()
        }
        let select = PGStatement("test.select_keys", "SELECT k FROM keys ORDER BY k")
        let sum = PGStatement("test.sum_keys", "SELECT count(*), max(k) FROM keys")
        try migrator.execute(script: "CREATE TABLE keys (k text PRIMARY KEY, n int); INSERT INTO keys VALUES ('b', 1), ('a', 2)", name: "test.create")
        try await pool.withConnection { connection in
            #expect(try connection.query(select).rows.map { try $0.decode(0, as: String.self) } == ["a", "b"])
            _ = try connection.withTransaction { try $0.query(sum) }
        }

        // What migration 32 does to RedDot's keys: the column's collation, so the result's shape.
        try migrator.execute(script: "ALTER TABLE keys ALTER COLUMN k TYPE text COLLATE \"C\"", name: "test.alter")

        // Outside a transaction block, the same call prepares it again and answers.
        let again = try await pool.withConnection { connection in
            try connection.query(select).rows.map { try $0.decode(0, as: String.self) }
        }
        #expect(again == ["a", "b"])
        // Inside one, the transaction fails with a retriable error, and the retry succeeds.
        let stale = await #expect(throws: PGError.self) {
            try await pool.withTransaction { connection in try connection.query(sum) }
        }
        #expect(stale?.sqlState == "0A000")
        #expect(stale?.preparedShapeChanged == true && stale?.isRetriable == true)
        let attempts = Mutex(0)
        let row = try await PGRetryPolicy(maximumAttempts: 2, initialDelayMilliseconds: 1).run(logger: logger) {
            attempts.withLock { $0 += 1 }
            return try await pool.withTransaction { connection in try connection.query(sum).singleRow().decode(1, as: String.self) }
        }
        #expect(row == "b" && attempts.withLock { $0 } == 1)
        // A statement's own 0A000 (raised when it runs, right after it was prepared) is not
        // taken for a stale form, nor retried.
        try migrator.execute(
            script: "CREATE COLLATION loose (provider = icu, locale = 'und-u-ks-level2', deterministic = false)", name: "test.collation")
        let own = await #expect(throws: PGError.self) {
            try await pool.withConnection { connection in
                try connection.query(PGStatement("test.own_0a000", "SELECT k COLLATE loose LIKE 'a%' FROM keys"))
            }
        }
        #expect(own?.sqlState == "0A000")
        #expect(own?.preparedShapeChanged == false && own?.isRetriable == false)
        await database.drop()
    }

    @Test("a statement from a second thread while the first runs is refused with concurrentUse, and the connection stays good")
    func concurrentUseRefused() async throws {
        let connection = try PGConnection.connect(PGConfiguration(connectionString: try TestServer.adminURL()), logger: logger)
        defer { connection.close() }
        // The first thread holds the connection in a one-second statement.
        let first = Thread {
            _ = try? connection.query(PGStatement("test.sleep", "SELECT pg_sleep(1)", prepared: false))
        }
        first.start()
        // Until the server runs it, a second statement could still go first: wait for the sleep.
        let probe = try PGConnection.connect(PGConfiguration(connectionString: try TestServer.adminURL()), logger: logger)
        defer { probe.close() }
        let pid = connection.backendPID
        var running = false
        for _ in 0..<100 where !running {
            let rows = try probe.query(
                PGStatement("test.activity", "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", prepared: false),
                [Int(pid)])
            running = try rows.singleRow().decode(0, as: Int.self) == 1
            if !running { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(running, "the first thread's statement is running on the server")
        let error = #expect(throws: PGError.self) { try connection.query(PGStatement("test.one", "SELECT 1", prepared: false)) }
        #expect(error?.code == .concurrentUse, "\(String(describing: error))")
        // Once the first thread is done, the connection serves the next one.
        var one: Int?
        for _ in 0..<300 where one == nil {
            one = try? connection.query(PGStatement("test.one", "SELECT 1", prepared: false)).singleRow().decode(0, as: Int.self)
            if one == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(one == 1)
    }

    @Test("statement_timeout cancels a slow statement")
    func statementTimeout() async throws {
        let pool = try pool(1, statementTimeout: 200)
        defer { pool.close() }
        try await pool.withConnection { try $0.query(PGStatement("test.one", "SELECT 1")) }  // connect first
        let started = ContinuousClock.now
        let error = await #expect(throws: PGError.self) {
            try await pool.withConnection { try $0.query(PGStatement("test.sleep", "SELECT pg_sleep(30)")) }
        }
        #expect(error?.code == .cancelled)
        #expect(error?.sqlState == "57014")
        #expect(ContinuousClock.now - started < .seconds(15))  // far below the 30 s sleep, even on a loaded machine
        // The connection is still good afterwards.
        let one = try await pool.withConnection { try $0.query(PGStatement("test.one", "SELECT 1")).singleRow().decode(0, as: Int.self) }
        #expect(one == 1)
    }

    @Test("cancelling the task cancels the statement on the server")
    func taskCancellation() async throws {
        let pool = try pool(1)
        defer { pool.close() }
        let observer = try self.pool(1)
        defer { observer.close() }
        try await pool.withConnection { try $0.query(PGStatement("test.one", "SELECT 1")) }  // connect first
        let marker = "reddot-cancel-\(UInt32.random(in: 0...UInt32.max))"
        let running = PGStatement(
            "test.running", "SELECT count(*)::int FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()",
            prepared: false)
        func activeOnServer() async throws -> Int {
            try await observer.withConnection { try $0.query(running, [marker]).singleRow().decode(0, as: Int.self) }
        }
        let started = ContinuousClock.now
        let task = Task {
            try await pool.withConnection { try $0.query(PGStatement("test.sleep", "SELECT pg_sleep(120) -- \(marker)", prepared: false)) }
        }
        // The task is cancelled only once the server runs the statement: what ends it is the
        // server's cancel, not a task cancelled before it started.
        let runningBy = ContinuousClock.now + .seconds(30)
        while try await activeOnServer() == 0, ContinuousClock.now < runningBy { try await Task.sleep(for: .milliseconds(20)) }
        try #require(try await activeOnServer() == 1, "the statement never started on the server")
        task.cancel()
        let result = await task.result
        switch result {
        case .success: Issue.record("the statement ran to completion")
        case .failure(let error as PGError): #expect(error.code == .cancelled && error.sqlState == "57014", "\(error)")
        case .failure(let error): Issue.record("not the server's cancel: \(error)")
        }
        #expect(try await activeOnServer() == 0, "the server no longer runs it")
        // Cut short: the statement sleeps 120 s. (Cancels usually land within milliseconds; on
        // a machine running every suite at once one took 15.9 s, hence no tighter bound.)
        #expect(ContinuousClock.now - started < .seconds(60))
        // The connection is usable again by the next lease.
        let one = try await pool.withConnection { try $0.query(PGStatement("test.one", "SELECT 1")).singleRow().decode(0, as: Int.self) }
        #expect(one == 1)
    }

    @Test("a deadline ends a slow statement with timedOut, cancels it on the server, and keeps the connection")
    func deadlineWhileRunning() async throws {
        let pool = try pool(1)
        defer { pool.close() }
        let pid = try await pool.withConnection { try $0.query(PGStatement("test.pid", "SELECT pg_backend_pid()")).singleRow().decode(0, as: Int32.self) }
        let started = ContinuousClock.now
        let error = await #expect(throws: PGError.self) {
            try await pool.withConnection(deadline: .now + .milliseconds(300)) {
                try $0.query(PGStatement("test.sleep", "SELECT pg_sleep(30)"))
            }
        }
        #expect(error?.code == .timedOut)
        let took = ContinuousClock.now - started
        #expect(took >= .milliseconds(300))
        #expect(took < .seconds(15), "took \(took)")  // far below the 30 s sleep, even on a loaded machine
        // The statement was cancelled on the server (else the connection would stay busy for
        // 30 s and this lease would time out), and the same session serves the next lease.
        let again = try await pool.withConnection(deadline: .now + .seconds(10)) {
            try $0.query(PGStatement("test.pid", "SELECT pg_backend_pid()")).singleRow().decode(0, as: Int32.self)
        }
        #expect(again == pid)
    }

    @Test("a deadline gives up waiting for a busy pool, and for a body that does not return, without losing the connection")
    func deadlineWhileWaitingOrStuck() async throws {
        let pool = try pool(1)
        defer { pool.close() }
        try await pool.withConnection { try $0.query(PGStatement("test.one", "SELECT 1")) }  // connect first
        // A body that blocks outside libpq (a cancel cannot end it) holds the only connection.
        let released = DispatchSemaphore(value: 0)
        let stuck = Task {
            try await pool.withConnection(deadline: .now + .milliseconds(200)) { _ in
                _ = released.wait(timeout: .now() + 60)
            }
        }
        let stuckError = await #expect(throws: PGError.self) { try await stuck.value }
        #expect(stuckError?.code == .timedOut)  // answered while the body still blocks

        let started = ContinuousClock.now
        let waitError = await #expect(throws: PGError.self) {
            try await pool.withConnection(deadline: .now + .milliseconds(300)) { _ in 1 }
        }
        #expect(waitError?.code == .timedOut)
        #expect(waitError?.message.contains("no database connection became free") == true)
        #expect(ContinuousClock.now - started < .seconds(15))

        // Once the body returns, its connection serves the next lease.
        released.signal()
        let one = try await pool.withConnection(deadline: .now + .seconds(30)) {
            try $0.query(PGStatement("test.one", "SELECT 1")).singleRow().decode(0, as: Int.self)
        }
        #expect(one == 1)
        #expect(pool.statistics.open == 1)
    }

    @Test("the pool leases a connection to one task at a time, on its own thread")
    func poolLeasing() async throws {
        let pool = try pool(3)
        defer { pool.close() }
        let observations = try await withThrowingTaskGroup(of: (Int32, Bool).self) { group in
            for _ in 0..<30 {
                group.addTask {
                    try await pool.withConnection { connection in
                        let onConnectionQueue = PGPool.isOnConnectionQueue
                        let pid = try connection.query(PGStatement("test.pid_sleep", "SELECT pg_backend_pid() FROM pg_sleep(0.01)"))
                            .singleRow().decode(0, as: Int32.self)
                        return (pid, onConnectionQueue)
                    }
                }
            }
            var all: [(Int32, Bool)] = []
            for try await item in group { all.append(item) }
            return all
        }
        #expect(observations.count == 30)
        #expect(Set(observations.map(\.0)).count <= 3)
        #expect(observations.allSatisfy { $0.1 })
        #expect(!PGPool.isOnConnectionQueue)
        #expect(pool.statistics.open <= 3)
    }

    @Test("a connection left inside a transaction is not reused")
    func brokenLeaseIsDiscarded() async throws {
        let pool = try pool(1)
        defer { pool.close() }
        let first = try await pool.withConnection { connection in
            try connection.execute(script: "BEGIN", name: "test.begin")
            return connection.backendPID
        }
        let pid = try await pool.withConnection { $0.backendPID }
        #expect(pid != first)
        // The abandoned session is closed, not left idle in a transaction on the server. The
        // close and the backend's exit are asynchronous: allow a loaded CI machine 10 s.
        var lingering = 1
        for _ in 0..<500 where lingering > 0 {
            try await Task.sleep(for: .milliseconds(20))
            lingering = try await pool.withConnection { connection in
                try connection.query(
                    PGStatement("test.session_exists", "SELECT count(*)::int FROM pg_stat_activity WHERE pid = $1"), [first]
                ).singleRow().decode(0, as: Int.self)
            }
        }
        #expect(lingering == 0)
    }

    @Test("LISTEN/NOTIFY delivers notifications and survives a dropped connection")
    func listenNotify() async throws {
        let admin = try TestServer.adminURL()
        let channel = "reddot_test_\(UInt32.random(in: 0...UInt32.max))"
        let listener = try PGListener(configuration: PGConfiguration(connectionString: admin), channels: [channel], logger: logger)
        let running = RunningListener(listener)
        defer { running.stop() }
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .connected)

        let pool = try pool(1)
        defer { pool.close() }
        try await pool.withConnection { connection in
            try connection.query(PGStatement("test.notify", "SELECT pg_notify($1, $2)"), [channel, "hello:1"])
        }
        guard case .notification(let notification) = await events.next() else {
            Issue.record("expected a notification")
            return
        }
        #expect(notification.channel == channel)
        #expect(notification.payload == "hello:1")

        // Kill the listener's backend: it reconnects, says so, and receives again.
        try await pool.withConnection { connection in
            try connection.query(
                PGStatement(
                    "test.kill_listener",
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1",
                    prepared: false),
                ["LISTEN \(channel)"])
        }
        #expect(await events.next() == .disconnected)
        #expect(await events.next() == .connected)
        try await pool.withConnection { connection in
            try connection.query(PGStatement("test.notify", "SELECT pg_notify($1, $2)"), [channel, "again"])
        }
        guard case .notification(let again) = await events.next() else {
            Issue.record("expected a notification after reconnecting")
            return
        }
        #expect(again.payload == "again")
    }

    @Test("an invalid channel name is refused before any SQL")
    func invalidChannel() throws {
        #expect(throws: PGError.self) {
            try PGListener(configuration: PGConfiguration(), channels: ["bad; DROP"], logger: logger)
        }
    }
}

@Suite("libpq's connection conventions")
struct LibPQConventionTests {
    let logger = TestServer.logger

    func serverPort() throws -> String {
        let admin = try TestServer.adminURL()
        guard let port = admin.split(separator: ":").last?.split(separator: "/").first else {
            throw TestSetupError("cannot read the port of \(admin)")
        }
        return String(port)
    }

    func connectedUser(_ configuration: PGConfiguration) async throws -> String {
        let pool = PGPool(configuration: configuration, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        return try await pool.withConnection { connection in
            try connection.query(PGStatement("test.user", "SELECT current_user::text")).singleRow().decode(0, as: String.self)
        }
    }

    @Test("an empty connection string uses the PG* variables, as psql does")
    func environmentVariables() async throws {
        // deploy/test.sh exports PGHOST, PGPORT, PGUSER and PGDATABASE for the test server.
        #expect(ProcessInfo.processInfo.environment["PGPORT"] != nil)
        #expect(try await connectedUser(PGConfiguration(connectionString: "")) == ProcessInfo.processInfo.environment["PGUSER"])
    }

    @Test("a password comes from a passfile (.pgpass format), never from RedDot")
    func passfile() async throws {
        let port = try serverPort()
        let password = "pw-\(UInt32.random(in: 0...UInt32.max))"
        let admin = PGPool(configuration: PGConfiguration(connectionString: try TestServer.adminURL()), maximumConnections: 1, logger: logger)
        defer { admin.close() }
        try await admin.withConnection { connection in
            try connection.execute(
                script: """
                    DO $$ BEGIN
                      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reddot_password') THEN
                        CREATE ROLE reddot_password LOGIN;
                      END IF;
                    END $$
                    """, name: "test.create_role")
            // ALTER ROLE takes no parameters; the password is made of safe characters only.
            try connection.execute(script: "ALTER ROLE reddot_password PASSWORD '\(password)'", name: "test.set_password")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-pgpass-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let passfile = directory.appendingPathComponent("pgpass")
        try "127.0.0.1:\(port):*:reddot_password:\(password)\n".write(to: passfile, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passfile.path)

        let base = "postgresql://reddot_password@127.0.0.1:\(port)/postgres"
        #expect(try await connectedUser(PGConfiguration(connectionString: "\(base)?passfile=\(passfile.path)")) == "reddot_password")
        let empty = directory.appendingPathComponent("empty")
        try "".write(to: empty, atomically: true, encoding: .utf8)
        let error = await #expect(throws: PGError.self) {
            try await connectedUser(PGConfiguration(connectionString: "\(base)?passfile=\(empty.path)"))
        }
        #expect(error?.code == .connectionFailed)
        #expect(error?.message.contains(password) == false)
    }

    @Test("a multi-host URI falls through to a host that answers")
    func multiHost() async throws {
        let port = try serverPort()
        let uri = "postgresql://127.0.0.1:1,127.0.0.1:\(port)/postgres?target_session_attrs=read-write&connect_timeout=3"
        let user = try await connectedUser(PGConfiguration(connectionString: uri))
        #expect(!user.isEmpty)
    }
}
