public import LibPQ

/// The online form of a migration that only declares indexed text columns `COLLATE "C"`
/// (migration 32): what `reddot migrate up --online` runs instead of the file alone.
///
/// Applied as a file, such a migration locks its tables while PostgreSQL rebuilds every index
/// of the columns (about 2.5 s per million retained events on the project's 2-core machine).
/// The online form first builds each of those indexes again with the columns bytewise, under
/// a name of its own and with `CREATE INDEX CONCURRENTLY` (writers go on meanwhile). Then one
/// transaction locks the tables, drops the old indexes (and the constraints they back), runs
/// the file itself, whose `ALTER COLUMN … TYPE text COLLATE "C"` now finds only indexes in
/// that order and keeps them as they are, puts the constraints back on the new indexes under
/// their old names, and records the file in the history: catalog work only, however large the
/// tables. The schema it leaves is the one the file leaves (`MigratorTests` compares them).
///
/// Indexes of a form it does not rebuild (expressions, a predicate, `INCLUDE` columns, a
/// non-default operator class or order, an exclusion or deferrable constraint, a foreign key
/// that references them, a partitioned index without a constraint, nested partitions) make it
/// refuse, naming them; the file alone still applies. A layout partitioned or distributed by
/// user, which the file leaves as it is, gets the file alone.
public struct OnlineCollationChange: Sendable {
    /// The migrations that have an online form.
    public static let versions: Set<Int> = [32]

    /// The prefix of the indexes the build step makes, followed by the old index's OID: a run
    /// that stopped before its swap finds the ones it built and builds only the rest.
    public static let buildPrefix = "reddot_bytewise_"

    /// One index to build before the swap, and what the swap does with it.
    public struct Index: Sendable, Hashable {
        /// The old index's OID, which names the new one (`buildPrefix`).
        public var oid: Int64
        /// The old index's name (quoted as needed).
        public var name: String
        /// Its table, a plain table or a partition (quoted as needed).
        public var table: String
        /// The constraint it backs, nil for a plain index.
        public var constraint: Constraint?
        /// Whether its constraint or index is dropped through the partitioned index it belongs to.
        public var attached: Bool
        /// `CREATE INDEX CONCURRENTLY` of the new index.
        public var build: String

        /// The name the build gives the new index.
        public var newName: String { "\(OnlineCollationChange.buildPrefix)\(oid)" }
    }

    /// A primary key (`kind` "p") or unique constraint ("u") and its name (quoted as needed).
    public struct Constraint: Sendable, Hashable {
        public var kind: String
        public var name: String
    }

    /// A partitioned table's constraint, dropped and added again around the file.
    public struct PartitionedConstraint: Sendable, Hashable {
        public var table: String
        public var name: String
        /// `pg_get_constraintdef`: `PRIMARY KEY (…)` or `UNIQUE (…)`.
        public var definition: String
    }

    /// The file's tables, in its order, and each one's columns it declares bytewise.
    public let columns: [(table: String, columns: [String])]
    /// The indexes to build, in order.
    public let indexes: [Index]
    /// The partitioned tables' constraints.
    public let partitioned: [PartitionedConstraint]

