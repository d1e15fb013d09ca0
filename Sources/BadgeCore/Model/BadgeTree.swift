public import Foundation

/// An in-memory model of one user's badges: the own state of each node, and the aggregates
/// derived from it (DESIGN §2).
///
/// It is the reference model of the rules: the store computes the same aggregates in SQL, and
/// the property tests compare the two.
///
/// A node's own count is its counter plus its live items (``items``). The counter is the state
/// the node's latest set left (``states``, with the set's time) plus the node's increments and
/// decrements (``increments``, a decrement as a negative amount), each kept with the time it
/// occurred, folded in that order (``BadgeState/folded(_:)``). Every operation follows rules
/// that give the same tree whatever order the operations arrive in:
///
/// - an item is live when it was added, never removed, and the earliest time it was added is
///   later than every clear of its node (and every forced clear of an ancestor or of the node);
/// - an increment or a decrement counts when it occurred later than every such clear and than
///   the set its state holds;
/// - a set is the node's value as of its time: it holds unless a later set holds or a clear
///   that reaches the node occurred at or after it, and the increments and decrements that
///   occurred up to it go; its icon and expiry come with it;
/// - a clear takes a set only when the set occurred at or before it;
/// - so adding twice counts once, a remove that arrives before its add wins, a decrement that
///   arrives before its increment still takes it, and a clear applies to what occurred up to
///   its time, whichever arrives first.
///
/// The model keeps what those rules need: removed and cleared items (``goneItems``, the store's
/// tombstones) and each clear's latest time (``clearMarks``).
///
/// Seen: a `seen` of a node covers its whole subtree. Each counter state keeps how much of its
/// count was seen (``BadgeState/seenCount``: all of it when a `seen` that covers the node
/// occurred at or after the set, else none); an increment, a decrement or an item is unseen while
/// it occurred after every `seen` that covers its node (``seenMarks``: order-free, like clears).
/// A node's `unseen` is the unseen part of its state, increments and items, summed up the tree
/// like counts.
public struct BadgeTree: Sendable, Equatable {
    /// A node and an item of it.
    public struct ItemKey: Hashable, Sendable {
        /// The node.
        public var path: BadgePath
        /// The item.
        public var item: ItemID
    }

    /// A clear's reach: one node, or (`subtree`) a node and everything below it.
    public struct MarkKey: Hashable, Sendable {
        /// The node cleared.
        public var path: BadgePath
        /// Whether the clear was forced (it reaches the whole subtree).
        public var subtree: Bool
    }

    /// The own counter state of each node that has one (expired states stay until overwritten or
    /// cleared, but count as absent): what its latest set left, or a carrier of its increments.
    public private(set) var states: [BadgePath: BadgeState]
    /// The increments (above 0) and decrements (below 0) of each node that has a state, by the
    /// time they occurred (to the microsecond; amounts at one time add up).
    public private(set) var increments: [BadgePath: [Date: Int64]] = [:]
    /// The first version of the tree each increment can show in (see ``nextVersion``).
    public private(set) var incrementVersions: [BadgePath: [Date: Int64]] = [:]
    /// The live items of each node, with the earliest time each was added.
    public private(set) var items: [BadgePath: [ItemID: Date]] = [:]
    /// Items removed or cleared: they never come back.
    public private(set) var goneItems: Set<ItemKey> = []
    /// The latest time of the clears of each reach.
    public private(set) var clearMarks: [MarkKey: Date] = [:]
    /// The latest mute or unmute of each node (``BadgeMute``): a node muted at a time gives its
    /// ancestors nothing then.
    public private(set) var mutes: [BadgePath: BadgeMute] = [:]
    /// The latest time of the `seen`s of each node (each covers the node's subtree).
    public private(set) var seenMarks: [BadgePath: Date] = [:]
    /// The first version of the tree each live item can show in (see ``nextVersion``).
    public private(set) var itemVersions: [ItemKey: Int64] = [:]
    /// The increments a seen at a rendered version marked seen, by node and time
    /// (``markShownSeen(_:through:settled:now:)``).
    public private(set) var seenIncrementTimes: [BadgePath: Set<Date>] = [:]
    /// The live items a seen at a rendered version marked seen.
    public private(set) var seenItems: Set<ItemKey> = []
    /// The first version of the user's tree that what is applied from now on can show in: the
    /// store takes the user's version plus one when it applies a batch. A clear at a version the
    /// client rendered (``clearShown(_:subtree:through:settled:now:)``) takes only what could
    /// show in it.
    public var nextVersion: Int64 = 1

