import Crypto
public import Foundation

/// One numbered SQL file of the schema (`0001_init.sql`).
///
/// A file runs in its own transaction unless one of its lines is exactly
/// `-- reddot:no-transaction` (needed for `CREATE INDEX CONCURRENTLY`); such a file must hold a
/// single statement and should be safe to run again (`IF NOT EXISTS`).
public struct MigrationFile: Sendable, Hashable {
    /// The number before the first underscore, 1 to ``maximumVersion``.
    public var version: Int
    /// The words after it (`init`).
    public var name: String
    /// The file's name (`0001_init.sql`).
    public var fileName: String
    /// The file's text.
    public var sql: String
    /// `sha256:` and the hex digest of the file's bytes.
    public var checksum: String
    /// Whether it runs inside a transaction.
    public var isTransactional: Bool

    /// The directive that makes a file run outside a transaction.
    public static let noTransactionDirective = "-- reddot:no-transaction"

    /// Creates a migration from a file name and its bytes.
    ///
    /// - Throws: `MigrationError` `.invalidFile` when the name is not `NNNN_words.sql`, its number
    ///   is above ``maximumVersion``, or the bytes are not UTF-8.
    public init(fileName: String, contents: [UInt8]) throws(MigrationError) {
        guard let (version, name) = Self.parse(fileName: fileName) else {
            throw MigrationError(
                .invalidFile,
                "migration file '\(fileName)' is not named NNNN_name.sql (digits, an underscore, then a-z, 0-9 and _)")
        }
        // The history table keeps the number in an `integer` column: a larger one would fail
        // only after the file ran.
        guard version <= Self.maximumVersion else {
            throw MigrationError(
                .invalidFile,
                "migration file '\(fileName)' has the number \(version == Int.max ? "beyond \(Int.max)" : String(version)); the most is \(Self.maximumVersion)")
        }
        guard let sql = String(validating: contents, as: UTF8.self) else {
            throw MigrationError(.invalidFile, "migration file '\(fileName)' is not UTF-8")
        }
        self.version = version
        self.name = name
        self.fileName = fileName
        self.sql = sql
        self.checksum = "sha256:" + SHA256.hash(data: contents).map { String(format: "%02x", $0) }.joined()
        // Only a file holding the directive's text is split into lines to look for it alone on one.
        self.isTransactional =
            !sql.contains(Self.noTransactionDirective)
            || !Self.lines(of: sql).contains { $0.trimmingCharacters(in: .whitespaces) == Self.noTransactionDirective }
    }

    /// The largest number a file may have: the history table's `integer` column holds it.
    public static let maximumVersion = Int(Int32.max)

    /// The lines of SQL text as PostgreSQL ends a `--` comment: at `\n` or `\r` (so `\r\n`
    /// files work; Swift's `Character` would see `\r\n` as one character, not as `\n`).
    static func lines(of sql: String) -> [String] {
        sql.unicodeScalars.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).map { String(String.UnicodeScalarView($0)) }
    }

    package static func parse(fileName: String) -> (Int, String)? {
        guard fileName.hasSuffix(".sql") else { return nil }
        let stem = fileName.dropLast(4)
        guard let underscore = stem.firstIndex(of: "_") else { return nil }
        let digits = stem[..<underscore]
        let words = stem[stem.index(after: underscore)...]
        guard digits.count >= 4, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
            !words.isEmpty,
            words.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLowercase || $0.isNumber)) })
        else { return nil }
        // Digits beyond `Int` are a number too large (`Int.max` here), not a misnamed file.
        let version = Int(digits) ?? (digits.contains { $0 != "0" } ? Int.max : 0)
        guard version > 0 else { return nil }
        return (version, String(words))
    }

    /// Reads every `*.sql` file of `directory`, sorted by version.
    ///
    /// - Throws: `MigrationError` `.invalidFile` for a misnamed or unreadable file, two files with
    ///   one version, a missing directory, or one with no `*.sql` file.
    public static func load(from directory: URL) throws(MigrationError) -> [MigrationFile] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError(.invalidFile, "cannot read the migrations directory '\(directory.path)': \(error.localizedDescription)")
        }
        var files: [MigrationFile] = []
        for name in names.sorted() where name.hasSuffix(".sql") {
            let url = directory.appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw MigrationError(.invalidFile, "cannot read migration file '\(name)'")
            }
            files.append(try MigrationFile(fileName: name, contents: Array(data)))
        }
        // A directory without one migration is a wrong path, not a schema with nothing to apply:
        // `migrate up` would report the schema current and a deploy would go on without one.
        guard !files.isEmpty else {
            throw MigrationError(.invalidFile, "'\(directory.path)' holds no migration files (NNNN_name.sql); pass the migrations directory")
        }
        files.sort { $0.version < $1.version }
        for (first, second) in zip(files, files.dropFirst()) where first.version == second.version {
            throw MigrationError(
                .invalidFile, "migration files '\(first.fileName)' and '\(second.fileName)' have the same number \(first.version)")
        }
        return files
    }
}
