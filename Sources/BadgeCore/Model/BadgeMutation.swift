public import Foundation

/// One operation for one user's node, with an optional expiry for what it shows.
public struct BadgeMutation: Hashable, Sendable {
    /// Whose tree.
    public var user: UserID
    /// Which node.
    public var path: BadgePath
    /// What to do to the node's own state.
    public var operation: BadgeOperation
    /// When what a set or increment shows disappears; `nil` for never (an increment then keeps
    /// the state's expiry). Ignored by clears.
    public var expiresAt: Date?
    /// When it happened, as the producer says (`occurred_at`); `nil` for "when it is read". A
    /// clear applies to the items that occurred up to then; an item's time decides which clears
    /// it falls under (see ``BadgeTree``).
    public var occurredAt: Date?

    /// A mutation of `user`'s node at `path`.
    public init(
        user: UserID, path: BadgePath, operation: BadgeOperation, expiresAt: Date? = nil, occurredAt: Date? = nil
    ) {
        self.user = user
        self.path = path
        self.operation = operation
        self.expiresAt = expiresAt
        self.occurredAt = occurredAt
    }
}
