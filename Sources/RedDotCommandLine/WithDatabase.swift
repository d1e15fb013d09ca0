public import LibPQ
public import Logging

/// Runs `body` on one connection (in a transaction when asked); database failures become exit
/// codes with a sentence.
public func withDatabase<T: Sendable>(
    _ options: DatabaseOptions, logger: Logger, transaction: Bool = false, _ body: @escaping @Sendable (PGConnection) throws -> T
) async throws -> T {
    let pool = PGPool(configuration: options.configuration(), maximumConnections: 1, logger: logger)
    defer { pool.close() }
    do {
        if transaction {
            return try await pool.withTransaction { connection in try body(connection) }
        }
        return try await pool.withConnection(body)
    } catch let error as PGError {
        throw error.commandFailure()
    }
}
