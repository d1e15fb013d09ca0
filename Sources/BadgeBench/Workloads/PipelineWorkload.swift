import BadgeCore

/// The events, made before the clock starts: incr by 1 of a (user, path) drawn from the seed,
/// encoded as producers send them.
struct PipelineWorkload: Sendable {
    /// Per user: the record key.
    let keys: [[UInt8]]
    let payloads: [[UInt8]]
    let users: [Int32]
    let paths: [Int32]
    let averagePayloadBytes: Int

    init(settings: PipelineBenchmark.Settings) throws {
        var generator = SplitMix64(seed: settings.seed)
        let encoder = EventEncoder()
        let badgePaths = try (0..<settings.paths).map { try BadgePath(validating: "root.bench.p\($0)") }
        let userIDs = try (0..<settings.users).map { try UserID(validating: PipelineBenchmark.userName($0)) }
        let total = settings.totalEvents
        var payloads: [[UInt8]] = []
        var users: [Int32] = []
        var paths: [Int32] = []
        payloads.reserveCapacity(total)
        users.reserveCapacity(total)
        paths.reserveCapacity(total)
        var bytes = 0
        for index in 0..<total {
            let user = Int(generator.next() % UInt64(settings.users))
            let path = Int(generator.next() % UInt64(settings.paths))
            let event = BadgeEvent(
                id: try EventID(validating: "\(settings.runID)-\(index)"), audience: .users([userIDs[user]]),
                body: .operation(path: badgePaths[path], operation: .increment(by: 1)))
            let payload = encoder.encode(event)
            bytes += payload.count
            payloads.append(payload)
            users.append(Int32(user))
            paths.append(Int32(path))
        }
        keys = userIDs.map { Array($0.rawValue.utf8) }
        self.payloads = payloads
        self.users = users
        self.paths = paths
        averagePayloadBytes = total > 0 ? bytes / total : 100
    }
}
