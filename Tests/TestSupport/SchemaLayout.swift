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
}