    /// An empty tree.
    public init() {
        self.states = [:]
    }

    /// A tree holding the given own states.
    public init(states: [BadgePath: BadgeState]) {
        self.states = states
    }

    /// Applies one operation to the node at `path`.
    ///
    /// - Parameters:
    ///   - expiresAt: the expiry of what a set or increment shows (see ``BadgeMutation``).
    ///   - occurredAt: when it happened; nil, or later than `now`, counts as `now`. Times are
    ///     kept to the microsecond, as the store keeps them.
    ///   - now: the instant the operation takes effect; a state expired at `now` counts as absent.
    public mutating func apply(
        _ operation: BadgeOperation, at path: BadgePath, expiresAt: Date? = nil, occurredAt: Date? = nil, now: Date
    ) {
        let time = (occurredAt.map { min($0, now) } ?? now).toMicroseconds
        switch operation {
        case .addItem(let item):
            addItem(item, at: path, occurredAt: time)
        case .removeItem(let item):
            removeItem(item, at: path)
        case .clear(let force):
            markCleared(path, subtree: force, through: time)
            if force {
                clearSubtree(at: path, through: time, now: now)
            } else {
                clearCounter(path, through: time, now: now)
            }
        case .seen:
            markSeen(path, through: time, now: now)
        case .set(let count, let icon):
            applySet(BadgeSet(count: count, icon: icon, expiresAt: expiresAt, at: time), at: path, now: now)
        case .increment(let by):
            guard by > 0 else { return }
            increment(path, by: by, occurredAt: time, expiresAt: expiresAt, now: now)
        case .decrement(let by):
            guard by > 0 else { return }
            increment(path, by: -by, occurredAt: time, expiresAt: nil, now: now)
        case .mute(let until):
            guard path != .root else { return }
            recordMute(BadgeMute(muted: true, until: until, occurredAt: time), at: path)
        case .unmute:
            guard path != .root else { return }
            recordMute(BadgeMute(muted: false, until: nil, occurredAt: time), at: path)
        }
    }

    /// Adds an increment of `by` (a decrement when below 0) that occurred at `occurredAt` to the
    /// node at `path`, unless a clear that reaches the node, or the set its state holds, is at or
    /// after that time. The node's state is made or kept: an absent or expired one becomes a
    /// ``BadgeState/carrier(expiresAt:shownIn:setAt:expiresFrom:)`` (an expired one's increments
    /// go); an unexpired one takes `expiresAt` when given, unless its expiry was given later.
    public mutating func increment(_ path: BadgePath, by: Int64, occurredAt: Date, expiresAt: Date?, now: Date) {
        let time = occurredAt.toMicroseconds
        guard clearedThrough(path).map({ time > $0 }) ?? true else { return }
        if let state = states[path], !state.isExpired(at: now) {
            if let setAt = state.setAt, time <= setAt { return }
            if let expiresAt { states[path]?.takeExpiry(expiresAt, givenAt: time) }
        } else {
            states[path] = .carrier(expiresAt: expiresAt, shownIn: nextVersion, expiresFrom: time)
            setIncrements(path, nil)
        }
        increments[path, default: [:]][time, default: 0].addSaturating(by)
        incrementVersions[path, default: [:]][time] = nextVersion
        seenIncrementTimes[path]?.remove(time)
    }

    /// Replaces the increments of `path`, keeping the versions of those that stay.
    private mutating func setIncrements(_ path: BadgePath, _ kept: [Date: Int64]?) {
        let kept = kept?.isEmpty == true ? nil : kept
        increments[path] = kept
        incrementVersions[path] = kept.map { kept in (incrementVersions[path] ?? [:]).filter { kept[$0.key] != nil } }
        seenIncrementTimes[path] = kept.flatMap { kept in seenIncrementTimes[path]?.filter { kept[$0] != nil } }
    }

