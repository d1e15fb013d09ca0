import Metrics
public import Prometheus

/// Prometheus for every long-running command; the registry `/metrics` shows.
public enum MetricsSetup {
    nonisolated(unsafe) private static var registry: PrometheusCollectorRegistry?

    public static func bootstrap() -> PrometheusCollectorRegistry {
        if let registry { return registry }
        let created = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: created))
        registry = created
        return created
    }
}
