import BadgeCore
import Foundation
import Testing

@testable import BadgeStore

/// What `reddot migrate` and `reddot verify` print, and where migrate finds its files; no database needed.
@Suite("Migrate and verify output")
struct MigrateVerifyOutputTests {
    @Test("the directory is the flag, else REDDOT_MIGRATIONS_DIR, else a migrations folder found from the working directory")
    func directory() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch.appendingPathComponent("migrations"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let environment = ["REDDOT_MIGRATIONS_DIR": "/from/variable"]
        let executable = "/nowhere/bin/reddot"
        #expect(try MigrationDirectory.resolve("/from/flag", environment: environment, executable: executable).path == "/from/flag")
        #expect(try MigrationDirectory.resolve(nil, environment: environment, executable: executable).path == "/from/variable")
        let found = try MigrationDirectory.resolve(nil, environment: [:], executable: executable, currentDirectory: scratch.path)
        #expect(found.standardizedFileURL == scratch.appendingPathComponent("migrations").standardizedFileURL)
        // An empty flag or variable is not the working directory: the next place is looked in.
        let emptied = try MigrationDirectory.resolve("", environment: ["REDDOT_MIGRATIONS_DIR": ""], executable: executable, currentDirectory: scratch.path)
        #expect(emptied.standardizedFileURL == found.standardizedFileURL)
        // A directory without migration files is refused, not read as a schema with nothing to apply.
        do {
            _ = try MigrationFile.load(from: found)
            Issue.record("a directory without migrations was accepted")
        } catch {
            #expect(error.exitCode == 65)
            #expect(error.message.contains("holds no migration files"), "\(error.message)")
        }
        do {
            _ = try MigrationDirectory.resolve(nil, environment: [:], executable: executable, currentDirectory: "/nowhere")
            Issue.record("a missing directory was accepted")
        } catch {
            #expect(error.exitCode == 65)
            #expect(error.message.hasPrefix("no migrations directory found (looked in /nowhere/migrations, /nowhere/share/reddot/migrations"))
            #expect(error.message.hasSuffix("; pass --migrations DIR or set REDDOT_MIGRATIONS_DIR"))
        }
    }

    @Test("lock waits become whole milliseconds rounded up: a tiny wait is 1 ms, never PostgreSQL's 0 (no limit)")
    func lockMilliseconds() {
        #expect(Migrator.milliseconds(0.0004) == 1)
        #expect(Migrator.milliseconds(0) == 0)
        #expect(Migrator.milliseconds(1.5) == 1_500)
        #expect(Migrator.milliseconds(Double(Int32.max / 1000)) == Int(Int32.max / 1000) * 1000)
        #expect(Migrator.milliseconds(.infinity) == Int(Int32.max) && Migrator.milliseconds(1e300) == Int(Int32.max))
        #expect(Migrator.milliseconds(.nan) == 0)
    }

    @Test("up prints each applied file, then that the schema is current")
    func upReport() {
        #expect(MigrationStatus.upReport(applied: [], fileCount: 3) == "nothing to apply: the schema is current (3 migrations)")
        #expect(
            MigrationStatus.upReport(applied: ["0002_b.sql", "0003_c.sql"], fileCount: 3)
                == "applied 0002_b.sql\napplied 0003_c.sql\nthe schema is current (3 migrations)")
    }

    @Test("verify's summary counts the applied and the pending")
    func verifiedSummary() throws {
        let files = try ["0001_a.sql", "0002_b.sql"].map { try MigrationFile(fileName: $0, contents: Array("SELECT 1;".utf8)) }
        let applied = [Migrator.AppliedMigration(version: 1, fileName: "0001_a.sql", checksum: files[0].checksum, appliedAt: Date())]
        let status = MigrationStatus(files: files, applied: applied)
        #expect(status.verifiedSummary == "ok: 1 applied migration(s) match their files; 1 pending")
    }

    @Test("a mismatch line names the user, the path, and what is stored and recounted")
    func mismatchLine() throws {
        let user = try UserID(validating: "u1")
        let path = try BadgePath(validating: "root.inbox")
        let missing = AggregateMismatch(user: user, path: path, storedCount: nil, storedIcon: nil, expectedCount: 3, expectedIcon: "dot")
        #expect(missing.line == "user 'u1' root.inbox: stored no row; recounted count 3, icon dot")
        let stale = AggregateMismatch(user: user, path: path, storedCount: 2, storedIcon: nil, expectedCount: nil, expectedIcon: nil)
        #expect(stale.line == "user 'u1' root.inbox: stored count 2; recounted no row")
    }

    @Test("the summary and the JSON output carry the report's counts")
    func reportOutput() throws {
        var report = VerifyReport()
        (report.usersChecked, report.mismatches, report.usersWithMismatches, report.usersRepaired) = (10, 3, 2, 2)
        #expect(report.summary(repair: false) == "checked 10 users: 3 mismatched aggregates in 2 users")
        #expect(report.summary(repair: true) == "checked 10 users: 3 mismatched aggregates in 2 users; repaired 2 users")
        let list = AggregateMismatchList()
        let mismatch = AggregateMismatch(
            user: try UserID(validating: "u1"), path: try BadgePath(validating: "root"), storedCount: 1, storedIcon: nil, expectedCount: 2,
            expectedIcon: nil, storedUnseen: 1, expectedUnseen: 2)
        list.append(mismatch)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = String(decoding: try encoder.encode(VerifyOutput(report: report, mismatches: list.all)), as: UTF8.self)
        #expect(json.hasPrefix("{\"mismatches\":[{\"expected_count\":2,\"expected_icon\":null,\"expected_unseen\":2,\"path\":\"root\""))
        #expect(mismatch.line == "user 'u1' root: stored count 1, unseen 1; recounted count 2, unseen 2")
        #expect(json.hasSuffix("\"users_checked\":10,\"users_repaired\":2,\"users_with_mismatches\":2}"))
    }
}
