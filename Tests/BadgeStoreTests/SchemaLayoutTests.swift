import BadgeStore
import LibPQ
import Testing
import TestSupport

/// The partitioned layout the property tests also run on must cover every per-user table, or a
/// new table would slip past them unpartitioned.
@Suite("The test layout partitioned by user")
struct SchemaLayoutTests {
    @Test("every table with a user_id column is partitioned by user into 8 partitions")
    func coversEveryUserTable() async throws {
        let fixture = try await StoreFixture.make(layout: .partitionedByUser)
        defer { Task { await fixture.tearDown() } }
        let withUser = try await fixture.rows(
            """
            SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'user_id'
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
            ORDER BY 1
            """
        ).compactMap { $0.first ?? nil }
        #expect(withUser == SchemaLayout.userTables.sorted(), "tables with user_id: \(withUser)")
        let partitioned = try await fixture.rows(
            """
            SELECT c.relname, p.partstrat, (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid)
            FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid ORDER BY 1
            """)
        #expect(partitioned.map { $0.first ?? nil } == SchemaLayout.userTables.sorted())
        #expect(partitioned.allSatisfy { $0.count == 3 && $0[1] == "h" && $0[2] == "8" }, "\(partitioned)")
    }
}
