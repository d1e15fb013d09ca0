import BadgeCore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The state of one client thread.
struct HTTPLoadWorker {
    struct Connection {
        var descriptor: Int32
        /// The answer read so far.
        var bytes: [UInt8] = []
        var head: HTTPAnswerHead?
        var sentAt: UInt64 = 0
    }

    let plan: HTTPLoadGenerator.Plan
    let connectionCount: Int
    var generator: SplitMix64
    var connections: [Connection] = []
    var pollSet: [pollfd] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    var result = HTTPLoadGenerator.ThreadResult()
    /// Open loop: the time the next request is due, the spacing of this thread's requests, and
    /// the connections with nothing in flight.
    var nextDue: UInt64 = 0
    var spacing: UInt64 = 0
    var idle: [Int] = []

    let tally: HTTPLoadGenerator.AnswerTally

    init(plan: HTTPLoadGenerator.Plan, connections: Int, seed: UInt64, tally: HTTPLoadGenerator.AnswerTally) {
        self.plan = plan
        self.tally = tally
        self.connectionCount = connections
        self.generator = SplitMix64(seed: seed)
    }

    mutating func run() -> HTTPLoadGenerator.ThreadResult {
        result.latencies.reserveCapacity(200_000)
        for _ in 0..<connectionCount {
            connections.append(Connection(descriptor: -1))
            pollSet.append(pollfd(fd: -1, events: Int16(POLLIN), revents: 0))
        }
        defer {
            for connection in connections where connection.descriptor >= 0 { _ = close(connection.descriptor) }
        }
        if plan.rate > 0 {
            spacing = max(1, UInt64(plan.threads) * 1_000_000_000 / UInt64(plan.rate))
            nextDue = BenchClock.now
        }
        for slot in connections.indices { reopen(slot) }
        var cpuAtStart: Double?
        while true {
            let now = BenchClock.now
            if cpuAtStart == nil, now >= plan.measureStart { cpuAtStart = Self.threadCPUSeconds() }
            if now >= plan.end { break }
            if let limit = plan.answerLimit, tally.count.load(ordering: .relaxed) >= limit { break }
            var timeout: Int32 = 10
            if spacing > 0 {
                // Requests due go out on idle connections; a late one keeps its scheduled time,
                // so waiting for a free connection counts as latency. poll() counts whole
                // milliseconds, so a request may go out up to 1 ms after its time (counted too).
                while nextDue <= now, let slot = idle.popLast() {
                    sendRequest(slot, scheduledAt: nextDue)
                    nextDue += spacing
                }
                if nextDue > now { timeout = Int32(min(10, (nextDue - now + 999_999) / 1_000_000)) }
            }
            let ready = poll(&pollSet, nfds_t(pollSet.count), timeout)
            if ready < 0, errno != EINTR {
                failed("poll: \(String(cString: strerror(errno)))")
                break
            }
            guard ready > 0 else { continue }
            for slot in pollSet.indices where pollSet[slot].revents != 0 {
                pollSet[slot].revents = 0
                readAnswer(slot)
            }
        }
        result.cpuSeconds = Self.threadCPUSeconds() - (cpuAtStart ?? Self.threadCPUSeconds())
        result.stoppedAt = BenchClock.now
        return result
    }

    private mutating func readAnswer(_ slot: Int) {
        let descriptor = connections[slot].descriptor
        guard descriptor >= 0 else { return }
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count == 0 { return broken(slot, "the server closed a connection") }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            return broken(slot, "recv: \(String(cString: strerror(errno)))")
        }
        connections[slot].bytes += chunk[0..<count]
        if connections[slot].head == nil {
            switch HTTPAnswerHead.parse(connections[slot].bytes) {
            case .incomplete: return
            case .malformed(let problem): return broken(slot, problem)
            case .complete(let head): connections[slot].head = head
            }
        }
        guard let head = connections[slot].head, connections[slot].bytes.count >= head.total else { return }
        if connections[slot].bytes.count > head.total { return broken(slot, "bytes after the answer (nothing was pipelined)") }

        let now = BenchClock.now
        tally.count.add(1, ordering: .relaxed)
        if now >= plan.measureStart, now < plan.end {
            result.latencies.append(now - connections[slot].sentAt)
        } else {
            result.warmupRequests += 1
        }
        if head.status != 200 {
            result.errors += 1
            result.statuses[head.status, default: 0] += 1
            if result.firstError == nil {
                let body = connections[slot].bytes[head.headLength..<head.total].prefix(300)
                result.firstError = "HTTP \(head.status): \(String(decoding: body, as: UTF8.self))"
            }
        }
        connections[slot].bytes.removeAll(keepingCapacity: true)
        connections[slot].head = nil
        if now < plan.end { nextRequest(slot) }
    }

    /// Closed loop: sends at once; open loop: waits for the schedule.
    private mutating func nextRequest(_ slot: Int) {
        if spacing > 0 {
            if !idle.contains(slot) { idle.append(slot) }
        } else {
            sendRequest(slot, scheduledAt: BenchClock.now)
        }
    }

    private mutating func sendRequest(_ slot: Int, scheduledAt: UInt64) {
        let request = plan.requests[Int(generator.next() % UInt64(plan.requests.count))]
        connections[slot].sentAt = scheduledAt
        if let problem = BenchSocket.sendAll(connections[slot].descriptor, request) { broken(slot, problem) }
    }

    /// Counts an error, and replaces the connection (an answer in flight is lost).
    private mutating func broken(_ slot: Int, _ problem: String) {
        failed(problem)
        if connections[slot].descriptor >= 0 { _ = close(connections[slot].descriptor) }
        connections[slot] = Connection(descriptor: -1)
        pollSet[slot].fd = -1
        if BenchClock.now < plan.end { reopen(slot) }
    }

    private mutating func reopen(_ slot: Int) {
        do {
            let descriptor = try BenchSocket.connectLoopback(port: plan.port)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            connections[slot] = Connection(descriptor: descriptor)
            pollSet[slot].fd = descriptor
            nextRequest(slot)
        } catch {
            failed("\(error)")
        }
    }

    private mutating func failed(_ problem: String) {
        result.errors += 1
        if result.firstError == nil { result.firstError = problem }
    }

    static func threadCPUSeconds() -> Double { Double(threadCPUNanoseconds()) / 1e9 }
}
