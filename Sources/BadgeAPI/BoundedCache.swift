/// A map with a budget: when an insertion would go over it, the oldest insertions are evicted
/// first (FIFO). Not thread-safe: keep it inside a `Mutex`.
///
/// Each entry has a cost (1 for a count budget, its size in bytes for a byte budget). Eviction
/// walks a ring of insertion records; a record whose key was removed or re-inserted since is
/// skipped, so removal is O(1) and the ring is compacted when stale records dominate it.
struct BoundedCache<Key: Hashable, Value> {
    private struct Slot {
        var value: Value
        var cost: Int
        var sequence: UInt64
    }

    private var slots: [Key: Slot] = [:]
    private var order: [(key: Key, sequence: UInt64)] = []
    private var head = 0
    private var nextSequence: UInt64 = 0
    /// The most the entries may cost together.
    let budget: Int
    /// What the entries cost together.
    private(set) var cost = 0

    /// A cache holding entries up to `budget` in total cost (0: holds nothing).
    init(budget: Int) {
        self.budget = max(0, budget)
    }

    /// How many entries it holds.
    var count: Int { slots.count }

    subscript(key: Key) -> Value? { slots[key]?.value }

    /// Stores `value` for `key` (replacing any older one), evicting the oldest entries until it
    /// fits; a value costing more than the whole budget is not stored.
    mutating func insert(_ value: Value, for key: Key, cost entryCost: Int = 1) {
        remove(key)
        guard entryCost <= budget else { return }
        while cost + entryCost > budget, evictOldest() {}
        nextSequence += 1
        slots[key] = Slot(value: value, cost: entryCost, sequence: nextSequence)
        order.append((key, nextSequence))
        cost += entryCost
    }

    /// Removes the entry for `key`, if any.
    mutating func remove(_ key: Key) {
        guard let slot = slots.removeValue(forKey: key) else { return }
        cost -= slot.cost
        compactIfSparse()
    }

    /// Removes every entry.
    mutating func removeAll() {
        slots.removeAll(keepingCapacity: true)
        order.removeAll(keepingCapacity: true)
        head = 0
        cost = 0
    }

    private mutating func evictOldest() -> Bool {
        while head < order.count {
            let record = order[head]
            head += 1
            if let slot = slots[record.key], slot.sequence == record.sequence {
                slots[record.key] = nil
                cost -= slot.cost
                compactIfSparse()
                return true
            }
        }
        return false
    }

    /// Drops the evicted and stale records once they are most of the ring.
    private mutating func compactIfSparse() {
        let pending = order.count - head
        guard pending > 2 * slots.count + 64 || (head > 1024 && head > order.count / 2) else { return }
        order = order[head...].filter { record in slots[record.key]?.sequence == record.sequence }
        head = 0
    }
}
