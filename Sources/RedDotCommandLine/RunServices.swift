import ArgumentParser
import BadgeCore
import BadgeIngest
import Foundation
import LibPQ
public import Logging
import RdKafka
public import ServiceLifecycle

/// Runs services in one group until SIGTERM or SIGINT drains them; maps failures to exit codes.
public func runServices(_ services: [any Service], logger: Logger) async throws {
    do {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    } catch let error as KafkaError {
        throw fail("\(error)", code: error.code == .configuration ? ExitCodes.usage : ExitCodes.failure)
    } catch let error as ExitCode {
        throw error
    } catch {
        let text = (error as? PGError)?.debugDescription ?? "\(error)"  // the server's words, for the operator
        if text.contains("Address already in use") || text.contains("EADDRINUSE") {
            throw fail("cannot listen: the address is already in use (\(text)); choose another --port", code: ExitCodes.unavailable)
        }
        throw fail(text, code: ExitCodes.failure)
    }
}
