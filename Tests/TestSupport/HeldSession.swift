import Dispatch
public import LibPQ

/// Runs `setup` on a session of its own (for example taking a lock) and keeps that session open
/// until `body` returns; then runs `teardown` on it, if given, and closes it.
///
/// The session's statements run on its connection's own thread, which waits (at most a minute)
/// for `body` to finish.
public func withHeldSession<T: Sendable>(
    _ configuration: PGConfiguration, holding setup: String, until teardown: String? = nil,
    _ body: () async throws -> T
) async throws -> T {
    let pool = PGPool(configuration: configuration, maximumConnections: 1, logger: TestServer.logger)
    defer { pool.close() }
    let release = DispatchSemaphore(value: 0)
    let (started, startedContinuation) = AsyncStream<Result<Void, any Error>>.makeStream()
    let holder = Task {
        try await pool.withConnection { connection in
            do {
                try connection.execute(script: setup, name: "test.hold")
            } catch {
                startedContinuation.yield(.failure(error))
                throw error
            }
            startedContinuation.yield(.success(()))
            _ = release.wait(timeout: .now() + 60)
            if let teardown { try connection.execute(script: teardown, name: "test.release") }
        }
    }
    var outcome: Result<Void, any Error> = .failure(TestSetupError("the held session never started"))
    for await result in started {
        outcome = result
        break
    }
    let value: T
    do {
        try outcome.get()
        value = try await body()
    } catch {
        release.signal()
        _ = try? await holder.value
        throw error
    }
    release.signal()
    try await holder.value
    return value
}
