/// Runs `body`, then awaits `tearDown` whether `body` returned or threw (an `async` defer): a test
/// ends only after its servers, consumers and databases are gone, so the next test never meets
/// them and a failed clean-up is seen where it happens.
public func tearingDown<Result>(
    _ tearDown: () async -> Void, _ body: () async throws -> Result
) async throws -> Result {
    let result: Result
    do {
        result = try await body()
    } catch {
        await tearDown()
        throw error
    }
    await tearDown()
    return result
}
