public import LibPQ
import BadgeStore
import Foundation

/// How a test database lays out its tables after the repository's migrations.
///
/// `partitionedByUser` hash-partitions every per-user table by `user_id` into 8 partitions with
/// PostgreSQL's own partitioning (issue 27: a schema that shards by user): the store's property
/// tests run on it too, so a statement that needs a table to be one heap, or a key that does not
/// start with the user, shows there. A table partitioned already (`applied_user_event_generation`,
/// by its dedupe slot) has each of its partitions partitioned by user. `applied_event`
/// (broadcasts' ids) and the global tables stay as they are.
public enum SchemaLayout: String, Sendable, CustomStringConvertible {
    /// The migrations as shipped.
    case plain
    /// Per-user tables hash-partitioned by user (8 partitions).
    case partitionedByUser
    /// The tables distributed by Citus as `deploy/citus/layout.sql` lays them out, on a Citus
    /// cluster the environment names (`REDDOT_TEST_DATABASE_URL` on its coordinator,
    /// `REDDOT_TEST_CITUS_WORKERS` its workers' administrative URLs, separated by spaces; see
    /// docs/SHARDING.md, "Running the tests on Citus"). Not run by `deploy/test.sh`: Debian has
    /// no Citus package.
    case citus

    public var description: String { rawValue }

    /// The layout of test databases made without one: `REDDOT_TEST_LAYOUT` (`partitionedByUser`
    /// runs every such test on the partitioned layout, to find statements it refuses), else
    /// `plain`.
    public static var fromEnvironment: SchemaLayout {
        ProcessInfo.processInfo.environment["REDDOT_TEST_LAYOUT"].flatMap(SchemaLayout.init(rawValue:)) ?? .plain
    }

    /// The per-user tables partitioned by `partitionedByUser`.
    public static let userTables = UserData.tables

    /// Lays the tables out on `connection` (nothing for `plain`): each per-user table is
    /// rebuilt as a partitioned table with its columns, defaults, checks and indexes, its rows,
    /// its foreign keys, and the sequences its columns own.
    public func apply(on connection: PGConnection) throws {
        if self == .citus {
            try Self.distribute(on: connection)
            return
        }
        guard self == .partitionedByUser else { return }
        let tables = Self.userTables.map { "'\($0)'" }.joined(separator: ", ")
        try connection.execute(script: Self.partitionScript(tables: tables), name: "test.partition_by_user")
    }

    private static func partitionScript(tables: String) -> String {
        """
        DO $$
        DECLARE
            t text;
            fk record;
            s record;
            part record;
            r int;
        BEGIN
            FOREACH t IN ARRAY ARRAY[\(tables)]
            LOOP
                -- A table partitioned already (by the dedupe generation's slot): each of its
                -- partitions is partitioned by user.
                IF (SELECT relkind FROM pg_class WHERE oid = t::regclass) = 'p' THEN
                    FOR part IN SELECT c.relname::text AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
                                FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = t::regclass LOOP
                        EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', t, part.name);
                        EXECUTE format('ALTER TABLE %I RENAME TO %I', part.name, part.name || '_unpartitioned');
                        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING ALL) PARTITION BY HASH (user_id)', part.name, part.name || '_unpartitioned');
                        FOR r IN 0..7 LOOP
                            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 8, REMAINDER %s)', part.name || '_p' || r, part.name, r);
                        END LOOP;
                        EXECUTE format('INSERT INTO %I SELECT * FROM %I', part.name, part.name || '_unpartitioned');
                        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I %s', t, part.name, part.bound);
                        EXECUTE format('DROP TABLE %I', part.name || '_unpartitioned');
                    END LOOP;
                    CONTINUE;
                END IF;
                EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_unpartitioned');
                EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING ALL) PARTITION BY HASH (user_id)', t, t || '_unpartitioned');
                FOR r IN 0..7 LOOP
                    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 8, REMAINDER %s)', t || '_p' || r, t, r);
                END LOOP;
                EXECUTE format('INSERT INTO %I SELECT * FROM %I', t, t || '_unpartitioned');
                FOR fk IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
                          WHERE conrelid = (t || '_unpartitioned')::regclass AND contype = 'f' LOOP
                    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', t, fk.conname || '_p', fk.def);
                END LOOP;
                FOR s IN SELECT d.objid::regclass AS seq, a.attname FROM pg_depend d
                         JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                         WHERE d.refobjid = (t || '_unpartitioned')::regclass AND d.classid = 'pg_class'::regclass AND d.deptype = 'a'
                           AND (SELECT relkind FROM pg_class WHERE oid = d.objid) = 'S' LOOP
                    EXECUTE format('ALTER SEQUENCE %s OWNED BY %I.%I', s.seq, t, s.attname);
                END LOOP;
                EXECUTE format('DROP TABLE %I', t || '_unpartitioned');
            END LOOP;
        END
        $$;
        """
    }

