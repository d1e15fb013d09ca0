public import ArgumentParser
import Foundation
public import LibPQ
import Logging

/// Prints a sentence to stderr and exits with `code`.
public func fail(_ message: String, code: Int32) -> ExitCode {
    FileHandle.standardError.write(Data("reddot: \(message)\n".utf8))
    return ExitCode(code)
}

/// Exit codes shared by the subcommands (sysexits.h values where one fits).
public enum ExitCodes {
    /// A migration's SQL failed (rolled back) or another unexpected failure.
    public static let failure: Int32 = 1
    /// `migrate verify --fail-if-pending` found migrations to apply.
    public static let pending: Int32 = 3
    /// Bad arguments (argument parser's usage errors use it too).
    public static let usage: Int32 = 64
    /// Input data is wrong: migration files that do not match the history, an invalid badge path.
    public static let dataError: Int32 = 65
    /// What the command was asked to act on does not exist (EX_NOINPUT).
    public static let noInput: Int32 = 66
    /// The database cannot be reached.
    public static let unavailable: Int32 = 69
    /// Temporary: a lock was busy; try again later.
    public static let temporaryFailure: Int32 = 75
}

extension PGError {
    /// Prints the sentence for a database error met by a command and gives its exit code.
    public func commandFailure() -> ExitCode {
        let what = code == .connectionFailed ? "cannot connect to the database" : "database error"
        return fail("\(what): \(debugDescription)", code: exitCode)
    }

    /// The exit code for a database error met by a command.
    public var exitCode: Int32 {
        if code == .connectionFailed || code == .connectionLost { return ExitCodes.unavailable }
        return ExitCodes.failure
    }
}
