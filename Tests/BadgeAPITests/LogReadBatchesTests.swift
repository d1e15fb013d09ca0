import BadgeCore
import Synchronization
import TestSupport
import Testing

@testable import BadgeAPI

/// How the reads of many users' logs are gathered into batches. The reads here answer from
/// memory: the test is about who waits for whom and who gets which answer (the statement itself
/// is tested on PostgreSQL in `StreamFollowerTests`).
@Suite("Reads of many users' logs gathered into batches")
struct LogReadBatchesTests {
    /// A read of the log that records each batch it is given and answers when the test lets it.
    final class GatedLog: Sendable {
        let batches = Mutex<[[LogRead]]>([])
        private let gates = Mutex<[CheckedContinuation<Bool, Never>]>([])

        /// Answers each read with one change at the version after its own, unless the test
        /// lets the batch fail.
        func perform(_ reads: [LogRead]) async throws -> [[OwnLayerChange]?] {
            batches.withLock { $0.append(reads) }
            let succeed = await withCheckedContinuation { continuation in gates.withLock { $0.append(continuation) } }
            guard succeed else { throw CancellationError() }
            return reads.map { read in
                read.user.rawValue.hasSuffix("-pruned")
                    ? nil
                    : [OwnLayerChange(version: read.after + 1, broadcastVersion: 0, nodes: [], dismissed: [], seenBroadcasts: [], mutes: nil)]
            }
        }

        /// Waits until `count` batches have started.
        func started(_ count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while batches.withLock({ $0.count }) < count {
                guard ContinuousClock.now < deadline else { throw TimeoutError(what: "\(count) batches to start") }
                try await Task.sleep(for: .milliseconds(1))
            }
        }

        /// Lets the oldest batch waiting answer (or fail).
        func release(succeed: Bool = true) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while true {
                if let gate = gates.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return gate.resume(returning: succeed) }
                guard ContinuousClock.now < deadline else { throw TimeoutError(what: "a batch to release") }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    struct TimeoutError: Error, CustomStringConvertible {
        var what: String
        var description: String { "timed out waiting for \(what)" }
    }

    /// Waits until `count` reads have come to `batches`, and a moment more for the last to queue.
    static func arrived(_ count: Int, at batches: LogReadBatches) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while batches.readCount < count {
            guard ContinuousClock.now < deadline else { throw TimeoutError(what: "\(count) reads to come") }
            try await Task.sleep(for: .milliseconds(1))
        }
        try await Task.sleep(for: .milliseconds(20))
    }

    static func read(_ name: String, after: Int64) -> LogRead {
        LogRead(user: user(name), after: after)
    }

    @Test("reads that come while two batches are in flight wait and go together in the next; each gets its own answer")
    func gathered() async throws {
        let batches = LogReadBatches()
        let log = GatedLog()
        try await withThrowingTaskGroup(of: (LogRead, [OwnLayerChange]?).self) { group in
            let first = [Self.read("lb-a", after: 1), Self.read("lb-b", after: 2)]
            for read in first { group.addTask { (read, await batches.read(read, by: log.perform)) } }
            try await log.started(2)
            // Ten more, one of them a user whose log no longer reaches back, and one user twice.
            let waiting = (0..<8).map { Self.read("lb-w\($0)", after: Int64(10 + $0)) }
                + [Self.read("lb-x-pruned", after: 5), Self.read("lb-w0", after: 3)]
            for read in waiting { group.addTask { (read, await batches.read(read, by: log.perform)) } }
            try await Self.arrived(12, at: batches)
            // None of them starts a batch while both are in flight.
            try await Task.sleep(for: .milliseconds(50))
            #expect(log.batches.withLock { $0.count } == 2)
            try await log.release()
            try await log.started(3)
            try await log.release()
            try await log.release()
            var answers: [LogRead: [OwnLayerChange]?] = [:]
            for try await (read, answer) in group { answers[read] = answer }
            #expect(answers.count == 12)
            for (read, answer) in answers {
                if read.user.rawValue.hasSuffix("-pruned") {
                    #expect(answer == nil)
                } else {
                    #expect(answer?.map(\.version) == [read.after + 1], "\(read)")
                }
            }
            let seen = log.batches.withLock { $0 }
            #expect(seen.count == 3, "the ten reads that waited went in one batch: \(seen.map(\.count))")
            #expect(Set(seen[2]) == Set(waiting), "the third batch is the reads that waited")
            #expect(batches.batchCount == 3)
            #expect(batches.readCount == 12)
        }
    }

    @Test("a batch that fails answers nil to each of its reads, and the next reads are batched as before")
    func failed() async throws {
        let batches = LogReadBatches()
        let log = GatedLog()
        let failing = Self.read("lb-f1", after: 4)
        async let lost = batches.read(failing, by: log.perform)
        try await log.started(1)
        try await log.release(succeed: false)
        #expect(await lost == nil)

        async let kept = batches.read(Self.read("lb-f2", after: 7), by: log.perform)
        try await log.started(2)
        try await log.release()
        #expect(await kept?.map(\.version) == [8])
    }

    @Test("no more than the batch's limit of reads goes in one batch")
    func bounded() async throws {
        let batches = LogReadBatches()
        let log = GatedLog()
        let total = 2 + LogReadBatches.maximumReads + 5
        try await withThrowingTaskGroup(of: [OwnLayerChange]?.self) { group in
            for index in 0..<2 { group.addTask { await batches.read(Self.read("lb-m\(index)", after: 0), by: log.perform) } }
            try await log.started(2)
            for index in 2..<total { group.addTask { await batches.read(Self.read("lb-m\(index)", after: 0), by: log.perform) } }
            try await Self.arrived(total, at: batches)
            // Each release lets one batch answer; the reads that waited go in as many as the limit needs.
            for _ in 0..<4 { try await log.release() }
            var answered = 0
            for try await answer in group where answer?.map(\.version) == [1] { answered += 1 }
            #expect(answered == total)
            let sizes = log.batches.withLock { $0.map(\.count) }
            #expect(sizes.allSatisfy { $0 <= LogReadBatches.maximumReads }, "\(sizes)")
            #expect(sizes.count == 4, "\(sizes)")
        }
    }
}
