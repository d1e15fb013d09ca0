/// A named SQL statement. The name appears in errors, logs and metrics instead of the SQL or
/// its parameters; a connection prepares a statement once and reuses the plan.
public struct PGStatement: Hashable, Sendable {
    /// A short name, unique per distinct SQL text (`badges.read_tree`).
    public var name: String
    /// The SQL, with `$1`, `$2`, … placeholders. Never built from input.
    public var sql: String
    /// Whether the connection should prepare it once and reuse the plan (default true).
    public var prepared: Bool

    /// Creates a statement.
    public init(_ name: String, _ sql: String, prepared: Bool = true) {
        self.name = name
        self.sql = sql
        self.prepared = prepared
    }
}
