import BadgeAPI
import LibPQ
import Testing

/// `reddot serve`'s settings: flag ranges, variables, defaults; no server or database needed.
@Suite("Serve settings")
struct ServeSettingsTests {
    let database = PGConfiguration(connectionString: "dbname=x")

    func configurationError(_ environment: [String: String], _ settings: ServeSettings = ServeSettings.defaults) -> String? {
        do {
            _ = try settings.configuration(database: database, environment: environment, openFileLimit: nil)
            return nil
        } catch {
            return error.message
        }
    }

    @Test("each flag out of range is named in a sentence")
    func flagProblems() {
        #expect(ServeSettings.defaults.flagProblem == nil)
        var settings = ServeSettings.defaults
        settings.port = 70_000
        #expect(settings.flagProblem == "--port takes 0…65535")
        settings = ServeSettings.defaults
        settings.heartbeatSeconds = 1e300
        #expect(settings.flagProblem == "--heartbeat-seconds takes a number from 0.1 to 3600")
        settings.heartbeatSeconds = 0.0001
        #expect(settings.flagProblem == "--heartbeat-seconds takes a number from 0.1 to 3600", "a heartbeat loop, not a stream")
        settings = ServeSettings.defaults
        settings.idleTimeoutSeconds = 0.5
        #expect(settings.flagProblem == "--idle-timeout-seconds takes 0 (never) or 1…86400")
        settings.idleTimeoutSeconds = 0
        #expect(settings.flagProblem == nil)
        settings.maximumStreamsPerUser = 0
        #expect(settings.flagProblem == "--max-streams-per-user takes 1…10000000")
        settings = ServeSettings.defaults
        settings.replicaPollMilliseconds = 0
        #expect(settings.flagProblem == "--replica-poll-ms takes 5…10000")
    }

    @Test("without flags or variables, the defaults of reddot serve")
    func defaults() throws {
        let configuration = try ServeSettings.defaults.configuration(database: database, environment: [:], openFileLimit: 1_024)
        #expect(configuration.api.host == "0.0.0.0")
        #expect(configuration.api.port == 8080)
        #expect(configuration.poolConnections == 8)
        #expect(configuration.treeCacheBytes == 64 << 20)
        #expect(configuration.limits.maximumConnections == 1_024 - 8 - 128)
        #expect(configuration.database.statementTimeoutMilliseconds == 2_000)
        #expect(configuration.database.applicationName == "reddot-serve")
        #expect(configuration.listenerDatabase.statementTimeoutMilliseconds == nil)
        #expect(configuration.auth.hs256Secret == nil)
        #expect(configuration.replicaDatabase == nil)
    }

    @Test("a replica: its URL with the requests' statement timeout, its poll interval, from a flag or variable")
    func replica() throws {
        var configuration = try ServeSettings.defaults.configuration(
            database: database, environment: ["REDDOT_REPLICA_DATABASE_URL": "postgresql://standby/app"], openFileLimit: nil)
        let replica = try #require(configuration.replicaDatabase)
        #expect(replica.connectionString == "postgresql://standby/app")
        #expect(replica.statementTimeoutMilliseconds == 2_000)
        #expect(replica.applicationName == "reddot-serve-replica")
        #expect(configuration.replicaPollInterval == .milliseconds(50))
        var settings = ServeSettings.defaults
        settings.replicaDatabaseURL = "postgresql://other/app"
        settings.replicaPollMilliseconds = 20
        configuration = try settings.configuration(
            database: database, environment: ["REDDOT_REPLICA_DATABASE_URL": "postgresql://standby/app", "REDDOT_REPLICA_POLL_MS": "500"],
            openFileLimit: nil)
        #expect(configuration.replicaDatabase?.connectionString == "postgresql://other/app")
        #expect(configuration.replicaPollInterval == .milliseconds(20))
        #expect(configurationError(["REDDOT_REPLICA_POLL_MS": "1"]) == "REDDOT_REPLICA_POLL_MS '1' is not a number from 5 to 10000")
    }

    @Test("variables apply when the flags are left out, and a flag wins")
    func variables() throws {
        let environment = [
            "REDDOT_HTTP_PORT": "9000", "REDDOT_HTTP_POOL_SIZE": "3", "REDDOT_TREE_CACHE_MB": "0", "REDDOT_HTTP_MAX_CONNECTIONS": "0",
            "REDDOT_HTTP_IDLE_TIMEOUT_SECONDS": "0", "REDDOT_JWT_AUDIENCE": "aud", "REDDOT_HTTP_HOST": "",
        ]
        var settings = ServeSettings.defaults
        settings.poolSize = 5
        let configuration = try settings.configuration(database: database, environment: environment, openFileLimit: 1_024)
        #expect(configuration.api.port == 9000)
        #expect(configuration.api.host == "0.0.0.0")
        #expect(configuration.poolConnections == 5)
        #expect(configuration.treeCacheBytes == 0)
        #expect(configuration.limits.maximumConnections == nil)
        #expect(configuration.limits.idleTimeout == nil)
        #expect(configuration.auth.audience == "aud")
    }

    @Test("a bad variable or JWKS file is refused with a sentence naming it")
    func refusals() {
        #expect(configurationError(["REDDOT_HTTP_PORT": "http"]) == "REDDOT_HTTP_PORT 'http' is not a port number")
        #expect(configurationError(["REDDOT_HTTP_POOL_SIZE": "0"]) == "REDDOT_HTTP_POOL_SIZE '0' is not a number from 1 to 256")
        #expect(configurationError(["REDDOT_TREE_CACHE_MB": "-1"]) == "REDDOT_TREE_CACHE_MB '-1' is not a number from 0 to 65536")
        #expect(
            configurationError(["REDDOT_HTTP_IDLE_TIMEOUT_SECONDS": "0.5"]) == "REDDOT_HTTP_IDLE_TIMEOUT_SECONDS takes 0 (never) or 1…86400")
        #expect(
            configurationError(["REDDOT_HTTP_MAX_STREAMS": "many"])
                == "REDDOT_HTTP_MAX_STREAMS 'many' is not a number from 1 to 10000000")
        #expect(configurationError(["REDDOT_JWT_JWKS_FILE": "/nonexistent/jwks.json"]) == "cannot read the JWKS file /nonexistent/jwks.json")
    }

    @Test("a text setting skips empty values")
    func setting() {
        #expect(ServeSettings.setting("", "V", ["V": "variable"]) == "variable")
        #expect(ServeSettings.setting("flag", "V", ["V": "variable"]) == "flag")
        #expect(ServeSettings.setting(nil, "V", ["V": ""]) == nil)
    }
}
