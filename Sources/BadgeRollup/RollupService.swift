import Backoff
import BadgeCore
import BadgeStore
import Foundation
import Synchronization
public import LibPQ
public import Logging
public import ServiceLifecycle

/// `reddot rollup`: workers that claim dirty users in batches, recompute their aggregates in
/// SQL, bump the versions of those whose visible tree changed and notify the query services;
/// plus a sweeper that expires badges and broadcasts.
///
/// Any number of workers and processes may run at once: each round claims users by taking their
/// rollup locks (per-user advisory locks) without waiting, passing by users another round holds,
/// so no update is lost and no two workers deadlock or queue. The workers of a process sweep
/// the dirty users in user order from where the last round stopped, wrapping around, so every
/// dirty user is reached within one pass. On graceful shutdown every worker finishes its
/// transaction and returns; a cancelled transaction rolls back and leaves its users dirty for
/// the next worker.
public struct RollupService: Service {
    /// The database.
    public let pool: PGPool
    /// The settings.
    public let configuration: RollupConfiguration
    /// Where it logs.
    public let logger: Logger
    private let metrics = RollupMetrics()
    private let failures = Tally()
    private let idleLooks = Tally()
    /// Where the next round's sweep starts: the part after the last round's, and in each part
    /// the last user a round of this service claimed there.
    private let cursor = SweepCursor()
    /// What ingest last reported waiting (`ingestIsBehind`).
    private let backlog = BacklogWatch()
    /// Whether a slow empty look asked for a vacuum of the queue (`vacuumQueueIfAsked`).
    private let queueVacuum = QueueVacuumWatch()

    /// Rollup and sweep transactions that failed (and were retried) since the service was made.
    public var failedTransactions: Int { failures.value.load(ordering: .relaxed) }

    /// Looks of idle workers that found the queue empty with one statement and ran no round.
    public var idleLookCount: Int { idleLooks.value.load(ordering: .relaxed) }

    /// A service over `pool` (give it at least `workers + 1` connections).
    public init(pool: PGPool, configuration: RollupConfiguration = RollupConfiguration(), logger: Logger) {
        self.pool = pool
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs the workers and the sweeper until graceful shutdown or cancellation.
    public func run() async throws {
        logger.info(
            "rollup started",
            metadata: ["rollup.workers": "\(configuration.workers)", "rollup.batch_size": "\(configuration.batchSize)"])
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<configuration.workers {
                group.addTask { await self.workerLoop(worker) }
            }
            group.addTask { await self.sweeperLoop() }
            await group.waitForAll()
        }
        logger.info("rollup stopped")
    }

    /// One rollup transaction: claims up to `batchSize` dirty users, the next ones of the sweep,
    /// and recomputes them; while ingest is behind, only users whose oldest write waited
    /// `backlogSettleSeconds` (`settleSeconds()`).
    ///
    /// - Returns: how many users were claimed (0: nothing to do).
    @discardableResult
    public func step() async throws -> Int {
        try await step(settledFor: await settleSeconds())
    }

    /// `step()` claiming only users whose oldest dirty mark is `settle` seconds old (0: any).
    @discardableResult
    func step(settledFor settle: Double) async throws -> Int {
        let limit = configuration.batchSize
        let started = ContinuousClock.now
        // Each round starts one part further (a worker that starts meanwhile takes the next).
        let sweep = cursor.sweep.withLock { shared in
            defer { shared.queue.next &+= 1 }
            return shared
        }
        let claimed: [(user: UserID, dirtiedAt: Date)], outcome: RollupOutcome
        do {
            // The sweep moves past the claimed users as soon as they are claimed, so that a
            // worker starting meanwhile claims after them.
            let round = try await BadgeStore(pool: pool).rollupRound(limit: limit, sweep: sweep, settledFor: settle) { [cursor] claimed in
                cursor.sweep.withLock { $0.merge(claimed) }
            }
            (claimed, outcome) = (round.claimed, round.outcome)
        } catch {
            cursor.sweep.withLock { $0.queue.forget() }
            throw error
        }
        guard !claimed.isEmpty else { return 0 }
        let now = Date()
        for (_, dirtiedAt) in claimed {
            // Clamped: a dirty mark set by hand centuries ago must not trap the conversion.
            metrics.lag.recordNanoseconds(Int64(min(max(0, now.timeIntervalSince(dirtiedAt)) * 1e9, 9e18)))
        }
        metrics.batchLatency.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
        metrics.users.increment(by: claimed.count)
        metrics.addedUsers.increment(by: outcome.added)
        metrics.changed.increment(by: outcome.versions.count)
        return claimed.count
    }

