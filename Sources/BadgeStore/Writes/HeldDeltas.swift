public import BadgeCore
import LibPQ

/// What a writer that rolls its users up itself (ingest's caught-up batch) leaves out of the
/// rollup's queue: the users it gave no dirty mark (`BadgeStore.applyMarked`'s `owned`), and
/// what their new increments add to their nodes (`HeldDeltas`), for its own round in the same
/// transaction (`BadgeStore.rollUpOwned`).
public struct UnmarkedWrites: Sendable, Hashable {
    /// The users left without a dirty mark.
    public internal(set) var users: [UserID] = []
    /// Their deltas, held for the round instead of stored in `badge_delta`.
    var deltas = HeldDeltas()

    /// Nothing left out.
    public init() {}
}

/// Deltas (user, path, amount, unseen, write number) a writer holds for its own rollup round
/// instead of storing them in `badge_delta` (`BadgeSQL.addIncrements`' `$6`), so that they are
/// neither inserted nor deleted: the round adds them with the stored ones (`BadgeSQL.addDeltas`'
/// `$4`–`$8`).
///
/// The round's version covers every one of them: the writer holds each user's write number
/// until it commits, so no write of the user comes between, and a user whose write needs more
/// than adding (a mark asking for a recount; a mute or an aggregation mode over a held delta,
/// which the claim checks, `BadgeSQL.claimDirtyUsers`' `$3` and `$4`) is recounted, which reads
/// the increments themselves and drops the held deltas. Should one not be covered after all,
/// the round stores it with a mark that asks for a recount; when the round does not run, the
/// writer stores them all (`BadgeSQL.storeHeldDeltas`).
struct HeldDeltas: Sendable, Hashable {
    var users: [String] = [], paths: [String] = [], amounts: [Int64] = [], unseen: [Int64] = [], seqs: [Int64] = []

    var isEmpty: Bool { users.isEmpty }

    /// Appends a row of `BadgeSQL.addIncrements`' answer from its second column: path, amount,
    /// unseen and write number, with `user`.
    mutating func append(user: String, from row: PGRow) throws(PGError) {
        users.append(user)
        paths.append(try row.decode(1, as: String.self))
        amounts.append(try row.decode(2, as: Int64.self))
        unseen.append(try row.decode(3, as: Int64.self))
        seqs.append(try row.decode(4, as: Int64.self))
    }

    /// The deltas of `kept` users only.
    func only(_ kept: Set<String>) -> HeldDeltas {
        var result = HeldDeltas()
        for index in users.indices where kept.contains(users[index]) {
            result.users.append(users[index])
            result.paths.append(paths[index])
            result.amounts.append(amounts[index])
            result.unseen.append(unseen[index])
            result.seqs.append(seqs[index])
        }
        return result
    }

    /// Appends `other`'s deltas (of other users: a batch written a shard at a time).
    mutating func append(contentsOf other: HeldDeltas) {
        users += other.users
        paths += other.paths
        amounts += other.amounts
        unseen += other.unseen
        seqs += other.seqs
    }

    /// The five arrays, as statements bind them.
    var arrays: [any PGBindable] { [users, paths, amounts, unseen, seqs] }
}
