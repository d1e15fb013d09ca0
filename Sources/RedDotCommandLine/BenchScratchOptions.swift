public import ArgumentParser
import BadgeBench
public import BadgeStore
import Foundation
public import LibPQ
public import Logging

/// The settings of the scratch database every bench runs in, and how its report is printed.
public struct BenchScratchOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Flag(help: "Keep the scratch database (its name is printed).")
    public var keep = false

    @Flag(help: "Print the report as JSON on stdout.")
    public var json = false

    @Option(
        name: .customLong("migrations"),
        help: ArgumentHelp(
            "The migrations directory. Default: REDDOT_MIGRATIONS_DIR, else as 'reddot migrate' finds it.",
            valueName: "dir"))
    public var migrationsDirectory: String?

    /// The migration files of `--migrations` (else where `reddot migrate` finds them).
    public func migrations() throws -> [MigrationFile] {
        do {
            let directory = try MigrationDirectory.resolve(
                migrationsDirectory, environment: ProcessInfo.processInfo.environment, executable: CommandLine.arguments[0])
            return try MigrationFile.load(from: directory)
        } catch {
            throw fail(error.message, code: error.exitCode)
        }
    }

    /// Runs `body` in a fresh scratch database on the server of `database`, migrated with
    /// `files` (see ``BenchScratch``); failures become exit codes with a sentence.
    public func run<T>(
        runID: String, database: DatabaseOptions, migrations files: [MigrationFile], applicationName: String, logger: Logger,
        _ body: (PGConfiguration, String, String) async throws -> T
    ) async throws -> T {
        do {
            return try await BenchScratch.run(
                runID: runID, server: database.configuration(), applicationName: applicationName, migrations: files, keep: keep,
                logger: logger, body)
        } catch let error as BenchScratch.CreateError {
            throw fail(error.description, code: error.underlying.exitCode)
        } catch let error as ExitCode {
            throw error
        } catch let error as PGError {
            throw fail("database error: \(error)", code: error.exitCode)
        } catch {
            throw fail("\(error)", code: ExitCodes.failure)
        }
    }

    /// Prints a report: its text, or with `--json` the report in snake-case JSON.
    public func print(_ report: some Encodable, text: String) throws {
        Swift.print(json ? try BenchScratch.json(report) : text)
    }
}
