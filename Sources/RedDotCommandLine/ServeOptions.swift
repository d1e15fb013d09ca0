public import ArgumentParser
public import BadgeAPI
import Foundation
public import Logging
public import Prometheus
public import ServiceLifecycle

/// The query service's settings, shared by `serve` and `run`: `ServeSettings` (where each is
/// declared) and how they become the application and its services.
public struct ServeOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    /// Every query-service flag.
    @OptionGroup public var settings: ServeSettings

    public static var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// The application and the services it needs (the change hub), ready for one service group.
    ///
    /// - Throws: `ExitCode` 64 with a sentence for invalid auth settings, a bad variable or an
    ///   unreadable JWKS file. `kafka`: the events topic's brokers and name when the process has
    ///   them (`reddot run`), the defaults of `--publish-brokers` and `--publish-topic`.
    public func makeServices(
        database: DatabaseOptions, registry: PrometheusCollectorRegistry, logger: Logger,
        kafka events: (brokers: String, topic: String)? = nil, forceLiveView: Bool = false,
        onRunning: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws -> (application: any Service, services: [any Service]) {
        do {
            let configuration = try settings.configuration(
                database: database.configuration(), environment: Self.environment, forceLiveView: forceLiveView)
            let publisher = try settings.publisher(
                events: events, defaultTopic: KafkaOptions.defaultTopic, environment: Self.environment, logger: logger)
            let built = try await BadgeAPI.buildApplication(
                configuration: configuration, publisher: publisher, metrics: registry, logger: logger, onRunning: onRunning)
            if configuration.auth.insecureNoAuth {
                logger.warning("authentication is OFF (--insecure-no-auth): every request may read and clear every user's badges; never run this in production")
            }
            return built
        } catch let error as ServeSettingsError {
            throw fail(error.message, code: ExitCodes.usage)
        } catch let error as AuthSetupError {
            throw fail(error.description, code: ExitCodes.usage)
        }
    }
}