    /// Reads `file` (which must be one of `versions`) and the catalog.
    ///
    /// - Returns: nil when the file alone is the way: the layout is partitioned or distributed
    ///   by user (the file leaves it as it is).
    /// - Throws: `MigrationError(.migrationFailed)` naming each index of a form the online
    ///   form does not rebuild; `PGError` from the catalog reads.
    public static func prepare(_ file: MigrationFile, on connection: PGConnection) throws -> OnlineCollationChange? {
        let columns = declaredColumns(in: file.sql)
        guard !columns.isEmpty else {
            throw MigrationError(.migrationFailed, "\(file.fileName) declares no column COLLATE \"C\": it has no online form")
        }
        if try connection.query(byUserLayout).singleRow().decode(0, as: Bool.self) { return nil }
        let qualified = columns.flatMap { entry in entry.columns.map { "\(entry.table).\($0)" } }
        var indexes: [Index] = []
        var partitioned: [PartitionedConstraint] = []
        var refused: [String] = []
        for row in try connection.query(indexesToRebuild, [qualified]).rows {
            let oid = try row.decode(0, as: Int64.self)
            let name = try row.decode(1, as: String.self)
            let table = try row.decode(2, as: String.self)
            let tableKind = try row.decode(3, as: String.self)
            let attached = try row.decode(4, as: Bool.self)
            let constraintName = try row.decode(5, as: String?.self)
            let constraintKind = try row.decode(6, as: String?.self)
            let unsupported = try row.decode(10, as: String.self)
            guard unsupported.isEmpty else {
                refused.append("\(name) on \(table) \(unsupported)")
                continue
            }
            let constraint = constraintKind.flatMap { kind in constraintName.map { Constraint(kind: kind, name: $0) } }
            if tableKind == "p" {
                guard let constraint else { continue }  // refused above: a plain partitioned index
                partitioned.append(PartitionedConstraint(table: table, name: constraint.name, definition: try row.decode(11, as: String.self)))
                continue
            }
            let unique = try row.decode(7, as: Bool.self)
            let method = try row.decode(8, as: String.self)
            let keys = try row.decode(9, as: String.self)
            indexes.append(Index(
                oid: oid, name: name, table: table, constraint: constraint, attached: attached,
                build: "CREATE \(unique ? "UNIQUE " : "")INDEX CONCURRENTLY \(buildPrefix)\(oid) ON \(table) USING \(method) (\(keys))"))
        }
        guard refused.isEmpty else {
            throw MigrationError(
                .migrationFailed,
                "\(file.fileName) has no online form on this database: the index \(refused.joined(separator: "; the index ")). Nothing was applied; run 'reddot migrate up' without --online (it locks the tables while it rebuilds their indexes)")
        }
        return OnlineCollationChange(columns: columns, indexes: indexes, partitioned: partitioned)
    }

    /// The tables and columns `sql` declares `COLLATE "C"`, from its statements
    /// `ALTER TABLE t ALTER COLUMN c TYPE text COLLATE "C", …`, in the file's order. (Each run
    /// of spaces has one way to match, so no input makes the match backtrack without end.)
    public static func declaredColumns(in sql: String) -> [(table: String, columns: [String])] {
        let statement = #/ALTER\s+TABLE\s+([a-z_][a-z0-9_]*)\s+((?:ALTER\s+COLUMN\s+[a-z_][a-z0-9_]*\s+TYPE\s+text\s+COLLATE\s+"C"\s*(?:,\s*)?)+);/#
        let column = #/ALTER\s+COLUMN\s+([a-z_][a-z0-9_]*)\s+TYPE\s+text\s+COLLATE\s+"C"/#
        return sql.matches(of: statement).map { match in
            (table: String(match.output.1), columns: match.output.2.matches(of: column).map { String($0.output.1) })
        }
    }

    /// The statements of the swap, in order, around the file's SQL (`file`).
    public func swap(_ file: MigrationFile) -> [String] {
        var statements = ["LOCK TABLE \(columns.map(\.table).joined(separator: ", ")) IN ACCESS EXCLUSIVE MODE"]
        for constraint in partitioned {
            statements.append("ALTER TABLE \(constraint.table) DROP CONSTRAINT \(constraint.name)")
        }
        for index in indexes where !index.attached {
            if let constraint = index.constraint {
                statements.append("ALTER TABLE \(index.table) DROP CONSTRAINT \(constraint.name)")
            } else {
                statements.append("DROP INDEX \(index.name)")
            }
        }
        statements.append(file.sql)
        for index in indexes {
            if let constraint = index.constraint {
                statements.append(
                    "ALTER TABLE \(index.table) ADD CONSTRAINT \(constraint.name) \(constraint.kind == "p" ? "PRIMARY KEY" : "UNIQUE") USING INDEX \(index.newName)")
                if constraint.name != index.name { statements.append("ALTER INDEX \(constraint.name) RENAME TO \(index.name)") }
            } else {
                statements.append("ALTER INDEX \(index.newName) RENAME TO \(index.name)")
            }
        }
        for constraint in partitioned {
            statements.append("ALTER TABLE \(constraint.table) ADD CONSTRAINT \(constraint.name) \(constraint.definition)")
        }
        return statements
    }

