import BadgeStore
import Foundation
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
        try await tearingDown({ await fixture.tearDown() }) {
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
                SELECT c.relname, p.partstrat, (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid), c.relispartition
                FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid ORDER BY 1
                """)
            let top = partitioned.filter { $0.last == "f" }
            #expect(top.map { $0.first ?? nil } == SchemaLayout.userTables.sorted())
            // Each by user into 8, but the dedupe generations' tables: their two slots are, each.
            let bySlot = top.filter { $0.count == 4 && $0[1] == "l" }
            #expect(bySlot.map { $0.first ?? nil } == ["applied_action_generation", "applied_user_event_generation"], "\(partitioned)")
            #expect(top.filter { $0[1] != "l" }.allSatisfy { $0.count == 4 && $0[1] == "h" && $0[2] == "8" }, "\(partitioned)")
            let slots = partitioned.filter { $0.last == "t" }
            #expect(
                slots.map { $0.first ?? nil } == [
                    "applied_action_generation_slot0", "applied_action_generation_slot1",
                    "applied_user_event_generation_slot0", "applied_user_event_generation_slot1",
                ], "\(partitioned)")
            #expect(slots.allSatisfy { $0[1] == "h" && $0[2] == "8" }, "\(partitioned)")
        }
    }

    @Test("deploy/citus/layout.sql distributes every table with user_id by it, colocated, and places every other table")
    func citusLayoutCoversTheSchema() async throws {
        let text = try String(contentsOf: Repository.root.appendingPathComponent("deploy/citus/layout.sql"), encoding: .utf8)
        var distributed: [String] = [], reference: [String] = [], local: [String] = []
        for line in text.split(separator: "\n").map(String.init) {
            let quoted = line.split(separator: "'").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            if line.hasPrefix("SELECT create_distributed_table(") {
                #expect(quoted.count >= 2 && quoted[1] == "user_id", "\(line)")
                #expect(quoted.first == "user_version" || quoted.last == "user_version", "not colocated with user_version: \(line)")
                if let table = quoted.first { distributed.append(table) }
            } else if line.hasPrefix("SELECT create_reference_table("), let table = quoted.first {
                reference.append(table)
            } else if line.hasPrefix("--   ") && !line.contains("psql") {
                local += line.dropFirst(5).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            }
        }
        // The shipped schema's tables, which the Citus layout lists.
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            let tables = try await fixture.rows(
                """
                SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'user_id')
                FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                ORDER BY 1
                """)
            let perUser = tables.filter { $0.last == "t" }.compactMap { $0.first ?? nil }
            let global = tables.filter { $0.last == "f" }.compactMap { $0.first ?? nil }
            #expect(distributed.sorted() == perUser, "distributed \(distributed.sorted()), tables with user_id \(perUser)")
            #expect(perUser == SchemaLayout.userTables.sorted())
            #expect((reference + local).sorted() == global, "reference \(reference), local \(local), others \(global)")
        }
    }
}
