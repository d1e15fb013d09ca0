public import Foundation

extension Date {
    /// This instant to the whole microsecond, as PostgreSQL's `timestamptz` keeps it: two
    /// increments of one node at the same microsecond are one stored row, so the model keys
    /// them the same way.
    public var toMicroseconds: Date {
        Date(timeIntervalSince1970: (timeIntervalSince1970 * 1_000_000).rounded() / 1_000_000)
    }
}
