/// Who an event is for.
public enum Audience: Hashable, Sendable {
    /// These users: 1…1000 unique ids, in the order given.
    case users([UserID])
    /// Every user (a broadcast, stored once; DESIGN §2).
    case everyone
}
