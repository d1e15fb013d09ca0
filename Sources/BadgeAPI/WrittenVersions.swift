import BadgeCore
import Synchronization

/// The versions this server's actions left users' trees at, for a while: a later read here
/// of such a user, with no version from the client, must not show an older tree from a read
/// replica that has not replayed the action yet (``ReadFloor``). A client that sends its
/// version (`If-None-Match`, `since`, `Last-Event-ID`) is kept from going back on any server.
final class WrittenVersions: Sendable {
    private struct Entry {
        var version: Int64
        var until: ContinuousClock.Instant
    }

    private let entries: Mutex<BoundedCache<UserID, Entry>>
    /// How long a version is kept: a replica further behind than this may show a client that
    /// sends no version its tree from before its action.
    let keep: Duration

    /// Keeps up to `capacity` users' versions, each for `keep`.
    init(capacity: Int = 100_000, keep: Duration = .seconds(60)) {
        entries = Mutex(BoundedCache(budget: capacity))
        self.keep = keep
    }

    /// `user`'s tree is at `version` after an action here.
    func record(_ user: UserID, version: Int64) {
        let until = ContinuousClock.now + keep
        entries.withLock { cache in
            let known = cache[user].map(\.version) ?? version
            cache.insert(Entry(version: max(known, version), until: until), for: user)
        }
    }

    /// The version a read of `user` must reach; nil when none is kept.
    func floor(for user: UserID) -> Int64? {
        entries.withLock { cache in
            guard let entry = cache[user] else { return nil }
            guard entry.until > .now else {
                cache.remove(user)
                return nil
            }
            return entry.version
        }
    }
}