    /// Builds the indexes not built yet (an invalid one, left by a build that stopped, is
    /// dropped and built again). Each statement waits for the transactions that write its
    /// table to end, and blocks none of them.
    ///
    /// - Parameter progress: called before each build with the index and how many are left.
    public func build(on connection: PGConnection, progress: (Index, Int) -> Void) throws(PGError) {
        for (position, index) in indexes.enumerated() {
            let state = try connection.query(Self.buildState, [index.newName]).rows.first.map { row throws(PGError) in try row.decode(0, as: Bool.self) }
            if state == true { continue }
            if state == false {
                _ = try connection.query(PGStatement("migrate.online_drop_invalid", "DROP INDEX CONCURRENTLY IF EXISTS \(index.newName)", prepared: false))
            }
            progress(index, indexes.count - position)
            _ = try connection.query(PGStatement("migrate.online_build", index.build, prepared: false))
        }
    }

    /// Drops every index of the current schema named with `buildPrefix`: after the swap, those
    /// no swap took (left by a run against other indexes); after the file, those a run that
    /// stopped left. Each would otherwise cost every write of its table an index entry.
    ///
    /// - Returns: the names dropped.
    @discardableResult
    public static func dropLeftovers(on connection: PGConnection) throws(PGError) -> [String] {
        let names = try connection.query(leftovers).rows.map { row throws(PGError) in try row.decode(0, as: String.self) }
        for name in names {
            _ = try connection.query(PGStatement("migrate.online_drop_leftover", "DROP INDEX \(name)", prepared: false))
        }
        return names
    }

    /// A note for the operator when indexes an online run built are waiting for its swap (a run
    /// stopped, or runs now): how many, and what finishes or removes them. Nil when there are none.
    public static func waitingNote(on connection: PGConnection) throws(PGError) -> String? {
        let count = try connection.query(leftovers).rows.count
        guard count > 0 else { return nil }
        return """
            note: \(count) index\(count == 1 ? "" : "es") built by 'reddot migrate up --online' (\(buildPrefix)…) \
            \(count == 1 ? "waits" : "wait") for its swap: a run stopped before it, or one runs now. 'reddot migrate up --online' \
            builds the rest and swaps them in; 'reddot migrate up' applies the file and drops them.
            """
    }

    /// Fails unless every index the build made is there and valid (checked under the swap's locks).
    public func requireBuilt(on connection: PGConnection) throws {
        for index in indexes {
            let valid = try connection.query(Self.buildState, [index.newName]).rows.first.map { row throws(PGError) in try row.decode(0, as: Bool.self) }
            guard valid == true else {
                throw MigrationError(.migrationFailed, "the index \(index.newName) the online form built for \(index.name) is \(valid == nil ? "gone" : "invalid"); nothing was swapped, run again")
            }
        }
    }

    // MARK: - SQL

    /// Whether the file would leave the layout as it is (partitioned or distributed by user).
    static let byUserLayout = PGStatement(
        "migrate.online_by_user_layout",
        """
        SELECT to_regclass('pg_dist_partition') IS NOT NULL OR EXISTS (
            SELECT 1 FROM pg_partitioned_table p
            JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = ANY (p.partattrs::int2[])
            WHERE a.attname = 'user_id')
        """, prepared: false)

