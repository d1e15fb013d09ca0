import LibPQ

/// The badge statements. Every one binds its values (arrays for set-based writes) and names one
/// user or a list of users, so each is an index range scan on `(user_id, path)`. The statements
/// live beside the code that runs them: `Writes/`, `Rollup/`, `Reads/` (and `Ingest/` has its own).
enum BadgeSQL {
    static let maxCount = "9223372036854775807"
}
