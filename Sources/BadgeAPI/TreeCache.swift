import BadgeCore
import BadgeStore
import Metrics
import NIOCore
import Synchronization

/// Users' whole-tree answers (version and JSON), kept in memory and invalidated by the change
/// notifications the `ChangeHub` receives, so that a repeated read or poll of an unchanged tree
/// costs no database round trip.
///
/// Coherence: the rollup bumps a user's version and sends `NOTIFY` in one transaction, so an
/// answer can only go stale by a notification that has not arrived yet (as with a read replica,
/// a few milliseconds). Every notification for a user makes that user's entry stale: it is not
/// served, but the next read may bring it current by applying the versions logged since
/// (``staleView(of:)``, then ``store(_:view:json:ticket:readAt:)``) instead of reading the tree. A broadcast
/// change the hub has read (``setBroadcasts(_:)``) leaves the entries in place: each keeps the
/// user's view in its parts, and a lookup rebases an entry read at an older broadcast version on
/// the new set and renders it again, with no database read. A broadcast change the hub could not
/// read, a reconnection of the listener, or the listener being down empties the cache and stops it
/// serving until the listener is back. A read that misses takes a ``Ticket`` first and
/// stores its answer only if no notification for that user (or for everyone) arrived meanwhile,
/// so an answer read before a change is never stored after that change's notification. Entries
/// are also never served past `maximumAge`, a bound for writers that do not notify (hand-made
/// SQL).
final class TreeCache: Sendable {
    struct Entry: Sendable {
        /// The user's whole tree in its parts (own aggregates, broadcasts, dismissals).
        var view: UserView
        /// The JSON of `view`, in an array of its exact size (a `ByteBuffer` rounds its storage
        /// up to a power of two: 4 KiB for a 2.4 KB tree), so that the budget counts what is held.
        var bytes: [UInt8]
        var storedAt: ContinuousClock.Instant
        /// False once a notification for the user arrived: not served, only followed.
        var isCurrent = true

        /// The answer's version.
        var version: Int64 { view.version }
        /// The answer's body.
        var json: ByteBuffer { ByteBuffer(bytes: bytes) }
        /// What the budget counts: the JSON twice (the view holds about as much), and the rest.
        var cost: Int { 2 * bytes.count + TreeCache.entryOverhead }
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
        /// The set of active broadcasts the hub last read (nil: not following).
        var broadcasts: BroadcastSet?
        /// How answers are displayed.
        var display = BadgeDisplay()
    }

    private static let stripeCount = 1024
    /// Bytes counted per entry beyond its JSON (the key, the entry, the bookkeeping).
    fileprivate static let entryOverhead = 200

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
    private let rebases = Counter(label: "reddot_api_tree_cache_rebases_total")
    private let sizeGauge = Gauge(label: "reddot_api_tree_cache_bytes")

    /// A cache of up to `budgetBytes` of answers, each served for at most `maximumAge`.
    init(budgetBytes: Int, maximumAge: Duration) {
        self.state = Mutex(State(entries: BoundedCache(budget: budgetBytes), stripeGenerations: Array(repeating: 0, count: Self.stripeCount)))
        self.maximumAge = maximumAge
        self.isEnabled = budgetBytes > 0
    }

