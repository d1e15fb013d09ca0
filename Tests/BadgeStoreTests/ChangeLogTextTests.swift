@testable import BadgeStore
import LibPQ
import Testing
import TestSupport

/// The rollup writes each version's nodes as JSON text it concatenates (`BadgeSQL.aggregateJSON`,
/// `pathJSON`), which PostgreSQL then stores as `jsonb`. Every reader takes them from that
/// `jsonb`, so the text must give the value PostgreSQL's own JSON builders give, for every value
/// a column can hold, not only the ones RedDot validates.
@Suite("The change log's node text is the value PostgreSQL's JSON builders give")
struct ChangeLogTextTests {
    @Test("counts, icons and NULLs, escaped or not, read back as the same jsonb as json_build_object's")
    func nodeTextMatchesBuilders() async throws {
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            let counts = ["0", "1", "-1", "9223372036854775807", "-9223372036854775808", "NULL"]
            // Icons RedDot accepts, and text it never writes: quotes, backslashes, control
            // characters, non-ASCII letters.
            let icons = ["NULL", "new", "hot_1-x", "a\"b\\c", "tab\there\nline\u{01}", "é漢", ""]
            let paths = ["root", "root.chat.c7", "root.a_B9", "root." + Array(repeating: "x", count: 16).joined(separator: ".")]
            let rows = try await fixture.rows(
                """
                WITH v AS (
                    SELECT p::ltree AS path, nullif(c, 'NULL')::bigint AS count, i AS icon, nullif(u, 'NULL')::bigint AS unseen
                    FROM unnest($1::text[]) AS p, unnest($2::text[]) AS c, unnest($3::text[]) AS i, unnest($2::text[]) AS u
                ), texts AS (
                    SELECT \(BadgeSQL.pathJSON("path")) AS path_text, (\(BadgeSQL.aggregateJSON("count", "icon", "unseen"))) AS node_text,
                           path, count, icon, unseen
                    FROM (SELECT path, count, CASE icon WHEN 'NULL' THEN NULL ELSE icon END AS icon, unseen FROM v) AS x
                )
                SELECT count(*),
                       count(*) FILTER (WHERE path_text IS NULL OR node_text IS NULL),
                       count(*) FILTER (WHERE path_text::jsonb IS DISTINCT FROM to_jsonb(path::text)
                                           OR node_text::jsonb IS DISTINCT FROM json_build_object('count', count, 'icon', icon, 'unseen', unseen)::jsonb),
                       min(node_text) FILTER (WHERE node_text::jsonb IS DISTINCT FROM json_build_object('count', count, 'icon', icon, 'unseen', unseen)::jsonb)
                FROM texts
                """,
                [paths, counts, icons])
            let row = try #require(rows.first)
            #expect(row[0] == String(paths.count * counts.count * icons.count * counts.count))
            #expect(row[1] == "0", "a node's text came out NULL (string_agg would drop it)")
            #expect(row[2] == "0", "a node's text differs from json_build_object's: \(row[3] ?? "")")
        }
    }
}
