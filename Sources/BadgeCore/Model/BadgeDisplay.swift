/// The display hint of answers: a count above 0 is shown as a number, capped as `99+`; a count of
/// 0 is a dot (with the node's icon, if it has one). Number beats icon beats dot.
public struct BadgeDisplay: Hashable, Sendable {
    /// The largest number shown as such; above it the text is `"\(countCap)+"`. Values below 1
    /// are taken as 1.
    public var countCap: Int64

    /// A display with the given cap (99 by default).
    public init(countCap: Int64 = 99) {
        self.countCap = countCap
    }

    /// The badge text of `count`: `"7"`, `"99+"` above the cap, `nil` for 0 (a dot or an icon).
    public func text(for count: Int64) -> String? {
        guard count > 0 else { return nil }
        let cap = max(countCap, 1)
        return count > cap ? "\(cap)+" : "\(count)"
    }
}
