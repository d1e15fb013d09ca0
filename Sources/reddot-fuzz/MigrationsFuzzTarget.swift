import BadgeStore

/// Migration files: the first line of the input is the file name, the rest its bytes. A file
/// that loads has a number from 1 to the history column's maximum, its name parses back the same,
/// its SQL is its bytes, it is transactional exactly when no line is the directive, and the
/// columns it declares bytewise (`OnlineCollationChange.declaredColumns`) have plain names.
enum MigrationsFuzzTarget {
    static let target = FuzzTarget.migrations

    static func run(_ bytes: [UInt8]) {
        let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
        let fileName = String(decoding: bytes[..<newline], as: UTF8.self)
        let contents = Array(bytes[min(newline + 1, bytes.endIndex)...])
        let file: MigrationFile
        do throws(MigrationError) {
            file = try MigrationFile(fileName: fileName, contents: contents)
        } catch {
            FuzzFailure.check(!error.message.isEmpty, target, "an empty message")
            return
        }
        FuzzFailure.check((1...MigrationFile.maximumVersion).contains(file.version), target, "version \(file.version)")
        guard let (version, name) = MigrationFile.parse(fileName: file.fileName) else {
            FuzzFailure.fail(target, "the file name does not parse again")
        }
        FuzzFailure.check(version == file.version && name == file.name && file.fileName == fileName, target, "the name differs when read again")
        FuzzFailure.check(Array(file.sql.utf8) == contents, target, "the SQL is not the file's bytes")
        FuzzFailure.check(file.checksum.hasPrefix("sha256:") && file.checksum.utf8.count == 7 + 64, target, "checksum \(file.checksum)")
        let again = try? MigrationFile(fileName: fileName, contents: contents)
        FuzzFailure.check(again == file, target, "reading the same file twice differs")
        // What `migrate up --online` reads from a file: plain lower-case names, a column each at least.
        for (table, columns) in OnlineCollationChange.declaredColumns(in: file.sql) {
            let plain = { (name: String) in
                !name.isEmpty && name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (97...122).contains($0) || (48...57).contains($0) }
            }
            FuzzFailure.check(plain(table) && !columns.isEmpty && columns.allSatisfy(plain), target, "declared columns \(table) \(columns)")
        }
        let directive = MigrationFile.noTransactionDirective
        if !file.isTransactional {
            FuzzFailure.check(file.sql.contains(directive), target, "not transactional without the directive")
        }
        for line in ["\n" + directive + "\n", "\r\n" + directive + "\r\n", "\n  " + directive + "\t\r"] where ("x" + file.sql).contains(line) {
            FuzzFailure.check(!file.isTransactional, target, "transactional with the directive line \(line.debugDescription)")
        }
    }
}
