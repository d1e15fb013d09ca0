public import Foundation

/// An event mapped to one badge operation on one path for its audience.
public struct MappedOperation: Hashable, Sendable {
    /// The event's id.
    public var eventID: EventID
    /// Who the operation is for.
    public var audience: Audience
    /// The node.
    public var path: BadgePath
    /// The operation.
    public var operation: BadgeOperation
    /// The event's expiry, if any.
    public var expiresAt: Date?
    /// When the event says it happened, if it says.
    public var occurredAt: Date?

    /// A mapped operation with the given fields.
    public init(
        eventID: EventID, audience: Audience, path: BadgePath, operation: BadgeOperation, expiresAt: Date?,
        occurredAt: Date? = nil
    ) {
        self.eventID = eventID
        self.audience = audience
        self.path = path
        self.operation = operation
        self.expiresAt = expiresAt
        self.occurredAt = occurredAt
    }

    /// One mutation per user for ``Audience/users(_:)``, in order; none for
    /// ``Audience/everyone`` (broadcasts are stored once, not per user).
    public func mutations() -> [BadgeMutation] {
        switch audience {
        case .users(let users):
            return users.map {
                BadgeMutation(user: $0, path: path, operation: operation, expiresAt: expiresAt, occurredAt: occurredAt)
            }
        case .everyone:
            return []
        }
    }
}
