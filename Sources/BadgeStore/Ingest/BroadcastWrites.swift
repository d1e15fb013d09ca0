import BadgeCore
import Foundation
import LibPQ

/// The broadcasts of one batch, in record order, reduced to two statements: withdraw the
/// stored broadcasts that the batch's clears hit, then insert the batch's new broadcasts (those
/// a later clear of the batch hits are inserted already withdrawn).
struct BroadcastWrites {
    struct NewBroadcast {
        var eventID: String
        var path: BadgePath
        var count: Int64
        var icon: String?
        var expiresAt: Date?
        var withdrawn = false
    }

    var created: [NewBroadcast] = []
    var clears: [(path: BadgePath, force: Bool)] = []

    mutating func append(_ operation: MappedOperation) {
        switch operation.operation {
        case .set(let count, let icon):
            created.append(
                NewBroadcast(
                    eventID: operation.eventID.rawValue, path: operation.path, count: max(count, 0),
                    icon: icon?.rawValue, expiresAt: operation.expiresAt))
        case .increment(let by):
            created.append(
                NewBroadcast(
                    eventID: operation.eventID.rawValue, path: operation.path, count: max(by, 0), icon: nil,
                    expiresAt: operation.expiresAt))
        case .clear(let force):
            for index in created.indices where !created[index].withdrawn {
                let path = created[index].path
                if path == operation.path || (force && path.isWithin(operation.path)) {
                    created[index].withdrawn = true
                }
            }
            clears.append((operation.path, force))
        case .decrement, .addItem, .removeItem, .seen, .mute, .unmute:
            // The decoder and the rules refuse these for broadcasts (they are per user).
            break
        }
    }

    /// Writes the batch's broadcasts and, if the set of active ones changed, bumps the
    /// broadcast version (which notifies every query service).
    func write(on connection: PGConnection) throws(PGError) {
        guard !clears.isEmpty || !created.isEmpty else { return }
        // Before the rows: they are stamped with the broadcast version this transaction makes.
        try BadgeStore.lockBroadcastsExclusive(on: connection)
        var changed = false
        if !clears.isEmpty {
            changed = try connection.query(
                IngestSQL.withdrawBroadcasts, [clears.map(\.path.rawValue), clears.map(\.force)]
            ).affectedRows > 0
        }
        if !created.isEmpty {
            changed = changed || created.contains { !$0.withdrawn }
            try connection.query(
                IngestSQL.insertBroadcasts,
                [
                    created.map(\.eventID), created.map(\.path.rawValue), created.map(\.count),
                    created.map(\.icon), created.map(\.expiresAt), created.map(\.withdrawn),
                ])
        }
        if changed {
            try BadgeStore.bumpBroadcastVersion(on: connection)
        }
    }
}