    /// Whether the increment of `path` at `time` is seen: marked so by a seen at a version, or
    /// covered by a seen's time.
    func isSeenIncrement(_ path: BadgePath, at time: Date) -> Bool {
        if seenIncrementTimes[path]?.contains(time) == true { return true }
        return seenThrough(path).map { time <= $0 } ?? false
    }

    /// Whether a row whose first version is `first` showed in `version` (with `settled`, the
    /// user's version when nothing waited for the rollup: what shows in no version yet showed
    /// in that one).
    static func isShown(_ first: Int64, through version: Int64, settled: Int64?) -> Bool {
        min(first, settled ?? first) <= version
    }

    /// Marks `path` and its subtree seen up to `through`: each unexpired counter within it whose
    /// set occurred up to then has seen its whole count, and the increments and items that
    /// occurred up to then are seen.
    public mutating func markSeen(_ path: BadgePath, through: Date, now: Date) {
        markItemsSeen(path, through: through)
        markCountersSeen(path, through: through, now: now)
    }

    /// The items' and increments' part of a `seen` of `path` up to `through` (a batch's seen
    /// marks).
    public mutating func markItemsSeen(_ path: BadgePath, through: Date) {
        seenMarks[path] = max(seenMarks[path] ?? through, through)
    }

    /// The counters' part of a `seen` of `path` up to `through`: each unexpired counter within it
    /// whose set occurred up to then (or that no timed set left) has seen its whole count.
    public mutating func markCountersSeen(_ path: BadgePath, through: Date, now: Date) {
        for (node, state) in states where node.isWithin(path) && !state.isExpired(at: now) {
            if let setAt = state.setAt, setAt > through { continue }
            states[node]?.seenCount = state.count
        }
    }

    /// The latest `seen` that covers `path` (of it or of an ancestor).
    public func seenThrough(_ path: BadgePath) -> Date? {
        var latest: Date?
        var node: BadgePath? = path
        while let current = node {
            if let mark = seenMarks[current] { latest = max(latest ?? mark, mark) }
            node = current.parent
        }
        return latest
    }

    /// Records a mute or unmute of `path` unless one of a later time holds
    /// (``BadgeMute/supersedes(_:)``), whatever order they arrive in.
    public mutating func recordMute(_ mute: BadgeMute, at path: BadgePath) {
        if let held = mutes[path], !mute.supersedes(held) { return }
        mutes[path] = mute
    }

    /// The nodes muted at `now` (``BadgeMute/isActive(at:)``).
    public func mutedPaths(at now: Date) -> Set<BadgePath> {
        Set(mutes.compactMap { $0.value.isActive(at: now) ? $0.key : nil })
    }

    /// The nodes muted at `now` as answers list them, by path.
    public func mutedNodes(at now: Date) -> [MutedNode] {
        mutes.compactMap { $0.value.isActive(at: now) ? MutedNode(path: $0.key, until: $0.value.until) : nil }.sorted { $0.path < $1.path }
    }

    /// Applies one mutation (its operation, path, expiry and time).
    public mutating func apply(_ mutation: BadgeMutation, now: Date) {
        apply(mutation.operation, at: mutation.path, expiresAt: mutation.expiresAt, occurredAt: mutation.occurredAt, now: now)
    }

