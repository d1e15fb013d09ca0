import BadgeCore
import Metrics
import NIOCore
import Synchronization

/// Users' whole-tree answers (version and JSON), kept in memory and invalidated by the change
/// notifications the `ChangeHub` receives, so that a repeated read or poll of an unchanged tree
/// costs no database round trip.
///
/// Coherence: the rollup bumps a user's version and sends `NOTIFY` in one transaction, so an
/// answer can only go stale by a notification that has not arrived yet (as with a read replica,
/// a few milliseconds). Every notification for a user removes that user's entry; a broadcast
/// change, a reconnection of the listener, or the listener being down empties the cache and
/// stops it serving until the listener is back. A read that misses takes a ``Ticket`` first and
/// stores its answer only if no notification for that user (or for everyone) arrived meanwhile,
/// so an answer read before a change is never stored after that change's notification. Entries
/// are also never served past `maximumAge`, a bound for writers that do not notify (hand-made
/// SQL).
final class TreeCache: Sendable {
    struct Entry: Sendable {
        var version: Int64
        /// The JSON, in an array of its exact size (a `ByteBuffer` rounds its storage up to a
        /// power of two: 4 KiB for a 2.4 KB tree), so that the budget counts what is held.
        var bytes: [UInt8]
        var storedAt: ContinuousClock.Instant

        /// The answer's body.
        var json: ByteBuffer { ByteBuffer(bytes: bytes) }
    }

    /// Taken before a database read; `store` only keeps the answer if it is still current.
    struct Ticket: Sendable {
        fileprivate var stripe: Int
        fileprivate var stripeGeneration: UInt64
        fileprivate var generation: UInt64
    }

    private struct State {
        var entries: BoundedCache<UserID, Entry>
        /// Counts notifications per stripe of users (a user's stripe is a hash of its id).
        var stripeGenerations: [UInt64]
        /// Counts the events that concern everyone (broadcasts, reconnections).
        var generation: UInt64 = 0
        /// Whether notifications are flowing (the hub's listener is connected).
        var serving = false
    }

    private static let stripeCount = 1024
    /// Bytes counted per entry beyond its JSON (the key, the entry, the bookkeeping).
    private static let entryOverhead = 200

    private let state: Mutex<State>
    /// The most an entry may be served after it was read.
    let maximumAge: Duration
    /// Whether it holds anything at all (a budget of 0 turns it off).
    let isEnabled: Bool
    private let hits = Counter(label: "reddot_api_tree_cache_hits_total")
    private let misses = Counter(label: "reddot_api_tree_cache_misses_total")
    private let hitCount = Atomic<Int>(0)
    private let missCount = Atomic<Int>(0)
    private let flushes = Counter(label: "reddot_api_tree_cache_flushes_total")
    private let sizeGauge = Gauge(label: "reddot_api_tree_cache_bytes")

    /// A cache of up to `budgetBytes` of answers, each served for at most `maximumAge`.
    init(budgetBytes: Int, maximumAge: Duration) {
        self.state = Mutex(State(entries: BoundedCache(budget: budgetBytes), stripeGenerations: Array(repeating: 0, count: Self.stripeCount)))
        self.maximumAge = maximumAge
        self.isEnabled = budgetBytes > 0
    }

    /// The user's cached whole tree, if current and at `minimumVersion` or later (a client that
    /// has seen a later version, from a clear on another server, must not be sent back in time).
    func lookup(_ user: UserID, minimumVersion: Int64? = nil) -> Entry? {
        guard isEnabled else { return nil }
        let now = ContinuousClock.now
        let entry = state.withLock { state -> Entry? in
            guard state.serving, let entry = state.entries[user] else { return nil }
            if let minimumVersion, entry.version < minimumVersion { return nil }
            if now - entry.storedAt > maximumAge {
                state.entries.remove(user)
                return nil
            }
            return entry
        }
        if entry != nil {
            hits.increment()
            hitCount.add(1, ordering: .relaxed)
        } else {
            misses.increment()
            missCount.add(1, ordering: .relaxed)
        }
        return entry
    }

    /// Lookups answered from the cache and not, since the start.
    var statistics: TreeCacheStatistics {
        TreeCacheStatistics(hits: hitCount.load(ordering: .relaxed), misses: missCount.load(ordering: .relaxed))
    }

    /// A ticket for a read of `user`'s tree about to start; nil when nothing would be stored.
    func ticket(for user: UserID) -> Ticket? {
        guard isEnabled else { return nil }
        let stripe = Self.stripe(of: user)
        return state.withLock { state in
            guard state.serving else { return nil }
            return Ticket(stripe: stripe, stripeGeneration: state.stripeGenerations[stripe], generation: state.generation)
        }
    }

    /// Keeps `user`'s tree at `version`, read after `ticket` was taken, unless a notification for
    /// that user (or for everyone) has arrived since.
    func store(_ user: UserID, version: Int64, json: ByteBuffer, ticket: Ticket) {
        let entry = Entry(version: version, bytes: Array(json.readableBytesView), storedAt: .now)
        let bytes = state.withLock { state -> Int? in
            guard state.serving, state.generation == ticket.generation,
                state.stripeGenerations[ticket.stripe] == ticket.stripeGeneration
            else { return nil }
            if let current = state.entries[user], current.version >= version { return nil }
            state.entries.insert(entry, for: user, cost: entry.bytes.count + Self.entryOverhead)
            return state.entries.cost
        }
        if let bytes { sizeGauge.record(bytes) }
    }

    /// A notification for `user`: their cached tree is gone, and reads in flight are not stored.
    func invalidate(_ user: UserID) {
        guard isEnabled else { return }
        let stripe = Self.stripe(of: user)
        state.withLock { state in
            state.stripeGenerations[stripe] &+= 1
            state.entries.remove(user)
        }
    }

    /// A change for everyone (a broadcast), or missed notifications: empties the cache; it
    /// serves again only while `listening` is true.
    func invalidateAll(listening: Bool) {
        guard isEnabled else { return }
        state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll()
            state.serving = listening
        }
        flushes.increment()
        sizeGauge.record(0)
    }

    private static func stripe(of user: UserID) -> Int {
        Int(UInt(bitPattern: user.hashValue) % UInt(stripeCount))
    }
}

/// How often whole-tree reads were answered from the cache.
public struct TreeCacheStatistics: Sendable, Equatable {
    /// Reads answered from the cache.
    public var hits: Int
    /// Reads that went to the database.
    public var misses: Int

    /// Counts of hits and misses.
    public init(hits: Int, misses: Int) {
        self.hits = hits
        self.misses = misses
    }
}