    /// One sweep: expires badges (marking their users dirty) and broadcasts, and wakes the
    /// snoozes whose end has passed (marking their users for a recount).
    ///
    /// - Returns: users marked dirty and broadcasts expired.
    @discardableResult
    public func sweepExpired() async throws -> (users: Int, broadcasts: Int) {
        // A part of each table at a time: where they are partitioned by user, each statement
        // reads one partition (on the shipped schema, each table is its one part).
        let parts = try await pool.withConnection { try BadgeStore.expiryParts(on: $0) }
        var users = 0, woken = 0
        for part in parts.states {
            users += try await inBatches { connection, limit throws(PGError) in
                try BadgeStore.expireBadges(limit: limit, part: part, on: connection)
            }
        }
        for part in parts.mutes {
            woken += try await inBatches { connection, limit throws(PGError) in
                try BadgeStore.wakeSnoozes(limit: limit, part: part, on: connection)
            }
        }
        metrics.wokenSnoozes.increment(by: woken)
        let broadcasts = try await pool.withTransaction { connection in
            try BadgeStore.expireBroadcasts(on: connection)
        }
        metrics.expiredUsers.increment(by: users)
        metrics.expiredBroadcasts.increment(by: broadcasts)
        return (users, broadcasts)
    }

    /// Runs `step` (up to the expiry batch size of rows, in a transaction of its own) until a
    /// step does fewer than that or the task is cancelled; returns the sum of what the steps did.
    private func inBatches(_ step: @escaping @Sendable (PGConnection, Int) throws(PGError) -> Int) async throws -> Int {
        let limit = configuration.expiryBatchSize
        var total = 0
        while !Task.isCancelled {
            let done = try await pool.withTransaction { connection in try step(connection, limit) }
            total += done
            if done < limit { break }
        }
        return total
    }

    /// Deletes change-log records older than the retention, in batches, and measures the log.
    ///
    /// - Returns: how many records went.
    @discardableResult
    public func pruneChangeLog() async throws -> Int {
        let limit = configuration.expiryBatchSize
        let cutoff = Date().addingTimeInterval(-Self.seconds(configuration.changeRetention))
        var pruned = 0, unpublished = 0
        while !Task.isCancelled {
            let batch = try await pool.withTransaction { connection in
                try BadgeStore.pruneChangeLog(olderThan: cutoff, limit: limit, on: connection)
            }
            pruned += batch.pruned
            unpublished += batch.unpublished
            if batch.pruned < limit { break }
        }
        metrics.prunedChanges.increment(by: pruned)
        metrics.prunedUnpublished.increment(by: unpublished)
        metrics.changeLogSize.record(try await pool.withConnection { try BadgeStore.changeLogSize(on: $0) })
        return pruned
    }

