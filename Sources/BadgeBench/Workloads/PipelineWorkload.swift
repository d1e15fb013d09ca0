import BadgeCore

/// The events, made before the clock starts: incr by 1 of a (user, path) drawn from the seed,
/// encoded as producers send them. With hot users, a share of the events goes to the first few
/// users (u0 …, the streamed ones first) and the rest spreads over all users: a few hot users and
/// a long tail. Nothing is kept per user, so millions of users cost only their events.
struct PipelineWorkload: Sendable {
    let payloads: [[UInt8]]
    let users: [Int32]
    let paths: [Int32]
    let averagePayloadBytes: Int

    init(settings: PipelineBenchmark.Settings) throws {
        try self.init(
            events: settings.totalEvents, users: settings.users, paths: settings.paths, hotUsers: settings.hotUsers,
            hotShare: settings.hotShare, seed: settings.seed, runID: settings.runID)
    }

    /// `events` increments over users u0 … u(users - 1) × paths `root.bench.p0…`, with event ids
    /// `<runID>-<index>`; with `hotUsers`, `hotShare` of them go to u0 … u(hotUsers - 1).
    init(events total: Int, users userCount: Int, paths pathCount: Int, hotUsers: Int = 0, hotShare: Double = 0, seed: UInt64, runID: String) throws {
        var generator = SplitMix64(seed: seed)
        let encoder = EventEncoder()
        let badgePaths = try (0..<pathCount).map { try BadgePath(validating: "root.bench.p\($0)") }
        var payloads: [[UInt8]] = []
        var users: [Int32] = []
        var paths: [Int32] = []
        payloads.reserveCapacity(total)
        users.reserveCapacity(total)
        paths.reserveCapacity(total)
        // The hot share as a threshold on 53 random bits (exact for any share in 0…1).
        let share = hotShare.isFinite ? min(max(hotShare, 0), 1) : 0
        let hotThreshold = UInt64(share * Double(UInt64(1) << 53))
        var bytes = 0
        for index in 0..<total {
            let hot = hotUsers > 0 && generator.next() >> 11 < hotThreshold
            let user = Int(generator.next() % UInt64(hot ? hotUsers : userCount))
            let path = Int(generator.next() % UInt64(pathCount))
            let event = BadgeEvent(
                id: try EventID(validating: "\(runID)-\(index)"),
                audience: .users([try UserID(validating: PipelineBenchmark.userName(user))]),
                body: .operation(path: badgePaths[path], operation: .increment(by: 1)))
            let payload = encoder.encode(event)
            bytes += payload.count
            payloads.append(payload)
            users.append(Int32(user))
            paths.append(Int32(path))
        }
        self.payloads = payloads
        self.users = users
        self.paths = paths
        averagePayloadBytes = total > 0 ? bytes / total : 100
    }

    /// The record key of user number `user`: the user id.
    static func key(of user: Int32) -> [UInt8] {
        Array(PipelineBenchmark.userName(Int(user)).utf8)
    }
}
