/// Who an event is for.
public enum Audience: Hashable, Sendable {
    /// These users: 1…1000 unique ids, in the order given.
    case users([UserID])
    /// Every user (a broadcast, stored once; DESIGN §2).
    case everyone
}

extension Audience {
    /// Why a broadcast cannot carry `operation`, or nil: a broadcast sets, increments or clears;
    /// decrements, items, seen and mutes are per user.
    public static func broadcastProblem(_ operation: BadgeOperation) -> String? {
        switch operation {
        case .set, .increment, .clear:
            return nil
        case .decrement, .addItem, .removeItem, .seen, .mute, .unmute:
            let op = OperationGrammar.Op(operation).rawValue
            return "op '\(op)' is per user; a broadcast ('audience': 'all') takes 'set', 'incr' or 'clear'"
        }
    }
}