    /// Applies a set of the node at `path` (``BadgeSet``): nothing when a clear that reaches the
    /// node occurred at or after it, or when the node's unexpired state holds a set that
    /// supersedes it; else the increments and decrements that occurred up to it go (all of an
    /// expired state's) and the state becomes the set's, a dot even at 0, seen in full when a seen
    /// that covers the node occurred at or after it, with the set's expiry unless a later
    /// increment gave one.
    public mutating func applySet(_ set: BadgeSet, at path: BadgePath, now: Date) {
        if let cleared = clearedThrough(path), set.at <= cleared { return }
        let seen = seenThrough(path).map { set.at <= $0 } ?? false
        var replacement = BadgeState(
            count: set.count, icon: set.icon, expiresAt: set.expiresAt, seenCount: seen ? set.count : 0, shownIn: nextVersion,
            setAt: set.at, expiresFrom: set.at)
        if let state = states[path], !state.isExpired(at: now) {
            guard set.supersedes(state) else { return }
            setIncrements(path, (increments[path] ?? [:]).filter { $0.key > set.at })
            // An expiry a later increment gave stays, as it would had the set arrived first.
            if let from = state.expiresFrom, from > set.at, let expiresAt = state.expiresAt {
                replacement.takeExpiry(expiresAt, givenAt: from)
            }
        } else {
            setIncrements(path, nil)
        }
        states[path] = replacement
    }

    /// Clears the counter of `path` up to `through`: the increments and decrements that occurred
    /// up to then go, and the state too unless its set occurred later (then nothing changes) or
    /// later increments stay (then it carries them: count 0, no icon, nothing seen, the expiry
    /// only when given after `through`). An expired state goes with all its increments.
    public mutating func clearCounter(_ path: BadgePath, through: Date, now: Date) {
        guard let state = states[path] else { return }
        guard !state.isExpired(at: now) else {
            states[path] = nil
            setIncrements(path, nil)
            return
        }
        if let setAt = state.setAt, setAt > through { return }
        let later = (increments[path] ?? [:]).filter { $0.key > through }
        let expiryStays = state.expiresFrom.map { $0 > through } ?? false
        states[path] = later.isEmpty
            ? nil
            : .carrier(
                expiresAt: expiryStays ? state.expiresAt : nil, shownIn: state.shownIn, setAt: state.setAt,
                expiresFrom: state.expiresFrom)
        setIncrements(path, later)
    }

    /// The node's increments and decrements in the order they occurred, each with whether it is
    /// seen, as ``BadgeState/folded(_:)`` takes them.
    func contributions(of path: BadgePath) -> [(amount: Int64, seen: Bool)] {
        (increments[path] ?? [:]).sorted { $0.key < $1.key }.map { (amount: $0.value, seen: isSeenIncrement(path, at: $0.key)) }
    }

    /// A forced clear's counter part: every counter within the subtree of `path` is cleared
    /// through `through` (its items go with ``markCleared(_:subtree:through:)``).
    public mutating func clearSubtree(at path: BadgePath, through: Date, now: Date) {
        for node in states.keys where node.isWithin(path) {
            clearCounter(node, through: through, now: now)
        }
    }

    /// The latest clear that reaches `path`: its own clears, and the forced clears of it and of
    /// its ancestors.
    public func clearedThrough(_ path: BadgePath) -> Date? {
        var latest = clearMarks[MarkKey(path: path, subtree: false)]
        var node: BadgePath? = path
        while let current = node {
            if let mark = clearMarks[MarkKey(path: current, subtree: true)] {
                latest = max(latest ?? mark, mark)
            }
            node = current.parent
        }
        return latest
    }

    /// Records a clear of `path` (with `subtree`, of its whole subtree) up to `through`: every
    /// live item it reaches that occurred up to then is gone.
    public mutating func markCleared(_ path: BadgePath, subtree: Bool, through: Date) {
        let key = MarkKey(path: path, subtree: subtree)
        clearMarks[key] = max(clearMarks[key] ?? through, through)
        for (node, live) in items where subtree ? node.isWithin(path) : node == path {
            for (item, occurredAt) in live where occurredAt <= through {
                removeItem(item, at: node)
            }
        }
    }

    /// Adds `item` to the node at `path`, as occurred at `occurredAt` (see the type's rules).
    public mutating func addItem(_ item: ItemID, at path: BadgePath, occurredAt: Date) {
        let key = ItemKey(path: path, item: item)
        guard !goneItems.contains(key) else { return }
        if let cleared = clearedThrough(path), occurredAt <= cleared {
            removeItem(item, at: path)
            return
        }
        if items[path]?[item] == nil { itemVersions[key] = nextVersion }
        let earliest = min(items[path]?[item] ?? occurredAt, occurredAt)
        items[path, default: [:]][item] = earliest
    }

