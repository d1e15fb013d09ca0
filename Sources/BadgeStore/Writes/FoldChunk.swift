/// How many users the next transaction of a fold takes (`BadgeStore.foldIncrements`), so that
/// each folds about `target` increments: a transaction folds every old increment of its users,
/// and holds their write sequences until it commits, so its size is how long their writers
/// wait. Users' histories differ, so the size follows what the last transaction found: its
/// increments per user.
///
/// Chosen by users' count alone (the shape before), one transaction of a bench's 10 million
/// increments over 200,000 users took 9,753 users and 500,115 increments: 13.7 s with those
/// users' writers waiting (BENCHMARKS.md, "A fold in transactions of a bounded size").
struct FoldChunk {
    /// About how many increments one transaction folds.
    let target: Int
    /// The users the next transaction takes (at least 1: a user with more than `target`
    /// increments is folded whole, in a transaction of its own).
    private(set) var users: Int

    /// The old increments the next transaction's users are found among: twice `users`, as a
    /// user's increments of one batch lie side by side in the table (each search reads from the
    /// table's start, past the rows folded before, so no more than that).
    var candidateRows: Int { users.multipliedReportingOverflow(by: 2).overflow ? Int.max : users * 2 }

    /// A chunk for `target` increments a transaction (at least 1), starting at a 64th of it in
    /// users, so that a first guess with long histories stays near the target.
    init(target: Int) {
        self.target = max(1, target)
        users = max(1, self.target / 64)
    }

    /// Takes the last transaction's finding: `taken` users, `folded` increments.
    mutating func record(users taken: Int, folded: Int) {
        guard taken > 0 else { return }
        let perUser = max(1, Double(folded) / Double(taken))
        // Below `Double(target)` the estimate converts without trapping, even at `Int.max`.
        let estimate = (Double(target) / perUser).rounded(.down)
        users = estimate >= Double(target) ? target : max(1, Int(estimate))
    }
}
