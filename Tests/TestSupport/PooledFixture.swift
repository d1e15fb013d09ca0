public import LibPQ

/// A test fixture with a pool on its database; it gets one-statement helpers for fixed test SQL
/// (never input), each on a connection of its own.
public protocol PooledFixture {
    /// The pool on the fixture's database.
    var pool: PGPool { get }
}

extension PooledFixture {
    /// The first column of the one row that `sql` returns; throws when the query fails or does
    /// not return exactly one row.
    public func scalar<T: PGDecodable>(_ sql: String, _ parameters: [any PGBindable] = [], as type: T.Type = T.self) async throws -> T {
        try await pool.withConnection { connection in
            try connection.query(PGStatement("test.scalar", sql, prepared: false), parameters).singleRow().decode(0, as: T.self)
        }
    }

    /// Every row that `sql` returns, as text; throws when the query fails.
    public func rows(_ sql: String, _ parameters: [any PGBindable] = []) async throws -> [[String?]] {
        try await pool.withConnection { connection in
            try connection.query(PGStatement("test.rows", sql, prepared: false), parameters).rows.map(\.values)
        }
    }

    /// Runs `sql`, dropping what it returns; throws when it fails.
    public func execute(_ sql: String, _ parameters: [any PGBindable] = []) async throws {
        try await pool.withConnection { connection in
            _ = try connection.query(PGStatement("test.execute", sql, prepared: false), parameters)
        }
    }
}
