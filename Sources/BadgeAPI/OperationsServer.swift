import Hummingbird
public import Logging
public import Prometheus
public import ServiceLifecycle

/// A small HTTP server with `/healthz` and `/metrics`, for the processes that do not serve the
/// API (`reddot ingest`, `reddot rollup`), so that probes and Prometheus reach them too.
public enum OperationsServer {
    /// A service serving the two routes on `host:port`.
    public static func make(host: String = "0.0.0.0", port: Int, registry: PrometheusCollectorRegistry, logger: Logger) -> any Service {
        let router = Router(context: BasicRequestContext.self)
        router.addAPIRoutes(
            [
                APIRoute(.get, "/healthz", access: .open) { _, _ in BadgeAPI.json(status: .ok, "{\"status\":\"ok\"}") },
                APIRoute(.get, "/metrics", access: .open) { _, _ in OperationsController.metricsResponse(registry) },
            ], logger: logger)
        return Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: nil),
            logger: logger)
    }
}
