public import LibPQ

extension Migrator {
    /// Creates the database `name` on the server `connection` reaches (connected to another
    /// database, e.g. `postgres`) unless it exists. `name` must be a plain lower-case identifier
    /// (`[a-z_][a-z0-9_]*`, at most 63 bytes), since `CREATE DATABASE` cannot bind it.
    ///
    /// - Returns: whether it was created.
    /// - Throws: `PGError` with code `.client` when the name is not a plain identifier; any
    ///   error of the server.
    @discardableResult
    public static func createDatabaseIfMissing(named name: String, on connection: PGConnection) throws(PGError) -> Bool {
        let plain = !name.isEmpty && name.utf8.count <= 63
            && name.utf8.first.map { $0 == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) } == true
            && name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        guard plain else {
            throw PGError(code: .client, message: "database name '\(name)' is not a plain lower-case identifier", statement: "migrate.create_database")
        }
        let exists = try connection.query(
            PGStatement("migrate.database_exists", "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", prepared: false),
            [name]
        ).singleRow().decode(0, as: Bool.self)
        guard !exists else { return false }
        _ = try connection.query(PGStatement("migrate.create_database", "CREATE DATABASE \(name)", prepared: false))
        return true
    }
}
