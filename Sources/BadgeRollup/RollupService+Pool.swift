public import LibPQ
public import Logging
import BadgeStore

extension RollupService {
    /// Rollup workers on a pool of their own, as `reddot rollup` runs them: one connection per
    /// worker and one for the sweeper, a 60 s statement timeout, BadgeStore's recommended session
    /// settings, and the application name reddot-rollup.
    public init(database: PGConfiguration, configuration: RollupConfiguration, logger: Logger) {
        var database = database
        database.statementTimeoutMilliseconds = 60_000
        database.sessionSettings += BadgeStore.recommendedSessionSettings
        database.applicationName = "reddot-rollup"
        let pool = PGPool(configuration: database, maximumConnections: configuration.workers + 1, logger: logger)
        self.init(pool: pool, configuration: configuration, logger: logger)
    }
}
