import Synchronization

/// What `reddot verify --json` prints: `{"users_checked", "mismatches": [...],
/// "users_with_mismatches", "users_repaired"}`.
public struct VerifyOutput: Encodable, Sendable {
    /// Users compared (or skipped as pending).
    public var usersChecked: Int
    /// Every mismatch, in user and path order.
    public var mismatches: [AggregateMismatch]
    /// Users with at least one mismatch.
    public var usersWithMismatches: Int
    /// Users recomputed by `--repair`.
    public var usersRepaired: Int

    enum CodingKeys: String, CodingKey {
        case usersChecked = "users_checked", mismatches, usersWithMismatches = "users_with_mismatches"
        case usersRepaired = "users_repaired"
    }

    /// The output of `report`, whose mismatches were `mismatches`.
    public init(report: VerifyReport, mismatches: [AggregateMismatch]) {
        usersChecked = report.usersChecked
        self.mismatches = mismatches
        usersWithMismatches = report.usersWithMismatches
        usersRepaired = report.usersRepaired
    }
}

extension VerifyReport {
    /// The summary line `reddot verify` writes on stderr; `repair` adds the users repaired.
    public func summary(repair: Bool) -> String {
        var summary = "checked \(usersChecked) users: \(mismatches) mismatched aggregates in \(usersWithMismatches) users"
        if repair { summary += "; repaired \(usersRepaired) users" }
        return summary
    }
}

extension AggregateMismatch {
    /// The line `reddot verify` prints for this mismatch: the user, the path, then the stored
    /// and recounted count and icon, and the unseen parts when they differ ("no row" where there
    /// is none).
    public var line: String {
        let unseenDiffers = storedUnseen != expectedUnseen
        func describe(_ count: Int64?, _ icon: String?, _ unseen: Int64?) -> String {
            guard let count else { return "no row" }
            return "count \(count)" + (icon.map { ", icon \($0)" } ?? "") + (unseenDiffers ? ", unseen \(unseen ?? 0)" : "")
        }
        return "user '\(user.rawValue)' \(path.rawValue): stored \(describe(storedCount, storedIcon, storedUnseen)); "
            + "recounted \(describe(expectedCount, expectedIcon, expectedUnseen))"
    }
}

/// The mismatches a verification reports, gathered from its callback (which may run on any thread).
public final class AggregateMismatchList: Sendable {
    private let items = Mutex<[AggregateMismatch]>([])

    /// An empty list.
    public init() {}

    /// Adds `item` at the end.
    public func append(_ item: AggregateMismatch) { items.withLock { $0.append(item) } }

    /// Every item, in the order added.
    public var all: [AggregateMismatch] { items.withLock { $0 } }
}
