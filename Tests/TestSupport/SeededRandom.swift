public import BadgeCore

/// A deterministic random number generator (BadgeCore's ``SplitMix64``), so a failing property
/// test can be replayed from its seed.
public typealias SeededRandom = SplitMix64

extension SplitMix64 {
    /// `bytes` with one random byte changed, the bytes from a random one on cut off, or a random
    /// byte doubled: damage for the tests that feed a reader what a damaged row or message holds.
    public mutating func damaged(_ bytes: [UInt8]) -> [UInt8] {
        guard !bytes.isEmpty else { return bytes }
        var damaged = bytes
        let at = Int(next() % UInt64(damaged.count))
        switch next() % 3 {
        case 0: damaged[at] = UInt8(truncatingIfNeeded: next())
        case 1: damaged.removeSubrange(at...)
        default: damaged.insert(damaged[at], at: at)
        }
        return damaged
    }
}
