import BadgeCore
import Foundation
import Synchronization
import TestSupport

/// A fixed instant for tests.
let now = Date(timeIntervalSince1970: 1_750_000_000)

func icon(_ text: String) throws -> BadgeIcon {
    try BadgeIcon(validating: text)
}

/// The rejection of `json`, or nil if it decoded.
func rejection(_ json: String) -> EventRejection? {
    if case .failure(let rejection) = EventDecoder().decode(Array(json.utf8)) { return rejection }
    return nil
}

/// The event of `json`, or nil if it was rejected.
func event(_ json: String) -> BadgeEvent? {
    try? EventDecoder().decode(Array(json.utf8)).get()
}

/// The helper's clock: each operation applied with ``BadgeTree/apply(_:_:expiresAt:)`` occurs a
/// microsecond after the one before (in every test), so that they keep the order they are
/// written in, as a batch's mutations do.
private let helperClock = Atomic<Int>(0)

extension BadgeTree {
    /// Applies `operation` at the path `text`, as occurred a microsecond after the operation the
    /// helper applied before (from `now` less 100 s: later than `at(_:)`'s times).
    mutating func apply(_ operation: BadgeOperation, _ text: String, expiresAt: Date? = nil) throws {
        let tick = helperClock.add(1, ordering: .relaxed).newValue
        let time = Date(timeIntervalSince1970: ((now.timeIntervalSince1970 - 100) * 1_000_000 + Double(tick)) / 1_000_000)
        apply(operation, at: path(text), expiresAt: expiresAt, occurredAt: time, now: now)
    }

    /// The aggregate count shown at `text`, or nil when nothing is shown there.
    func shownCount(_ text: String, at instant: Date = now) throws -> Int64? {
        aggregates(now: instant)[path(text)]?.count
    }
}