    /// The indexes of the current schema named with `buildPrefix`, quoted as needed.
    static let leftovers = PGStatement(
        "migrate.online_leftovers",
        """
        SELECT quote_ident(c.relname) FROM pg_class c
        WHERE c.relkind = 'i' AND c.relnamespace = current_schema()::regnamespace AND c.relname LIKE '\(buildPrefix)%'
        ORDER BY c.relname
        """, prepared: false)

    /// Whether the index `$1` of the current schema is valid (no row: it does not exist).
    static let buildState = PGStatement(
        "migrate.online_build_state",
        """
        SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace
        """, prepared: false)

    /// Every index of the current schema with a column of `$1` (`table.column`, the table a
    /// partition's root) not yet `C`, partitions' and partitioned tables' included: its OID,
    /// name, table, the table's kind, whether it belongs to a partitioned index, its
    /// constraint's name and kind, uniqueness, access method, its key columns with the listed
    /// ones `COLLATE "C"`, why the online form does not rebuild it ('' when it does) and, for a
    /// partitioned table, its constraint's definition.
    static let indexesToRebuild = PGStatement(
        "migrate.online_indexes",
        """
        SELECT c.oid::bigint, quote_ident(c.relname), quote_ident(t.relname), t.relkind::text,
               ih.inhparent IS NOT NULL, quote_ident(con.conname), con.contype::text, i.indisunique, am.amname::text,
               (SELECT string_agg(quote_ident(a.attname) || CASE WHEN r.relname || '.' || a.attname = ANY ($1::text[]) THEN ' COLLATE "C"' ELSE '' END,
                                  ', ' ORDER BY k.n)
                FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum),
               CASE WHEN i.indexprs IS NOT NULL THEN 'has expressions'
                    WHEN i.indpred IS NOT NULL THEN 'is partial'
                    WHEN i.indnkeyatts <> i.indnatts THEN 'has INCLUDE columns'
                    WHEN EXISTS (SELECT 1 FROM unnest(i.indclass::oid[]) AS k(opclass) JOIN pg_opclass o ON o.oid = k.opclass WHERE NOT o.opcdefault)
                        THEN 'has a non-default operator class'
                    WHEN EXISTS (SELECT 1 FROM unnest(i.indoption::int2[]) AS k(option) WHERE k.option <> 0) THEN 'has a non-default order'
                    WHEN con.contype NOT IN ('p', 'u') THEN 'backs an exclusion constraint'
                    WHEN con.condeferrable THEN 'backs a deferrable constraint'
                    WHEN EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = c.oid) THEN 'is referenced by a foreign key'
                    WHEN t.relkind = 'p' AND con.oid IS NULL THEN 'is a partitioned index without a constraint'
                    WHEN t.relkind = 'p' AND ih.inhparent IS NOT NULL THEN 'is in a nested partition tree'
                    ELSE '' END,
               CASE WHEN con.oid IS NOT NULL THEN pg_get_constraintdef(con.oid) ELSE '' END
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_class t ON t.oid = i.indrelid
        JOIN pg_class r ON r.oid = coalesce(pg_partition_root(t.oid), t.oid)
        JOIN pg_am am ON am.oid = c.relam
        LEFT JOIN pg_inherits ih ON ih.inhrelid = c.oid
        LEFT JOIN pg_constraint con ON con.conindid = c.oid AND con.conrelid = t.oid AND con.contype <> 'f'
        WHERE t.relnamespace = current_schema()::regnamespace AND t.relkind IN ('r', 'p')
          AND c.relname NOT LIKE '\(buildPrefix)%'
          AND EXISTS (
              SELECT 1 FROM unnest(i.indkey::int2[]) AS k(attnum)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
              WHERE r.relname || '.' || a.attname = ANY ($1::text[]) AND a.attcollation <> 'pg_catalog."C"'::regcollation)
        ORDER BY r.relname, t.relkind DESC, t.relname, c.relname
        """, prepared: false)
}
