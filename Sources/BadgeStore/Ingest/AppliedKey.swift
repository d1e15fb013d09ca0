public import BadgeCore

/// What ingest deduplicates by: an event id for one user, so that a multi-user event is
/// applied once to each of its users; a broadcast's id alone (`user` empty, which no user id is).
public struct AppliedKey: Hashable, Sendable {
    /// The user's id, or empty for a broadcast.
    public var user: String
    /// The event's id.
    public var eventID: String

    /// A key from its parts.
    public init(user: String, eventID: String) {
        self.user = user
        self.eventID = eventID
    }

    /// The ids of the users an event names (none for a broadcast).
    static func users(of operation: MappedOperation) -> [String] {
        guard case .users(let users) = operation.audience else { return [] }
        return users.map(\.rawValue)
    }

    /// The keys of one mapped event: one per user, or the broadcast's.
    public static func keys(of operation: MappedOperation) -> [AppliedKey] {
        switch operation.audience {
        case .users(let users): users.map { AppliedKey(user: $0.rawValue, eventID: operation.eventID.rawValue) }
        case .everyone: [AppliedKey(user: "", eventID: operation.eventID.rawValue)]
        }
    }
}
