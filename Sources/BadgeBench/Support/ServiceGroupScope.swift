import Logging
import ServiceLifecycle

/// Runs `services` in a service group of their own while `body` runs, then shuts them down
/// gracefully and waits for them; returns what `body` returned, or throws what it threw.
///
/// With `report`, the group's end is handed to it (nil, or the error as text) instead of being
/// thrown; `onExit` runs when the group has ended, either way.
func withServiceGroup<T: Sendable>(
    _ services: [any Service], logger: Logger, report: (@Sendable (String?) -> Void)? = nil,
    onExit: @escaping @Sendable () -> Void = {}, _ body: () async throws -> T
) async throws -> T {
    let serviceGroup = ServiceGroup(
        configuration: ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask {
            defer { onExit() }
            guard let report else { return try await serviceGroup.run() }
            do {
                try await serviceGroup.run()
                report(nil)
            } catch {
                report("\(error)")
            }
        }
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await body())
        } catch {
            outcome = .failure(error)
        }
        await serviceGroup.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return try outcome.get()
    }
}
