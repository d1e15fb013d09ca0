/// What one run of `BadgeStore.foldIncrements` did: the increments it folded, in how many
/// transactions, and the most one transaction folded (each holds its users' write sequences
/// while it runs, so its size bounds how long their writers wait).
public struct FoldReport: Sendable, Hashable {
    /// Increments and decrements folded into their states.
    public var increments = 0
    /// Transactions that folded at least one.
    public var transactions = 0
    /// The most increments one transaction folded.
    public var largestTransaction = 0

    /// A report of nothing folded.
    public init() {}

    /// Adds one transaction that folded `folded` increments.
    mutating func record(_ folded: Int) {
        guard folded > 0 else { return }
        increments += folded
        transactions += 1
        largestTransaction = max(largestTransaction, folded)
    }
}
