import BadgeCore
import BadgeStore
import LibPQ
import Testing
import TestSupport

/// Migration 34: an ANALYZE of the change log leaves out the columns no statement filters on.
/// The shipped schema only: the test layout partitioned by user builds its own tables.
@Suite("The change log's statistics")
struct LogStatisticsTests {
    @Test("an ANALYZE of badge_change gathers statistics for its keys but none for the logged nodes and mutes")
    func payloadColumnsHaveNoStatistics() async throws {
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            let path = try BadgePath(validating: "root.chat.c1")
            for index in 0..<20 {
                try await fixture.ingest([BadgeMutation(user: user("ls\(index % 5)"), path: path, operation: .increment(by: 1))])
                try await fixture.drainDirtyUsers()
            }
            let columns = try await fixture.pool.withConnection { connection throws(PGError) -> [String] in
                try connection.execute(script: "ANALYZE badge_change", name: "test.analyze")
                var names: [String] = []
                let statement = PGStatement(
                    "test.log_statistics",
                    "SELECT attname::text FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'badge_change' ORDER BY 1",
                    prepared: false)
                for row in try connection.query(statement).rows { names.append(try row.decode(0, as: String.self)) }
                return names
            }
            #expect(columns.contains("user_id") && columns.contains("version") && columns.contains("seq"), "\(columns)")
            #expect(!columns.contains("nodes") && !columns.contains("mutes"), "\(columns)")
        }
    }
}
