public import ArgumentParser
import BadgeStore
import Foundation
public import LibPQ
public import Logging

/// Options every database-using subcommand shares.
public struct DatabaseOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "A libpq connection URI or key=value string. Default: REDDOT_DATABASE_URL, else libpq's PG* variables.",
            valueName: "uri"))
    public var databaseURL: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. Default: REDDOT_LOG_LEVEL, else info.")
    public var logLevel: String?

    /// Refuses a connection string libpq cannot read (exit 64, with libpq's sentence) before
    /// anything connects: a service would otherwise retry it for ever.
    public func validate() throws {
        let url = databaseURL ?? ProcessInfo.processInfo.environment["REDDOT_DATABASE_URL"] ?? ""
        if !url.isEmpty, let problem = PGConfiguration.connectionStringProblem(url) {
            throw ValidationError("--database-url (else REDDOT_DATABASE_URL) is not a libpq connection URI or key=value string: \(problem)")
        }
    }

    /// The connection settings: the flag, then the environment, then libpq's defaults.
    /// Every session runs with RedDot's session settings (`BadgeStore.recommendedSessionSettings`:
    /// no JIT), as the services' own do: the push and webhook senders, `verify`, the change feed
    /// and the one-shot commands alike (a session without them once compiled the feed's read
    /// every round, hundreds of ms each).
    public func configuration(statementTimeoutMilliseconds: Int? = nil) -> PGConfiguration {
        let url = databaseURL ?? ProcessInfo.processInfo.environment["REDDOT_DATABASE_URL"] ?? ""
        var configuration = PGConfiguration(connectionString: url, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
        configuration.sessionSettings += BadgeStore.recommendedSessionSettings
        return configuration
    }

    /// A stderr logger at the chosen level (default info).
    public func logger(label: String) throws -> Logger {
        try LoggingSetup.logger(label: label, levelText: logLevel, defaultLevel: .info)
    }
}
