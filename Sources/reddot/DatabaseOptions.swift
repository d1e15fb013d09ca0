import ArgumentParser
import Foundation
import LibPQ
import Logging

/// Options every database-using subcommand shares.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "A libpq connection URI or key=value string. Default: REDDOT_DATABASE_URL, else libpq's PG* variables.",
            valueName: "uri"))
    var databaseURL: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. Default: REDDOT_LOG_LEVEL, else info.")
    var logLevel: String?

    /// The connection settings: the flag, then the environment, then libpq's defaults.
    func configuration(statementTimeoutMilliseconds: Int? = nil) -> PGConfiguration {
        let url = databaseURL ?? ProcessInfo.processInfo.environment["REDDOT_DATABASE_URL"] ?? ""
        return PGConfiguration(connectionString: url, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
    }

    /// A stderr logger at the chosen level (default info).
    func logger(label: String) throws -> Logger {
        try LoggingSetup.logger(label: label, levelText: logLevel, defaultLevel: .info)
    }
}

enum LoggingSetup {
    nonisolated(unsafe) private static var done = false
    /// Logs go to stderr, so stdout carries only a command's answer.
    static func bootstrapOnce() {
        guard !done else { return }
        done = true
        LoggingSystem.bootstrap { label in StreamLogHandler.standardError(label: label) }
    }

    /// A stderr logger at `levelText` (else `REDDOT_LOG_LEVEL`, else `defaultLevel`).
    ///
    /// - Throws: `ValidationError` (exit 64) for a level that is not a swift-log level.
    static func logger(label: String, levelText: String?, defaultLevel: Logger.Level) throws -> Logger {
        let environment = ProcessInfo.processInfo.environment["REDDOT_LOG_LEVEL"]
        var level = defaultLevel
        if let text = [levelText, environment].compactMap({ $0 }).first(where: { !$0.isEmpty }) {
            guard let parsed = Logger.Level(rawValue: text.lowercased()) else {
                throw ValidationError("log level '\(text)' is not one of trace, debug, info, notice, warning, error, critical")
            }
            level = parsed
        }
        bootstrapOnce()
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

/// Prints a sentence to stderr and exits with `code`.
func fail(_ message: String, code: Int32) -> ExitCode {
    FileHandle.standardError.write(Data("reddot: \(message)\n".utf8))
    return ExitCode(code)
}

/// Exit codes shared by the subcommands (sysexits.h values where one fits).
enum ExitCodes {
    /// A migration's SQL failed (rolled back) or another unexpected failure.
    static let failure: Int32 = 1
    /// `migrate verify --fail-if-pending` found migrations to apply.
    static let pending: Int32 = 3
    /// Bad arguments (argument parser's usage errors use it too).
    static let usage: Int32 = 64
    /// Input data is wrong: migration files that do not match the history, an invalid badge path.
    static let dataError: Int32 = 65
    /// The database cannot be reached.
    static let unavailable: Int32 = 69
    /// Temporary: a lock was busy; try again later.
    static let temporaryFailure: Int32 = 75
}

extension PGError {
    /// Prints the sentence for a database error met by a command and gives its exit code.
    func commandFailure() -> ExitCode {
        let what = code == .connectionFailed ? "cannot connect to the database" : "database error"
        return fail("\(what): \(debugDescription)", code: exitCode)
    }

    /// The exit code for a database error met by a command.
    var exitCode: Int32 {
        if code == .connectionFailed || code == .connectionLost { return ExitCodes.unavailable }
        return ExitCodes.failure
    }
}
