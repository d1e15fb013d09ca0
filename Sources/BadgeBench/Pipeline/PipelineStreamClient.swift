import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One thread reading every user's Server-Sent Events stream (HTTP/1.1, chunked or not): it
/// parses each event's `id:` and `data:` and tells the tracker which leaf counts the stream shows.
final class PipelineStreamClient: Sendable {
    struct Totals: Sendable {
        var snapshots = 0
        var changes = 0
        var heartbeats = 0
        var bytes = 0
        var reconnects = 0
        var errors = 0
        var firstError: String?
    }

    let port: Int
    let requests: [[UInt8]]
    let paths: Int
    let tracker: PipelineTracker
    private let stopping = Atomic<Bool>(false)
    private let ready = Atomic<Int>(0)
    private let cpu = Atomic<UInt64>(0)
    private let counters = Mutex(Totals())

    init(port: Int, requests: [[UInt8]], paths: Int, tracker: PipelineTracker) {
        self.port = port
        self.requests = requests
        self.paths = paths
        self.tracker = tracker
    }

    var readyStreams: Int { ready.load(ordering: .acquiring) }
    var cpuNanoseconds: UInt64 { cpu.load(ordering: .relaxed) }
    var totals: Totals { counters.withLock { $0 } }
    func stop() { stopping.store(true, ordering: .releasing) }

    private struct Stream {
        enum Chunk { case size, data(Int), trailer, ended }
        var descriptor: Int32 = -1
        var input: [UInt8] = []
        var headDone = false
        var chunked = false
        var chunk = Chunk.size
        var body: [UInt8] = []
        var opened = false
        /// The last event id seen (the version), sent as Last-Event-ID on a reconnect.
        var lastID: String?
    }

    /// Runs until `stop()`; blocking, on a thread of its own.
    func run() {
        var streams = [Stream](repeating: Stream(), count: requests.count)
        var pollSet = [pollfd](repeating: pollfd(fd: -1, events: Int16(POLLIN), revents: 0), count: requests.count)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        defer {
            for stream in streams where stream.descriptor >= 0 { _ = close(stream.descriptor) }
        }
        for user in streams.indices { open(user, &streams, &pollSet) }
        while !stopping.load(ordering: .acquiring) {
            cpu.store(threadCPUNanoseconds(), ordering: .relaxed)
            let count = poll(&pollSet, nfds_t(pollSet.count), 10)
            if count < 0, errno != EINTR {
                failed("poll: \(String(cString: strerror(errno)))")
                return
            }
            guard count > 0 else { continue }
            for user in pollSet.indices where pollSet[user].revents != 0 {
                pollSet[user].revents = 0
                let descriptor = streams[user].descriptor
                guard descriptor >= 0 else { continue }
                let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                let now = BenchClock.now
                if received < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                if received <= 0 {
                    broken(user, received == 0 ? "the server closed a stream" : "recv: \(String(cString: strerror(errno)))", &streams, &pollSet)
                    continue
                }
                counters.withLock { $0.bytes += received }
                streams[user].input += buffer[0..<received]
                if let problem = process(user, &streams[user], at: now) { broken(user, problem, &streams, &pollSet) }
            }
        }
        cpu.store(threadCPUNanoseconds(), ordering: .relaxed)
    }

    private func open(_ user: Int, _ streams: inout [Stream], _ pollSet: inout [pollfd]) {
        do {
            let descriptor = try BenchSocket.connectLoopback(port: port)
            var request = requests[user]
            if let lastID = streams[user].lastID {
                // Resume: insert Last-Event-ID before the blank line that ends the head.
                request.removeLast(2)
                request += Array("Last-Event-ID: \(lastID)\r\n\r\n".utf8)
            }
            if let problem = BenchSocket.sendAll(descriptor, request) {
                _ = close(descriptor)
                throw BenchFailure(problem)
            }
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            let lastID = streams[user].lastID
            let opened = streams[user].opened
            streams[user] = Stream(descriptor: descriptor, opened: opened, lastID: lastID)
            pollSet[user].fd = descriptor
        } catch {
            failed("stream of user \(user): \(error)")
        }
    }

    /// Counts an error and opens the stream again (resuming from the last event id).
    private func broken(_ user: Int, _ problem: String, _ streams: inout [Stream], _ pollSet: inout [pollfd]) {
        if streams[user].descriptor >= 0 { _ = close(streams[user].descriptor) }
        streams[user].descriptor = -1
        pollSet[user].fd = -1
        if stopping.load(ordering: .acquiring) { return }
        failed("stream of user \(user): \(problem)")
        counters.withLock { $0.reconnects += 1 }
        open(user, &streams, &pollSet)
    }