    /// Deletes the withdrawn broadcasts older than the retention and users' dismissals of them,
    /// in steps of `expiryBatchSize` (nothing when the retention is off).
    ///
    /// - Returns: the broadcasts and the dismissals removed.
    @discardableResult
    public func pruneWithdrawnBroadcasts() async throws -> (broadcasts: Int, dismissals: Int) {
        var total = (broadcasts: 0, dismissals: 0)
        guard let retention = configuration.withdrawnBroadcastRetention else { return total }
        let limit = configuration.expiryBatchSize
        let cutoff = Date().addingTimeInterval(-Self.seconds(retention))
        while !Task.isCancelled {
            let step = try await pool.withTransaction { connection in
                try BadgeStore.pruneWithdrawnBroadcasts(olderThan: cutoff, limit: limit, on: connection)
            }
            total.dismissals += step.dismissals
            total.broadcasts += step.broadcasts
            if step.dismissals == 0 { break }
        }
        metrics.prunedBroadcasts.increment(by: total.broadcasts)
        metrics.prunedDismissals.increment(by: total.dismissals)
        return total
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private var shouldStop: Bool { Task.isCancelled || Task.isShuttingDownGracefully }

    /// Whether ingest reports more than `backlogRecords` records waiting in Kafka (its batches
    /// of the last `backlogFreshness`; `BadgeStore.ingestWaiting`), read at most every
    /// `backlogCheckInterval`. While it does, only the first worker claims users: the rollup's
    /// versions of a user would be superseded by ingest's next batches, and fewer rounds cover
    /// more of each user's writes (in `bench backlog`, a sixth fewer versions and about a tenth
    /// less database time per event; BENCHMARKS.md). A failed read counts as not behind: no
    /// worker waits for want of a report.
    func ingestIsBehind() async -> Bool {
        let limit = configuration.backlogRecords
        guard limit > 0 else { return false }
        let now = ContinuousClock.now
        let interval = configuration.backlogCheckInterval
        let cached: Bool? = backlog.state.withLock { state in
            guard let readAt = state.readAt, now - readAt < interval else { return nil }
            return state.behind
        }
        if let cached { return cached }
        let seconds = Self.seconds(configuration.backlogFreshness)
        let waiting = (try? await pool.withConnection { connection in try BadgeStore.ingestWaiting(within: seconds, on: connection) }) ?? nil
        let behind = (waiting ?? 0) > limit
        metrics.ingestWaiting.record(waiting ?? 0)
        metrics.claimingWorkers.record(behind ? 1 : configuration.workers)
        let flipped = backlog.state.withLock { state in
            defer { state = (now, behind) }
            return state.behind != behind
        }
        if flipped, configuration.workers > 1 {
            logger.info(
                behind ? "ingest is behind: one rollup worker claims users until it catches up" : "ingest caught up: every rollup worker claims users",
                metadata: ["ingest.waiting_records": "\(waiting ?? 0)", "rollup.backlog_records": "\(limit)"])
        }
        return behind
    }

    /// How old a user's oldest dirty mark must be before a round claims them: while ingest is
    /// behind, `backlogSettleSeconds`; else 0.
    func settleSeconds() async -> Double {
        let settle = configuration.backlogSettleSeconds
        guard settle > 0 else { return 0 }
        return await ingestIsBehind() ? settle : 0
    }

    private func workerLoop(_ worker: Int) async {
        var backoff = Self.backoff
        // Whether the last look found nothing to claim: the next one first asks whether the
        // queue holds a mark at all, one statement instead of a round's transaction (with
        // ingest rolling its own users up, the workers look every idle interval and nearly
        // always find nothing: about 100 transactions a second for two workers, BENCHMARKS.md).
        var idle = false
        while !shouldStop {
            do {
                if worker > 0, await ingestIsBehind() {
                    await pause(configuration.backlogCheckInterval)
                    continue
                }
                let settle = await settleSeconds()
                let looked = ContinuousClock.now
                if idle, settle == 0, try await !pool.withConnection({ connection in try BadgeStore.queueHasMarks(on: connection) }) {
                    metrics.idleLooks.increment()
                    idleLooks.value.add(1, ordering: .relaxed)
                    backoff.reset()
                    if ContinuousClock.now - looked >= Self.slowEmptyLook { queueVacuum.state.withLock { $0.asked = true } }
                    try? await Task.sleep(for: configuration.idleInterval)
                    continue
                }
                let claimed = try await step(settledFor: settle)
                idle = claimed == 0
                backoff.reset()
                if claimed == 0, settle == 0, ContinuousClock.now - looked >= Self.slowEmptyLook {
                    queueVacuum.state.withLock { $0.asked = true }
                }
                if settle > 0, claimed < configuration.batchSize {
                    // The claim walked the whole queue, one index step per user, and found
                    // too few settled users: the next ones settle as ingest's batches age, so
                    // look again a while later, not after the idle pause (walks every 20 ms
                    // over 100,000 young users cost the pipeline of `bench backlog` about 40%
                    // more database time per event); at once when ingest catches up.
                    let end = ContinuousClock.now + .milliseconds(Int64(min(settle / 6, 5) * 1_000))
                    while !shouldStop, ContinuousClock.now < end, await ingestIsBehind() {
                        await pause(min(configuration.backlogCheckInterval, end - ContinuousClock.now))
                    }
                } else if claimed == 0 {
                    try? await Task.sleep(for: configuration.idleInterval)
                }
            } catch {
                if shouldStop { break }
                self.failures.value.add(1, ordering: .relaxed)
                metrics.errors.increment()
                logger.info(
                    "rollup transaction failed; retrying",
                    metadata: ["rollup.worker": "\(worker)", RedDotLogKey.error: "\(error)"])
                await pause(backoff.next())
            }
        }
    }

    private func sweeperLoop() async {
        var backoff = Self.backoff
        var nextDepth = ContinuousClock.now
        var lastPrune = ContinuousClock.now - configuration.changePruneInterval
        while !shouldStop {
            do {
                _ = await ingestIsBehind()  // keeps the backlog gauges current with one worker too
                try await sweepExpired()
                await vacuumQueueIfAsked()
                if ContinuousClock.now - lastPrune >= configuration.changePruneInterval {
                    try await pruneChangeLog()
                    try await pruneWithdrawnBroadcasts()
                    lastPrune = ContinuousClock.now
                }
                if ContinuousClock.now >= nextDepth {
                    // Timed on the connection: a wait for one is not the count's cost.
                    let (depth, took) = try await pool.withConnection { connection in
                        let started = ContinuousClock.now
                        return (try BadgeStore.queueDepth(on: connection), ContinuousClock.now - started)
                    }
                    metrics.queueDepth.record(depth)
                    nextDepth = ContinuousClock.now + configuration.nextQueueDepth(after: took) - took
                }
                backoff.reset()
                try? await Task.sleep(for: configuration.expiryInterval)
            } catch {
                if shouldStop { break }
                self.failures.value.add(1, ordering: .relaxed)
                metrics.errors.increment()
                logger.info("expiry sweep failed; retrying", metadata: [RedDotLogKey.error: "\(error)"])
                await pause(backoff.next())
            }
        }
    }

    /// Vacuums the queue when a worker's empty look was slow (`slowEmptyLook`), at most once per
    /// `queueVacuumInterval` (`BadgeStore.vacuumQueue`): after a backlog drains, the queue's index
    /// holds every mark the rounds deleted until autovacuum comes, and each look for dirty users
    /// steps over all of them. A role that may not vacuum the table is told once, in the log; a
    /// failed vacuum is logged and left to autovacuum until the next slow look.
    func vacuumQueueIfAsked() async {
        guard let interval = configuration.queueVacuumInterval else { return }
        let now = ContinuousClock.now
        let due = queueVacuum.state.withLock { state in
            guard state.asked, state.allowed != false, state.last.map({ now - $0 >= interval }) ?? true else { return false }
            state.asked = false
            state.last = now
            return true
        }
        guard due else { return }
        do {
            let vacuumed = try await pool.withConnection { connection in
                var allowed = queueVacuum.state.withLock(\.allowed)
                if allowed == nil {
                    allowed = try BadgeStore.mayVacuumQueue(on: connection)
                    queueVacuum.state.withLock { $0.allowed = allowed }
                }
                guard allowed == true else { return false }
                try BadgeStore.vacuumQueue(on: connection)
                return true
            }
            if vacuumed {
                metrics.queueVacuums.increment()
                logger.info(
                    "vacuumed the rollup's queue after a slow look for dirty users",
                    metadata: ["rollup.vacuum_seconds": "\(Self.seconds(ContinuousClock.now - now))"])
            } else {
                logger.notice(
                    "this role may not vacuum the rollup's queue (dirty_mark): after a backlog, looks for dirty users step over the deleted marks until autovacuum comes",
                    metadata: ["rollup.hint": "run reddot rollup as the table's owner, or set --rollup-queue-vacuum-seconds 0"])
            }
        } catch {
            if shouldStop { return }
            logger.info("vacuum of the rollup's queue failed; left to autovacuum", metadata: [RedDotLogKey.error: "\(error)"])
        }
    }

    /// An empty look (a round that claimed no user) at least this long asks for a vacuum of the
    /// queue (`vacuumQueueIfAsked`): on a clean queue one takes well under a millisecond.
    private static let slowEmptyLook: Duration = .milliseconds(2)

    /// Retry pauses after a failed transaction: 100 ms doubling up to 5 s.
    private static let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))

    /// Sleeps for a retry pause, cut short by graceful shutdown or cancellation: while the
    /// database is away, SIGTERM should not wait out a pause of up to 5 s.
    private func pause(_ duration: Duration) async {
        try? await cancelWhenGracefulShutdown {
            try await Task.sleep(for: duration)
        }
    }
}

final class Tally: Sendable {
    let value = Atomic<Int>(0)
}

/// When ingest's report of records waiting was last read, and whether it said ingest is behind.
final class BacklogWatch: Sendable {
    let state = Mutex<(readAt: ContinuousClock.Instant?, behind: Bool)>((nil, false))
}

/// Whether a worker's slow empty look asked for a vacuum of the queue, when the last one ran,
/// and whether this role may run one (nil: not asked yet).
final class QueueVacuumWatch: Sendable {
    let state = Mutex<(asked: Bool, last: ContinuousClock.Instant?, allowed: Bool?)>((false, nil, nil))
}

/// Where the workers' sweep of the queue stands (`RollupSweep`), shared by the workers.
final class SweepCursor: Sendable {
    let sweep = Mutex(RollupSweep())
}
