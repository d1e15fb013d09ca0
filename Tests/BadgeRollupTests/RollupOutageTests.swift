import BadgeCore
import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
import ServiceLifecycle
import TestSupport
import Testing

/// The rollup's database goes away (its sessions end, new ones are refused) and comes back.
@Suite("The rollup worker when its database goes away", .serialized)
struct RollupOutageTests {
    @Test("while the database refuses connections the workers retry with growing pauses, and they catch up when it is back")
    func refusedThenBack() async throws {
        try await RollupFixture.with { fixture in
            let alice = user("alice")
            let service = RollupService(
                pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "2", "--expiry-interval-ms", "200"]),
                logger: TestServer.logger)
            try await fixture.withRollup([service]) {
                try await fixture.ingest([BadgeMutation(user: alice, path: path("root.inbox.a"), operation: .set(count: 1, icon: nil))])
                try await fixture.waitForEmptyQueue()

                try await fixture.database.beginOutage()
                do {
                    let before = service.failedTransactions
                    try await Task.sleep(for: .seconds(6))
                    let failures = service.failedTransactions - before
                    // Three loops (two workers, the sweeper) pausing 100 ms doubling to 5 s fail
                    // about 7 times each in 6 s; a loop without a pause fails thousands of times.
                    #expect(failures >= 3, "the workers never noticed the database went away")
                    #expect(failures <= 45, "\(failures) failed transactions in 6 s")
                } catch {
                    try? await fixture.database.endOutage()
                    throw error
                }
                try await fixture.database.endOutage()

                try await fixture.ingest([BadgeMutation(user: alice, path: path("root.inbox.b"), operation: .set(count: 2, icon: nil))])
                try await fixture.waitForEmptyQueue()
                #expect(try await fixture.store.tree(for: alice).tree?.count == 3)
            }
        }
    }

    @Test("graceful shutdown does not wait out a retry pause while the database is away")
    func shutdownDuringPause() async throws {
        try await RollupFixture.with { fixture in
            let service = RollupService(
                pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "1"]), logger: TestServer.logger)
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [service], gracefulShutdownSignals: [], cancellationSignals: [], logger: TestServer.logger))
            let running = Task { try await group.run() }
            try await fixture.database.beginOutage()
            do {
                // After 7 s of failures the worker's next pause is 5 s. Shut down just as it
                // starts one, so that waiting the pause out would take 5 s.
                try await Task.sleep(for: .seconds(7))
                let failures = service.failedTransactions
                #expect(failures >= 6)
                let waitingForFailure = ContinuousClock.now
                while service.failedTransactions == failures, ContinuousClock.now - waitingForFailure < .seconds(30) {
                    try await Task.sleep(for: .milliseconds(5))
                }
                let shutdownStarted = ContinuousClock.now
                await group.triggerGracefulShutdown()
                try await running.value
                let took = ContinuousClock.now - shutdownStarted
                #expect(took < .seconds(3.5), "graceful shutdown took \(took)")
            } catch {
                await group.triggerGracefulShutdown()
                _ = try? await running.value
                try? await fixture.database.endOutage()
                throw error
            }
            try await fixture.database.endOutage()
        }
    }
}
