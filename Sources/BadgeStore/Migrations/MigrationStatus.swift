import Foundation

/// The files compared with the history table: what is applied, pending or wrong.
public struct MigrationStatus: Sendable, Codable, Hashable {
    /// The state of one migration.
    public enum State: String, Sendable, Codable, Hashable {
        /// Applied, and the file still has the checksum it had then.
        case applied
        /// Not applied yet.
        case pending
        /// Applied, but the file was edited since (its checksum differs).
        case modified
        /// Applied, but the file is gone.
        case missing
        /// Not applied, but numbered below a file that is: rename it past the newest.
        case outOfOrder = "out_of_order"
    }

    /// One migration's line.
    public struct Entry: Sendable, Codable, Hashable {
        /// The version number.
        public var version: Int
        /// The file name (from the directory, or from the history when the file is missing).
        public var file: String
        /// Its state.
        public var state: State
        /// The checksum of the file on disk (absent when missing).
        public var checksum: String?
        /// The checksum recorded when it was applied (only when it differs, or the file is missing).
        public var appliedChecksum: String?
        /// When it was applied, as RFC 3339 UTC.
        public var appliedAt: String?

        enum CodingKeys: String, CodingKey {
            case version, file, state, checksum
            case appliedChecksum = "applied_checksum"
            case appliedAt = "applied_at"
        }
    }

    /// Every file and every history row, by version.
    public var entries: [Entry]
    /// How many are applied (and unchanged).
    public var appliedCount: Int
    /// How many wait to be applied.
    public var pendingCount: Int
    /// How many are modified, missing or out of order.
    public var problemCount: Int
    /// Whether everything is applied and nothing is wrong.
    public var isCurrent: Bool { pendingCount == 0 && problemCount == 0 }

    enum CodingKeys: String, CodingKey {
        case entries = "migrations"
        case appliedCount = "applied"
        case pendingCount = "pending"
        case problemCount = "problems"
    }

    init(files: [MigrationFile], applied: [Migrator.AppliedMigration]) {
        let appliedByVersion = Dictionary(applied.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        let filesByVersion = Dictionary(files.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        let newestApplied = applied.map(\.version).max() ?? 0
        var entries: [Entry] = []
        for version in Set(appliedByVersion.keys).union(filesByVersion.keys).sorted() {
            let file = filesByVersion[version]
            let history = appliedByVersion[version]
            var entry = Entry(
                version: version, file: file?.fileName ?? history?.fileName ?? "?", state: .pending,
                checksum: file?.checksum, appliedChecksum: nil,
                appliedAt: history.map { Self.formatter.string(from: $0.appliedAt) })
            switch (file, history) {
            case (.some(let file), .some(let history)):
                if file.checksum == history.checksum {
                    entry.state = .applied
                } else {
                    entry.state = .modified
                    entry.appliedChecksum = history.checksum
                }
            case (.none, .some(let history)):
                entry.state = .missing
                entry.appliedChecksum = history.checksum
            case (.some, .none):
                entry.state = version < newestApplied ? .outOfOrder : .pending
            case (.none, .none):
                continue
            }
            entries.append(entry)
        }
        self.entries = entries
        appliedCount = entries.filter { $0.state == .applied }.count
        pendingCount = entries.filter { $0.state == .pending }.count
        problemCount = entries.count - appliedCount - pendingCount
    }

    /// Throws `.historyMismatch` naming every modified, missing or out-of-order file.
    public func requireConsistent() throws(MigrationError) {
        let problems = entries.compactMap { entry -> String? in
            switch entry.state {
            case .modified:
                return "\(entry.file) was edited after it was applied (checksum \(entry.checksum ?? "?") ≠ applied \(entry.appliedChecksum ?? "?")); restore it and put the change in a new file"
            case .missing:
                return "\(entry.file) was applied but is missing from the migrations directory"
            case .outOfOrder:
                return "\(entry.file) is not applied but is numbered below an applied migration; give it a number after the newest"
            case .applied, .pending:
                return nil
            }
        }
        if !problems.isEmpty {
            throw MigrationError(.historyMismatch, problems.joined(separator: "\n"))
        }
    }

    /// Human-readable lines, one per migration.
    public var text: String {
        var lines = entries.map { entry in
            let state = entry.state.rawValue.replacingOccurrences(of: "_", with: " ")
            return "\(state.padding(toLength: 13, withPad: " ", startingAt: 0)) \(entry.file)\(entry.appliedAt.map { "  (applied \($0))" } ?? "")"
        }
        lines.append("\(appliedCount) applied, \(pendingCount) pending, \(problemCount) problem(s)")
        return lines.joined(separator: "\n")
    }

    nonisolated(unsafe) private static let formatter: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter
    }()
}
