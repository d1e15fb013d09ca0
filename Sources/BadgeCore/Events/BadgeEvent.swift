public import Foundation

/// A decoded, validated event from the producers' topic (DESIGN §3).
public struct BadgeEvent: Hashable, Sendable {
    /// The event's unique id, used to skip duplicates.
    public var id: EventID
    /// Who the event is for.
    public var audience: Audience
    /// When the producer says it happened, if it said.
    public var occurredAt: Date?
    /// When what the event shows disappears, if ever.
    public var expiresAt: Date?
    /// What the event does.
    public var body: Body

    /// What an event does: a direct badge operation, or content for the rules to map.
    public enum Body: Hashable, Sendable {
        /// A direct operation on a path.
        case operation(path: BadgePath, operation: BadgeOperation)
        /// A content event: a rule type and string attributes for the rule's path template.
        case content(type: String, attributes: [String: String])
    }

    /// An event with the given fields.
    public init(id: EventID, audience: Audience, occurredAt: Date? = nil, expiresAt: Date? = nil, body: Body) {
        self.id = id
        self.audience = audience
        self.occurredAt = occurredAt
        self.expiresAt = expiresAt
        self.body = body
    }
}

extension BadgeEvent {
    /// The Kafka record key (DESIGN §3): the user id, the first of several, or `*` for a
    /// broadcast, so that one user's events stay ordered in one partition.
    public var recordKey: String {
        switch audience {
        case .users(let users): return users.first?.rawValue ?? "*"
        case .everyone: return "*"
        }
    }
}
