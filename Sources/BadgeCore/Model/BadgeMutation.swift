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

    /// A mutation of `user`'s node at `path`.
    public init(user: UserID, path: BadgePath, operation: BadgeOperation, expiresAt: Date? = nil) {
        self.user = user
        self.path = path
        self.operation = operation
        self.expiresAt = expiresAt
    }
}
