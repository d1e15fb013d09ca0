import ArgumentParser
import BadgeAPI
import Foundation
import Logging
import Prometheus
import RedDotCommandLine
import ServiceLifecycle

/// `reddot serve`: the query service.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Answer users' badge trees over HTTP (the query service).",
        discussion: """
            Routes: GET /v1/users/{user}/badges (?path=, ?depth=, ?paths=a,b, long-poll \
            ?wait=30s&since=VERSION), POST /v1/users/{user}/badges/clear, GET \
            /v1/users/{user}/badges/stream (Server-Sent Events), POST /v1/events (with --publish-brokers), \
            /healthz, /readyz, /metrics, /openapi.yaml.

            Auth: Authorization: Bearer <JWT>, HS256 (--jwt-hs256-secret) or RS256/ES256 keys of a \
            JWKS file (--jwt-jwks-file); exp required, nbf/aud/iss checked. A token reads and \
            clears only its own sub's tree; scope reddot:admin acts for any user and publishes.

            Limits for hostile clients: connections idle or with unfinished requests close after \
            --idle-timeout-seconds; bodies must arrive within --body-timeout-seconds (408); streams \
            and long-polls beyond --max-streams answer 503, beyond --max-streams-per-user 429, both \
            with Retry-After; beyond --max-connections new connections wait.

            SIGTERM or SIGINT: stops accepting, ends the streams, finishes the requests in hand \
            and exits 0. Exit codes: 0 stopped by a signal; 64 bad arguments or auth settings; \
            69 the port is in use; 1 another failure.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var serve: ServeOptions

    func run() async throws {
        let logger = try database.logger(label: "reddot.serve")
        let registry = MetricsSetup.bootstrap()
        let (application, services) = try await serve.makeServices(database: database, registry: registry, logger: logger)
        try await runServices([application] + services, logger: logger)
    }
}