    /// Removes `item` from the node at `path` for good.
    public mutating func removeItem(_ item: ItemID, at path: BadgePath) {
        goneItems.insert(ItemKey(path: path, item: item))
        itemVersions[ItemKey(path: path, item: item)] = nil
        seenItems.remove(ItemKey(path: path, item: item))
        items[path]?[item] = nil
        if items[path]?.isEmpty == true { items[path] = nil }
    }

    /// A clear at the version the client rendered: of `path` (with `subtree`, of its whole
    /// subtree), only what could show in version `through` goes (items for good, increments,
    /// and the state, which carries the increments that stay); what arrived after it stays.
    /// With `settled` (the user's version, when no change waits for the rollup), what shows in
    /// no version yet counts as shown in that one. An expired state goes with its increments.
    /// No clear mark is left: what occurred earlier but arrives later was not shown, and stays.
    public mutating func clearShown(_ path: BadgePath, subtree: Bool, through version: Int64, settled: Int64?, now: Date) {
        func shown(_ first: Int64) -> Bool { Self.isShown(first, through: version, settled: settled) }
        func reached(_ node: BadgePath) -> Bool { subtree ? node.isWithin(path) : node == path }
        for (node, live) in items where reached(node) {
            for item in live.keys where shown(itemVersions[ItemKey(path: node, item: item)] ?? 0) {
                removeItem(item, at: node)
            }
        }
        for (node, state) in states where reached(node) {
            guard !state.isExpired(at: now) else {
                states[node] = nil
                setIncrements(node, nil)
                continue
            }
            let versions = incrementVersions[node] ?? [:]
            let later = (increments[node] ?? [:]).filter { !shown(versions[$0.key] ?? 0) }
            setIncrements(node, later)
            // A state a timed set left stays as a carrier of its time: a set or an increment that
            // occurred before it and arrives later would have been replaced by it.
            if shown(state.shownIn) {
                states[node] = later.isEmpty && state.setAt == nil
                    ? nil
                    : .carrier(expiresAt: state.expiresAt, shownIn: state.shownIn, setAt: state.setAt, expiresFrom: state.expiresFrom)
            }
        }
    }

    /// A seen at the version the client rendered: within the subtree of `path`, what could show
    /// in version `through` is seen (increments and items marked, unexpired states' counts);
    /// what arrived after it stays unseen (`settled` as for
    /// ``clearShown(_:subtree:through:settled:now:)``). No seen mark is left: what occurred
    /// earlier but arrives later was not shown, and stays unseen.
    public mutating func markShownSeen(_ path: BadgePath, through version: Int64, settled: Int64?, now: Date) {
        func shown(_ first: Int64) -> Bool { Self.isShown(first, through: version, settled: settled) }
        for (key, first) in itemVersions where key.path.isWithin(path) && shown(first) {
            seenItems.insert(key)
        }
        for (node, versions) in incrementVersions where node.isWithin(path) {
            for (time, first) in versions where shown(first) { seenIncrementTimes[node, default: []].insert(time) }
        }
        for (node, state) in states where node.isWithin(path) && !state.isExpired(at: now) && shown(state.shownIn) {
            states[node]?.seenCount = state.count
        }
    }

    /// Folds the increments and decrements that show in version `version` (their first version
    /// at most that) into their states, as far as none that shows in no such version occurred
    /// before them: each state becomes its counter with them (``BadgeState/folded(_:)``: count,
    /// seen part, dot and icon), its set's time kept. What shows stays the same; from then on
    /// they go as what sets left does (a clear takes them whatever its time). The store folds
    /// increments stored longer than the dedupe retention, so that a counter keeps few rows.
    public mutating func foldIncrements(shownThrough version: Int64) {
        for (path, versions) in incrementVersions {
            guard var state = states[path] else { continue }
            let rows = increments[path] ?? [:]
            let firstYoung = rows.keys.filter { (versions[$0] ?? 0) > version }.min()
            let old = rows.keys.filter { time in (versions[time] ?? 0) <= version && firstYoung.map { time < $0 } ?? true }.sorted()
            guard !old.isEmpty else { continue }
            let folded = state.folded(old.map { (amount: rows[$0] ?? 0, seen: isSeenIncrement(path, at: $0)) })
            state.count = folded.count
            state.seenCount = folded.count - folded.unseen
            state.keepsDot = folded.dot
            if !folded.icon { state.icon = nil }
            states[path] = state
            let gone = Set(old)
            setIncrements(path, rows.filter { !gone.contains($0.key) })
        }
    }

