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

extension Migrator {
    /// A note for the operator when RedDot's keys compare text through a locale library: the
    /// connected database's default collation is ICU's, or libc's with an `LC_COLLATE` other
    /// than `C` or `POSIX` (even `C.UTF-8`), and its keys take it (migration 32, which declares
    /// them `COLLATE "C"`, is not applied, or left a layout partitioned by user as it was). Nil
    /// when they compare bytes: declared so, or the database's own collation (libc `C`/`POSIX`,
    /// or PostgreSQL 17's builtin provider). RedDot works either way, but every index insert
    /// and sort of its ids is slower (see deploy/README.md, "Creating the database").
    public static func collationNote(on connection: PGConnection) throws(PGError) -> String? {
        let row = try connection.query(
            PGStatement(
                "migrate.collation",
                """
                SELECT datlocprovider::text, datcollate, coalesce((
                    SELECT attcollation = 'pg_catalog."C"'::regcollation FROM pg_attribute
                    WHERE attrelid = to_regclass('badge_aggregate') AND attname = 'user_id'), false)
                FROM pg_database WHERE datname = current_database()
                """,
                prepared: false)
        ).singleRow()
        let provider = try row.decode(0, as: String.self)
        let collate = try row.decode(1, as: String.self)
        guard try !row.decode(2, as: Bool.self) else { return nil }
        let which: String
        switch provider {
        case "i": which = "an ICU collation"
        case "c" where !["C", "POSIX"].contains(collate): which = "the collation \(collate)"
        default: return nil
        }
        return """
            note: this database compares text with \(which), not byte by byte, and so do RedDot's \
            keys until migration 32 declares them bytewise (it leaves tables partitioned or \
            distributed by user as they are; 'reddot migrate up --online' applies it without \
            locking the tables while their indexes are rebuilt). Its ids index and sort faster byte \
            by byte (ingest's inserts took 16-35% longer under ICU en-US): see "Creating the \
            database" in RedDot's deploy/README.md.
            """
    }
}
