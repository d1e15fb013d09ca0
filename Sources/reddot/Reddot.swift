import ArgumentParser
import RedDotCommandLine

/// The one RedDot executable; each subcommand is a thin layer over the library modules.
@main
struct Reddot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reddot",
        abstract: "RedDot: hierarchical red dots and number badges for millions of users.",
        discussion: """
            Producers publish events to Kafka; RedDot keeps every user's badge tree in PostgreSQL \
            (a parent's count is the sum of its subtree) and answers it over HTTP.

            The database comes from --database-url, else REDDOT_DATABASE_URL, else libpq's own PG* \
            variables and ~/.pgpass (as psql does).
            """,
        subcommands: [
            DevCommand.self, MigrateCommand.self, BadgesCommand.self, IngestCommand.self, RollupCommand.self, ServeCommand.self, RunCommand.self,
            VerifyCommand.self, DeadLetterCommand.self, UsersCommand.self, WebhooksCommand.self, PushCommand.self, PublishCommand.self, TokenCommand.self, WatchCommand.self, BenchCommand.self,
        ]
    )
}
