import ArgumentParser
import BadgeStore
import Foundation
import LibPQ
import RedDotCommandLine

/// `reddot migrate`: the ops migration tool.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply and inspect RedDot's schema migrations.",
        discussion: """
            Migrations are the numbered SQL files NNNN_name.sql of the migrations directory, applied \
            in order, each in its own transaction (unless a line of the file is exactly \
            '-- reddot:no-transaction', for CREATE INDEX CONCURRENTLY; such a file holds one \
            statement). The history, with each file's SHA-256, is kept in reddot_schema_migrations. \
            An advisory lock lets one migrator work at a time; the others wait (--lock-wait) and \
            then find the files applied. 'up' and 'status' also write a note on stderr when RedDot's \
            keys compare text through the database's collation (it is not C, and migration 32, \
            which declares them bytewise, is not applied or left a layout partitioned by user as \
            it was): its ids index faster byte by byte. The exit code does not change. 'up \
            --online' applies a migration that has an online form (32) without locking tables \
            while their indexes are rebuilt (see 'reddot migrate up --help'); 'status' notes the \
            indexes such a run built that still wait for its swap.

            Exit codes:
              0   success (up: applied or nothing to do; status: printed; verify: history matches)
              1   a migration's SQL failed; it was rolled back (schema and history unchanged)
              3   verify --fail-if-pending: some migrations are not applied yet
              64  bad arguments
              65  the files do not match the history: an applied file was edited or is missing, \
            a new file is numbered below an applied one, or a file is misnamed
              69  the database cannot be reached
              75  temporary: another migrator held the lock past --lock-wait, or a migration waited \
            past --lock-timeout for a table lock; nothing of that file was applied, run again
            """,
        subcommands: [Up.self, Status.self, Verify.self, Plan.self]
    )

    struct Options: ParsableArguments {
        @OptionGroup var database: DatabaseOptions

        @Option(
            name: .customLong("migrations"),
            help: ArgumentHelp(
                "The migrations directory. Default: REDDOT_MIGRATIONS_DIR, else ./migrations, else the one installed beside the executable (../share/reddot/migrations).",
                valueName: "dir"))
        var directory: String?
        @Option(name: .customLong("lock-wait"), help: "Seconds to wait for another migrator to finish; 0 waits forever.")
        var lockWaitSeconds: Double = 60
        @Option(name: .customLong("lock-timeout"), help: "Seconds a migration may wait for a table lock (lock_timeout) before giving up; 0 waits forever.")
        var lockTimeoutSeconds: Double = 10

        /// The longest lock wait PostgreSQL takes: 2147483647 ms.
        static let maximumLockSeconds = Double(Int32.max / 1000)

        func validate() throws {
            // PostgreSQL's lock_timeout is an int of milliseconds; the bound also keeps
            // Int(seconds * 1000) from trapping on 1e300 or inf.
            guard (0...Self.maximumLockSeconds).contains(lockWaitSeconds), (0...Self.maximumLockSeconds).contains(lockTimeoutSeconds) else {
                throw ValidationError("--lock-wait and --lock-timeout take seconds from 0 to \(Int(Self.maximumLockSeconds))")
            }
        }

        /// Loads the files and runs `body` with a migrator on one connection; maps every failure
        /// to its documented exit code and a sentence on stderr.
        func run<T: Sendable>(_ body: @escaping @Sendable (Migrator, PGConnection) throws -> T) async throws -> T {
            let logger = try database.logger(label: "reddot.migrate")
            do {
                let files = try MigrationFile.load(from: try resolveDirectory())
                return try await Migrator.withConnection(
                    files: files, database: database.configuration(), lockWaitSeconds: lockWaitSeconds, lockTimeoutSeconds: lockTimeoutSeconds,
                    logger: logger, body)
            } catch let error as MigrationError {
                throw fail(error.message, code: error.exitCode)
            } catch let error as PGError {
                throw error.commandFailure()
            }
        }

        /// Writes `note` (the database's collation, see `Migrator.collationNote`) on stderr.
        static func printNote(_ note: String?) {
            guard let note else { return }
            FileHandle.standardError.write(Data("reddot migrate: \(note)\n".utf8))
        }

        func resolveDirectory() throws -> URL {
            try Self.resolveDirectory(directory)
        }

        /// The migrations directory (`MigrationDirectory.resolve`, from `explicit`, the variable or
        /// the places it looks in). Fails with exit 65 and a sentence when none exists.
        static func resolveDirectory(_ explicit: String?) throws -> URL {
            do {
                return try MigrationDirectory.resolve(explicit, environment: ProcessInfo.processInfo.environment, executable: CommandLine.arguments[0])
            } catch {
                throw fail(error.message, code: error.exitCode)
            }
        }
    }

    /// `--online`, shared by `up` and `plan`.
    struct OnlineOption: ParsableArguments {
        @Flag(
            name: .customLong("online"),
            help: "Apply a migration that has an online form through it (migration 32): its indexes are built first with CREATE INDEX CONCURRENTLY while ingest, the rollup and the API go on, then swapped in one short transaction. Takes longer in all; locks tables for catalog changes only.")
        var online = false
    }

    struct Up: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply every pending migration, in order.",
            discussion: """
                With --online, a migration that has an online form (32, which declares RedDot's \
                keys bytewise: as a file it locks every table while their indexes are rebuilt, about \
                2.5 s per million retained events) builds its new indexes first without blocking \
                writers, logging each, then swaps them in a transaction that changes only the \
                catalog (in attempts that wait at most 1 s each for the tables' locks, for up to \
                --lock-timeout in all, so that writers never queue behind it for long). A run that stops keeps the indexes it built \
                (reddot_bytewise_…) and the next one builds only the rest (applying 32 without \
                --online drops them). An index of a form the \
                online form does not rebuild makes it exit 1 naming it, with nothing applied. \
                'reddot migrate plan --online' prints the statements.
                """)
        @OptionGroup var options: Options
        @OptionGroup var online: OnlineOption

        func run() async throws {
            let online = self.online.online
            let applied = try await options.run { migrator, connection in
                // The note never fails a command that did its work.
                (try migrator.up(on: connection, online: online).map(\.fileName), migrator.files.count, try? Migrator.collationNote(on: connection))
            }
            print(MigrationStatus.upReport(applied: applied.0, fileCount: applied.1))
            Options.printNote(applied.2)
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every migration as applied, pending, modified, missing or out of order.",
            discussion: "Exits 0 even when migrations are pending; 65 when the files do not match the history.")
        @OptionGroup var options: Options
        @Flag(help: "Print JSON: {\"applied\", \"pending\", \"problems\", \"migrations\": [{\"version\", \"file\", \"state\", \"checksum\", \"applied_checksum\", \"applied_at\"}]}.")
        var json = false

        func run() async throws {
            let (status, note, waiting) = try await options.run { migrator, connection in
                (try migrator.status(on: connection), try? Migrator.collationNote(on: connection),
                 try? OnlineCollationChange.waitingNote(on: connection))
            }
            if json { try printJSON(status) } else { print(status.text) }
            Options.printNote(note)
            Options.printNote(waiting)
            if status.problemCount > 0 { throw ExitCode(ExitCodes.dataError) }
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that every applied migration's file is present and unchanged (by checksum).")
        @OptionGroup var options: Options
        @Flag(name: .customLong("fail-if-pending"), help: "Also exit 3 when migrations wait to be applied.")
        var failIfPending = false

        func run() async throws {
            let failIfPending = self.failIfPending
            let status = try await options.run { migrator, connection in
                try migrator.verify(on: connection, failIfPending: failIfPending)
            }
            print(status.verifiedSummary)
        }
    }

    struct Plan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the SQL that 'up' would run now, without running it.")
        @OptionGroup var options: Options
        @OptionGroup var online: OnlineOption

        func run() async throws {
            let online = self.online.online
            print(try await options.run { migrator, connection in try migrator.plan(on: connection, online: online) }, terminator: "")
        }
    }
}