    private static let registering = NSLock()

    /// The workers' administrative URLs (`REDDOT_TEST_CITUS_WORKERS`, separated by spaces).
    public static var citusWorkers: [String] {
        (ProcessInfo.processInfo.environment["REDDOT_TEST_CITUS_WORKERS"] ?? "").split(separator: " ").map(String.init)
    }

    /// Makes the database of `connection` (on the coordinator) a Citus database: the same
    /// database with the extension on every worker, the coordinator and the workers registered,
    /// then `deploy/citus/layout.sql` run as an operator runs it.
    private static func distribute(on connection: PGConnection) throws {
        // One at a time: two registrations at once on one worker (of two databases) failed
        // with "tuple concurrently updated" there.
        registering.lock()
        defer { registering.unlock() }
        let workers = citusWorkers
        guard !workers.isEmpty else {
            throw TestSetupError("REDDOT_TEST_LAYOUT=citus needs REDDOT_TEST_CITUS_WORKERS (the workers' administrative URLs)")
        }
        let name = try connection.query(PGStatement("test.database", "SELECT current_database()", prepared: false)).singleRow().decode(0, as: String.self)
        let address = PGStatement("test.address", "SELECT host(inet_server_addr()), inet_server_port()", prepared: false)
        var nodes: [(String, Int)] = []
        for worker in workers {
            let admin = try PGConnection.connect(PGConfiguration(connectionString: worker), logger: TestServer.logger)
            defer { admin.close() }
            // The name is made of [a-z0-9_] only (`TestDatabase.create`).
            try admin.execute(script: "CREATE DATABASE \(name)", name: "test.create_worker_database")
            let node = try admin.query(address).singleRow()
            nodes.append((try node.decode(0, as: String.self), try node.decode(1, as: Int.self)))
            let database = try PGConnection.connect(PGConfiguration(connectionString: TestDatabase.replacingDatabase(in: worker, with: name)), logger: TestServer.logger)
            defer { database.close() }
            try database.execute(script: "CREATE EXTENSION citus", name: "test.worker_citus")
        }
        let coordinator = try connection.query(address).singleRow()
        var script = """
            CREATE EXTENSION IF NOT EXISTS citus;
            SELECT citus_set_coordinator_host('\(try coordinator.decode(0, as: String.self))', \(try coordinator.decode(1, as: Int.self)));
            """
        for (host, port) in nodes {
            script += "\nSELECT citus_add_node('\(host)', \(port));"
        }
        try connection.execute(script: script, name: "test.citus_nodes")
        let layout = try String(contentsOf: Repository.root.appendingPathComponent("deploy/citus/layout.sql"), encoding: .utf8)
        try connection.execute(script: layout, name: "test.citus_layout")
    }

    /// Drops the database `name` on every Citus worker (`REDDOT_TEST_CITUS_WORKERS`), if any.
    static func dropOnWorkers(_ name: String) {
        for worker in citusWorkers {
            guard let admin = try? PGConnection.connect(PGConfiguration(connectionString: worker), logger: TestServer.logger) else { continue }
            _ = try? admin.execute(script: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)", name: "test.drop_worker_database")
            admin.close()
        }
    }
}
