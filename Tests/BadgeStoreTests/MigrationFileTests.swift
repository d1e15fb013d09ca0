import BadgeStore
import Foundation
import TestSupport
import Testing

/// The migration file reader on hostile names and bytes (issue 11); no database needed.
@Suite("Migration files")
struct MigrationFileTests {
    @Test("a number beyond the history table's integer is refused by name, before anything runs")
    func versionLimit() throws {
        #expect(try MigrationFile(fileName: "2147483647_last.sql", contents: []).version == 2_147_483_647)
        for name in ["2147483648_next.sql", "99999999999999999999999_huge.sql"] {
            do {
                _ = try MigrationFile(fileName: name, contents: Array("SELECT 1;".utf8))
                Issue.record("\(name) was accepted")
            } catch {
                #expect(error.code == .invalidFile)
                #expect(error.message.contains("the most is 2147483647"), "\(error.message)")
            }
        }
        #expect(throws: MigrationError.self) { try MigrationFile(fileName: "0000_zero.sql", contents: []) }
        #expect(throws: MigrationError.self) { try MigrationFile(fileName: "00000000000000000000000000_zero.sql", contents: []) }
        #expect(try MigrationFile(fileName: "00000000000000000000000001_one.sql", contents: []).version == 1)
    }

    @Test("the no-transaction directive is found in CRLF files too")
    func crlfDirective() throws {
        let crlf = try MigrationFile(
            fileName: "0003_index.sql", contents: Array("-- reddot:no-transaction\r\nCREATE INDEX CONCURRENTLY i ON t (id);\r\n".utf8))
        #expect(!crlf.isTransactional)
        let plain = try MigrationFile(fileName: "0004_table.sql", contents: Array("CREATE TABLE t (id int);\r\n".utf8))
        #expect(plain.isTransactional)
        let inline = try MigrationFile(fileName: "0005_x.sql", contents: Array("SELECT 1; -- reddot:no-transaction\n".utf8))
        #expect(inline.isTransactional)
    }
}

@Suite("The build's schema version")
struct RequiredSchemaVersionTests {
    @Test("is the newest migration file's number: readyz and serve refuse an older schema")
    func newestFile() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Repository.migrationsDirectory.path)
        let numbers = names.filter { $0.hasSuffix(".sql") }.compactMap { Int($0.prefix { $0.isNumber }) }
        #expect(numbers.max() == Migrator.requiredSchemaVersion, "\(names.sorted())")
    }
}
