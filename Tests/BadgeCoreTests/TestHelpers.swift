import BadgeCore
import Foundation
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

extension BadgeTree {
    /// Applies `operation` at the path `text`.
    mutating func apply(_ operation: BadgeOperation, _ text: String, expiresAt: Date? = nil) throws {
        apply(operation, at: path(text), expiresAt: expiresAt, now: now)
    }

    /// The aggregate count shown at `text`, or nil when nothing is shown there.
    func shownCount(_ text: String, at instant: Date = now) throws -> Int64? {
        aggregates(now: instant)[path(text)]?.count
    }
}
