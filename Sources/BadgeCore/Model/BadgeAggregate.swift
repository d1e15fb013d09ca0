/// What a shown node displays: its aggregate count and its own icon. Only shown nodes have one.
public struct BadgeAggregate: Hashable, Sendable {
    /// The node's own count plus the aggregate counts of its children, saturating at `Int64.max`.
    public var count: Int64
    /// The node's own icon (icons are not inherited).
    public var icon: BadgeIcon?
    /// What arrived after the user last saw the node or an ancestor, summed like ``count``.
    public var unseen: Int64

    /// An aggregate with the given count, icon and unseen part.
    public init(count: Int64, icon: BadgeIcon? = nil, unseen: Int64 = 0) {
        self.count = count
        self.icon = icon
        self.unseen = unseen
    }
}
