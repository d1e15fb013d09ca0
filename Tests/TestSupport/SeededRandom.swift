public import BadgeCore

/// A deterministic random number generator (BadgeCore's ``SplitMix64``), so a failing property
/// test can be replayed from its seed.
public typealias SeededRandom = SplitMix64