    private func failed(_ problem: String) {
        counters.withLock { totals in
            totals.errors += 1
            if totals.firstError == nil { totals.firstError = problem }
        }
    }

    /// Consumes what arrived on a stream; a problem that breaks it, or nil.
    private func process(_ user: Int, _ stream: inout Stream, at time: UInt64) -> String? {
        if !stream.headDone {
            guard let end = Self.find([13, 10, 13, 10], in: stream.input, from: 0) else {
                return stream.input.count > 65_536 ? "an answer head longer than 64 KiB" : nil
            }
            let head = String(decoding: stream.input[0..<end], as: UTF8.self)
            guard head.hasPrefix("HTTP/1.1 200") else {
                return "the stream answered \(head.prefix(40)) \(String(decoding: stream.input.suffix(from: end).prefix(200), as: UTF8.self))"
            }
            stream.chunked = head.lowercased().contains("transfer-encoding: chunked")
            stream.input.removeFirst(end + 4)
            stream.headDone = true
        }
        if stream.chunked {
            var index = 0
            decoding: while index < stream.input.count {
                switch stream.chunk {
                case .size:
                    guard let lineEnd = Self.find([13, 10], in: stream.input, from: index) else { break decoding }
                    let line = String(decoding: stream.input[index..<lineEnd], as: UTF8.self)
                    guard let size = Int(line.split(separator: ";").first.map(String.init) ?? "", radix: 16) else {
                        return "a bad chunk size '\(line.prefix(20))'"
                    }
                    index = lineEnd + 2
                    stream.chunk = size == 0 ? .ended : .data(size)
                case .data(let remaining):
                    let take = min(remaining, stream.input.count - index)
                    stream.body += stream.input[index..<(index + take)]
                    index += take
                    stream.chunk = take == remaining ? .trailer : .data(remaining - take)
                case .trailer:
                    guard stream.input.count - index >= 2 else { break decoding }
                    index += 2
                    stream.chunk = .size
                case .ended:
                    return "the server ended a stream"
                }
            }
            stream.input.removeFirst(index)
        } else {
            stream.body += stream.input
            stream.input.removeAll(keepingCapacity: true)
        }
        // Events end with a blank line.
        var start = 0
        while let end = Self.find([10, 10], in: stream.body, from: start) {
            handleEvent(user, stream.body[start..<end], &stream, at: time)
            start = end + 2
        }
        if start > 0 { stream.body.removeFirst(start) }
        return nil
    }

    private func handleEvent(_ user: Int, _ block: ArraySlice<UInt8>, _ stream: inout Stream, at time: UInt64) {
        if !stream.opened {
            stream.opened = true
            ready.add(1, ordering: .releasing)
        }
        var name = "message"
        var data: [UInt8] = []
        var hasData = false
        for line in block.split(separator: 10, omittingEmptySubsequences: false) {
            if line.first == 58 { continue }  // ":" a comment (heartbeat)
            let text = String(decoding: line, as: UTF8.self)
            if text.hasPrefix("event:") {
                name = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
            } else if text.hasPrefix("id:") {
                stream.lastID = text.dropFirst(3).trimmingCharacters(in: .whitespaces)
            } else if text.hasPrefix("data:") {
                if hasData { data.append(10) }
                var value = line.dropFirst(5)
                if value.first == 32 { value = value.dropFirst() }
                data += value
                hasData = true
            }
        }
        if block.first == 58 {
            counters.withLock { $0.heartbeats += 1 }
            return
        }
        guard hasData, name == "snapshot" || name == "change" else { return }
        guard let counts = StreamEventCounts.read(data) else {
            failed("an undecodable \(name) event: \(String(decoding: data.prefix(200), as: UTF8.self))")
            return
        }
        let isSnapshot = name == "snapshot"
        counters.withLock { totals in
            if isSnapshot { totals.snapshots += 1 } else { totals.changes += 1 }
        }
        if !counts.isEmpty { tracker.shown(user: user, counts: counts, at: time) }
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        var index = start
        while index <= bytes.count - needle.count {
            if bytes[index] == needle[0] {
                var matched = true
                for offset in 1..<needle.count where bytes[index + offset] != needle[offset] {
                    matched = false
                    break
                }
                if matched { return index }
            }
            index += 1
        }
        return nil
    }
}
