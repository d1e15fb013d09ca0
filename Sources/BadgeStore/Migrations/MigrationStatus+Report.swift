extension MigrationStatus {
    /// What `reddot migrate verify` prints when the history matches the files.
    public var verifiedSummary: String {
        "ok: \(appliedCount) applied migration(s) match their files; \(pendingCount) pending"
    }

    /// What `reddot migrate up` prints: a line per file it applied (`applied`, in order), then
    /// that the schema is current with `fileCount` migrations.
    public static func upReport(applied: [String], fileCount: Int) -> String {
        let summary = applied.isEmpty ? "nothing to apply: the schema is current (\(fileCount) migrations)" : "the schema is current (\(fileCount) migrations)"
        return (applied.map { "applied \($0)" } + [summary]).joined(separator: "\n")
    }
}