    /// The user's cached whole tree, if current and at `minimumVersion` or later (a client that
    /// has seen a later version, from a clear on another server, must not be sent back in time).
    /// An entry read at an older broadcast version is rebased on the hub's set and rendered again.
    func lookup(_ user: UserID, minimumVersion: Int64? = nil) -> Entry? {
        guard isEnabled else { return nil }
        let now = ContinuousClock.now
        let found = state.withLock { state -> (entry: Entry, broadcasts: BroadcastSet?, display: BadgeDisplay)? in
            guard state.serving, let entry = state.entries[user], entry.isCurrent else { return nil }
            if now - entry.storedAt > maximumAge {
                state.entries.remove(user)
                return nil
            }
            return (entry, state.broadcasts, state.display)
        }
        var entry = found?.entry
        if let found, let set = found.broadcasts, set.version > found.entry.view.broadcastVersion,
            let rebased = found.entry.view.rebased(on: set)
        {
            let tree = UserBadgeTree(
                user: user, version: rebased.version, aggregates: rebased.visibleAggregates, at: .root, depth: nil, display: found.display,
                mutes: rebased.mutes)
            let fresh = Entry(view: rebased, bytes: Array(TreeJSON.encode(tree).readableBytesView), storedAt: found.entry.storedAt)
            rebases.increment()
            entry = fresh
            state.withLock { state in
                // Unless a notification replaced or removed it meanwhile.
                guard let current = state.entries[user], current.isCurrent, current.view == found.entry.view else { return }
                state.entries.insert(fresh, for: user, cost: fresh.cost)
            }
        }
        if let minimumVersion, let current = entry, current.version < minimumVersion { entry = nil }
        if entry != nil {
            hits.increment()
            hitCount.add(1, ordering: .relaxed)
        } else {
            misses.increment()
            missCount.add(1, ordering: .relaxed)
        }
        return entry
    }

    /// The set of active broadcasts the hub follows (nil: it cannot; entries are then dropped by
    /// ``invalidateAll(listening:)``).
    func setBroadcasts(_ set: BroadcastSet?) {
        state.withLock { $0.broadcasts = set }
    }

    /// How the answers are displayed (the API's setting).
    func setDisplay(_ display: BadgeDisplay) {
        state.withLock { $0.display = display }
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

    /// `user`'s stale entry's view (one a notification has made stale, within its maximum age),
    /// when its tree was read from the database, and a ticket for storing what it becomes once
    /// the versions logged since are applied (store it with that `readAt`: an entry followed
    /// through the log still ages from its last read, the bound for writers that do not
    /// notify); nil when there is none.
    func staleView(of user: UserID) -> (view: UserView, readAt: ContinuousClock.Instant, ticket: Ticket)? {
        guard isEnabled else { return nil }
        let stripe = Self.stripe(of: user)
        let now = ContinuousClock.now
        return state.withLock { state in
            guard state.serving, let entry = state.entries[user], !entry.isCurrent, now - entry.storedAt <= maximumAge else { return nil }
            return (entry.view, entry.storedAt, Ticket(stripe: stripe, stripeGeneration: state.stripeGenerations[stripe], generation: state.generation))
        }
    }

    /// Keeps `user`'s whole tree (`view`, rendered as `json`), read after `ticket` was taken,
    /// unless a notification for that user (or for everyone) has arrived since.
    func store(_ user: UserID, view: UserView, json: ByteBuffer, ticket: Ticket, readAt: ContinuousClock.Instant = .now) {
        let entry = Entry(view: view, bytes: Array(json.readableBytesView), storedAt: readAt)
        let bytes = state.withLock { state -> Int? in
            guard state.serving, state.generation == ticket.generation,
                state.stripeGenerations[ticket.stripe] == ticket.stripeGeneration
            else { return nil }
            if let current = state.entries[user], current.isCurrent, current.version >= entry.version { return nil }
            state.entries.insert(entry, for: user, cost: entry.cost)
            return state.entries.cost
        }
        if let bytes { sizeGauge.record(bytes) }
    }

    /// A notification for `user`: their cached tree is no longer served (only followed, see
    /// ``staleView(of:)``), and reads in flight are not stored.
    func invalidate(_ user: UserID) {
        guard isEnabled else { return }
        let stripe = Self.stripe(of: user)
        state.withLock { state in
            state.stripeGenerations[stripe] &+= 1
            guard var entry = state.entries[user], entry.isCurrent else { return }
            entry.isCurrent = false
            state.entries.insert(entry, for: user, cost: entry.cost)
        }
    }

    /// A change for everyone that the hub could not read (a broadcast), or missed
    /// notifications: empties the cache; it serves again only while `listening` is true.
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
