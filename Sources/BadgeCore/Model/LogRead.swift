/// One read of a user's change log: the user's own versions after `after` (DESIGN §6a), as a
/// stream that holds the user's view at `after` asks for them.
public struct LogRead: Sendable, Hashable {
    public var user: UserID
    public var after: Int64

    public init(user: UserID, after: Int64) {
        self.user = user
        self.after = after
    }
}