    /// The own count, icon and unseen part of every node that shows something: its unexpired
    /// counter state with its increments, and its live items.
    public func ownCounts(now: Date) -> [BadgePath: BadgeAggregate] {
        var result: [BadgePath: BadgeAggregate] = [:]
        for (path, state) in states where !state.isExpired(at: now) {
            let counter = state.folded(contributions(of: path))
            if counter.dot || counter.count > 0 {
                result[path] = BadgeAggregate(count: counter.count, icon: counter.icon ? state.icon : nil, unseen: counter.unseen)
            }
        }
        for (path, live) in items where !live.isEmpty {
            let seen = seenThrough(path)
            let unseen = live.filter { item, occurredAt in
                !seenItems.contains(ItemKey(path: path, item: item)) && (seen.map { occurredAt > $0 } ?? true)
            }.count
            result[path, default: BadgeAggregate(count: 0)].count.addSaturating(Int64(live.count))
            result[path]?.unseen.addSaturating(Int64(unseen))
        }
        return result
    }

    /// Each node's counter as one state, its increments and decrements folded in
    /// (``BadgeState/folded(_:)``). A counter that shows nothing is left out; the others show a
    /// dot. Expired states are kept, as in ``states``; versions and sets' times are left out.
    public var counters: [BadgePath: BadgeState] {
        var result: [BadgePath: BadgeState] = [:]
        for (path, state) in states {
            let folded = state.folded(contributions(of: path))
            guard folded.dot || folded.count > 0 else { continue }
            result[path] = BadgeState(
                count: folded.count, icon: folded.icon ? state.icon : nil, expiresAt: state.expiresAt,
                seenCount: folded.count - folded.unseen)
        }
        return result
    }

    /// The aggregate of every shown node, ancestors included; expired own states are ignored.
    ///
    /// A node's count is its own count (counter plus live items) plus its children's (saturating
    /// at `Int64.max`); it is shown when it has an own state, a live item or a shown child; its
    /// icon is its own. With `modes`, counts follow them, and a node muted at `now` gives its
    /// ancestors nothing (``AggregationModes/aggregate(own:muted:)``).
    public func aggregates(now: Date, modes: AggregationModes = .none) -> [BadgePath: BadgeAggregate] {
        let muted = mutedPaths(at: now)
        guard modes.entries.isEmpty, muted.isEmpty else { return modes.aggregate(own: ownCounts(now: now), muted: muted) }
        var result: [BadgePath: BadgeAggregate] = [:]
        for (path, own) in ownCounts(now: now) {
            result[path, default: BadgeAggregate(count: 0)].count.addSaturating(own.count)
            result[path]?.unseen.addSaturating(own.unseen)
            result[path]?.icon = own.icon
            var ancestor = path.parent
            while let current = ancestor {
                result[current, default: BadgeAggregate(count: 0)].count.addSaturating(own.count)
                result[current]?.unseen.addSaturating(own.unseen)
                ancestor = current.parent
            }
        }
        return result
    }

    /// The node at `path` as answers show it, or nil when nothing is shown there (`root` always
    /// answers; see ``BadgeNode/build(aggregates:at:depth:display:)``).
    public func node(
        at path: BadgePath, depth: Int? = nil, now: Date, display: BadgeDisplay = BadgeDisplay(), modes: AggregationModes = .none
    ) -> BadgeNode? {
        BadgeNode.build(aggregates: aggregates(now: now, modes: modes), at: path, depth: depth, display: display)
    }
}

extension Int64 {
    /// Adds a non-negative number, stopping at `Int64.max`.
    mutating func addSaturating(_ other: Int64) {
        self = addingSaturating(other)
    }
}
