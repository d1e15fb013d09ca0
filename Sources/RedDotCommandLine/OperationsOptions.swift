public import ArgumentParser
import BadgeAPI
public import Logging
public import Prometheus
public import ServiceLifecycle

/// `--metrics-port`: a small HTTP server with /healthz and /metrics, for processes that do not
/// serve the API (ingest, rollup).
public struct OperationsOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Option(name: .customLong("metrics-port"), help: ArgumentHelp("Serve /healthz and /metrics (Prometheus) on this port. Default: REDDOT_METRICS_PORT; none without it.", valueName: "port"))
    public var metricsPort: Int?

    /// The operations server when a port is given.
    ///
    /// - Throws: `ExitCode` 64 with a sentence for a variable that is not a port number.
    public func server(registry: PrometheusCollectorRegistry, logger: Logger) throws -> (any Service)? {
        guard let text = ServeSettings.setting(metricsPort.map(String.init), "REDDOT_METRICS_PORT", ServeOptions.environment) else { return nil }
        guard let port = Int(text), (0...65_535).contains(port) else {
            throw fail("the metrics port '\(text)' is not a port number", code: ExitCodes.usage)
        }
        return OperationsServer.make(port: port, registry: registry, logger: logger)
    }
}
