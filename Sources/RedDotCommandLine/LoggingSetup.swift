import ArgumentParser
import Foundation
import LibPQ
public import Logging

/// The process-wide swift-log set-up: stderr, a level from the command line or REDDOT_LOG_LEVEL.
public enum LoggingSetup {
    nonisolated(unsafe) private static var done = false
    /// Logs go to stderr, so stdout carries only a command's answer.
    public static func bootstrapOnce() {
        guard !done else { return }
        done = true
        LoggingSystem.bootstrap { label in StreamLogHandler.standardError(label: label) }
    }

    /// A stderr logger at `levelText` (else `REDDOT_LOG_LEVEL`, else `defaultLevel`).
    ///
    /// - Throws: `ExitCode` 64, with a sentence, for a level that is not a swift-log level (at run
    ///   time, so without argument-parser's usage line).
    public static func logger(label: String, levelText: String?, defaultLevel: Logger.Level) throws -> Logger {
        let environment = ProcessInfo.processInfo.environment["REDDOT_LOG_LEVEL"]
        var level = defaultLevel
        if let text = [levelText, environment].compactMap({ $0 }).first(where: { !$0.isEmpty }) {
            guard let parsed = Logger.Level(rawValue: text.lowercased()) else {
                throw fail("log level '\(text)' is not one of trace, debug, info, notice, warning, error, critical", code: ExitCodes.usage)
            }
            level = parsed
        }
        bootstrapOnce()
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}
