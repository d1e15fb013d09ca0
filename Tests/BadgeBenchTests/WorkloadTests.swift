import BadgeBench
import BadgeCore
import BadgeIngest
import LibPQ
import RdKafka
import Testing

/// What the benches generate and check without PostgreSQL or Kafka: workloads from a seed, the
/// HTTP answer parser, the pgbench script, option limits.
@Suite("Bench workloads and checks")
struct WorkloadTests {
    @Test("the same seed gives the same events; another seed other events")
    func determinism() throws {
        let first = try BenchWorkload(events: 2_000, users: 50, paths: 7, seed: 42, idPrefix: "run", userPrefix: "u")
        let again = try BenchWorkload(events: 2_000, users: 50, paths: 7, seed: 42, idPrefix: "run", userPrefix: "u")
        let other = try BenchWorkload(events: 2_000, users: 50, paths: 7, seed: 43, idPrefix: "run", userPrefix: "u")
        #expect(first.payloads == again.payloads && first.keys == again.keys && first.counts == again.counts)
        #expect(first.payloads != other.payloads)
        #expect(first.count == 2_000)
        #expect(first.payloadBytes == first.payloads.reduce(0) { $0 + $1.count })
    }

    @Test("about 90% incr by 1 and 10% set with a count of 0-9, over the given users and paths")
    func shape() throws {
        let workload = try BenchWorkload(events: 10_000, users: 20, paths: 5, seed: 7, idPrefix: "shape", userPrefix: "u")
        #expect((8_700...9_300).contains(workload.incrementCount))
        #expect(workload.userIndexes.allSatisfy { (0..<20).contains($0) })
        #expect(workload.pathIndexes.allSatisfy { (0..<5).contains($0) })
        #expect(workload.counts.allSatisfy { (0...9).contains($0) })
        #expect(Set(workload.userIndexes).count == 20)
        #expect(workload.keys[0] == Array("u\(workload.userIndexes[0])".utf8))
        let text = String(decoding: workload.payloads[0], as: UTF8.self)
        #expect(text.contains("\"shape-0\"") && text.contains("root.bench.p\(workload.pathIndexes[0])"))
    }

    @Test("the increments workload: every event an incr by 1, as the pipeline bench publishes")
    func incrementsShape() throws {
        let workload = try BenchWorkload(
            events: 2_000, users: 50, paths: 5, seed: 7, idPrefix: "incr", userPrefix: "u", kind: .increments)
        #expect(workload.incrementCount == 2_000)
        #expect(workload.counts.allSatisfy { $0 == 1 })
        #expect(workload.payloads.allSatisfy { String(decoding: $0, as: UTF8.self).contains("\"incr\"") })
    }

    @Test("upsert batches: rows distinct by (user, path) within a batch, the last count wins")
    func upsertBatches() throws {
        let workload = try BenchWorkload(events: 1_000, users: 3, paths: 2, seed: 1, idPrefix: "up", userPrefix: "u")
        let batches = workload.upsertBatches(size: 100)
        #expect(batches.count == 10)
        for (number, batch) in batches.enumerated() {
            let pairs = zip(batch.users, batch.paths).map { "\($0)|\($1)" }
            #expect(Set(pairs).count == pairs.count)
            #expect(pairs.count <= 6)
            // The last event of each pair in the batch sets its count.
            for (position, pair) in pairs.enumerated() {
                let last = (number * 100..<(number + 1) * 100).last {
                    "u\(workload.userIndexes[$0])|root.bench.p\(workload.pathIndexes[$0])" == pair
                }
                #expect(last.map { workload.counts[$0] } == batch.counts[position])
            }
        }
    }

    @Test("the query bench's counts are 1-9 and fixed by the seed")
    func queryCounts() {
        let counts = (0..<200).map { QueryBenchmark.count(user: $0, node: $0 % 20, seed: 42) }
        #expect(counts.allSatisfy { (1...9).contains($0) })
        #expect(counts == (0..<200).map { QueryBenchmark.count(user: $0, node: $0 % 20, seed: 42) })
        #expect(counts != (0..<200).map { QueryBenchmark.count(user: $0, node: $0 % 20, seed: 43) })
    }

    @Test("SplitMix64 gives Vigna's reference sequence for seed 0")
    func splitMix() {
        var generator = SplitMix64(seed: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
    }

    @Test("the HTTP answer head: status, head length and total; chunked and unframed answers refused")
    func answerHead() {
        let answer = Array("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 5\r\n\r\nhello".utf8)
        #expect(HTTPAnswerHead.parse(answer) == .complete(HTTPAnswerHead(status: 503, headLength: 55, total: 60)))
        #expect(HTTPAnswerHead.parse(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n".utf8)) == .incomplete)
        #expect(HTTPAnswerHead.parse(Array("HTTP/1.1 304 Not Modified\r\n\r\n".utf8)) == .complete(HTTPAnswerHead(status: 304, headLength: 29, total: 29)))
        guard case .malformed = HTTPAnswerHead.parse(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)) else {
            Issue.record("a chunked answer was accepted")
            return
        }
        guard case .malformed = HTTPAnswerHead.parse(Array("HTTP/1.1 200 OK\r\n\r\n".utf8)) else {
            Issue.record("an answer without Content-Length was accepted")
            return
        }
    }

    @Test("the pgbench script renames $1-$3 and draws a sampled user; other parameters are refused")
    func pgbenchScript() throws {
        let script = try QueryBenchmark.pgbenchScript(sql: "SELECT $1, $2, $3", sampleUsers: 10, stride: 20)
        #expect(script == "\\set user_id random(0, 9) * 20\nSELECT :user_id, :subtree, :max_level;\n")
        #expect(throws: BenchFailure.self) { try QueryBenchmark.pgbenchScript(sql: "SELECT $4", sampleUsers: 1, stride: 1) }
        #expect(throws: BenchFailure.self) { try QueryBenchmark.pgbenchScript(sql: "SELECT 1; SELECT 2", sampleUsers: 1, stride: 1) }
    }

    @Test("the bench's producer lingers 20 ms on the mock cluster unless -X gives linger.ms (or its alias), and keeps librdkafka's default on real brokers")
    func producerLinger() {
        func settings(mock: Bool, kafka: KafkaConfiguration) -> PipelineBenchmark.Settings {
            PipelineBenchmark.Settings(
                rate: 100, seconds: 2, warmup: 1, users: 10, streams: 10, paths: 3, partitions: 2, drainSeconds: 10, seed: 42,
                runID: "r", kafka: kafka, topic: "t", isMockCluster: mock, database: PGConfiguration(), databaseName: "scratch")
        }
        let plain = KafkaConfiguration([("bootstrap.servers", "127.0.0.1:9092")])
        #expect(settings(mock: true, kafka: plain).producerConfiguration["linger.ms"] == "20")
        #expect(settings(mock: true, kafka: plain).producerConfiguration["bootstrap.servers"] == "127.0.0.1:9092")
        #expect(settings(mock: false, kafka: plain).producerConfiguration["linger.ms"] == nil)
        var given = plain
        given.set("linger.ms", "5")
        #expect(settings(mock: true, kafka: given).producerConfiguration["linger.ms"] == "5")
        #expect(settings(mock: false, kafka: given).producerConfiguration["linger.ms"] == "5")
        var alias = plain
        alias.set("queue.buffering.max.ms", "1")
        #expect(settings(mock: true, kafka: alias).producerConfiguration["linger.ms"] == nil)
        #expect(settings(mock: true, kafka: alias).producerConfiguration["queue.buffering.max.ms"] == "1")
    }

    @Test("option limits: in range passes; out of range names the flag")
    func optionLimits() {
        var noWriters = IngestSettings.defaults
        noWriters.writers = 0
        #expect(
            IngestBenchmark.problem(events: 10, users: 1, paths: 1, partitions: 1, ingest: .defaults, rate: nil) == nil)
        #expect(
            IngestBenchmark.problem(events: 10, users: 1, paths: 1, partitions: 1, ingest: .defaults, rate: 1e-300)
                == "--rate takes 1…100000000 events/s")
        #expect(
            IngestBenchmark.problem(events: 0, users: 1, paths: 1, partitions: 1, ingest: .defaults, rate: nil)
                == "--events takes 1…1000000000")
        #expect(
            IngestBenchmark.problem(events: 10, users: 1, paths: 1, partitions: 1, ingest: noWriters, rate: nil)
                == "--writers takes 1…16")
        #expect(
            PipelineBenchmark.problem(
                rate: 100, seconds: 2, warmup: 1, users: 10, streams: 11, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10)
                == "--streams takes 1…--users (at most 100000)")
        #expect(
            PipelineBenchmark.problem(
                rate: 100, seconds: 2, warmup: 1, users: 10_000_000, streams: 200, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10)
                == nil)
        #expect(
            PipelineBenchmark.problem(
                rate: 100, seconds: 2, warmup: 1, users: 10_000_001, streams: 200, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10)
                == "--users takes 1…10000000")
        #expect(
            PipelineBenchmark.problem(
                rate: 100, seconds: 2, warmup: 1, users: 200_000, streams: nil, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10)
                == "--users above 100000 needs --streams (at most 100000 streams)")
        #expect(
            PipelineBenchmark.problem(
                rate: 100, seconds: 2, warmup: 1, users: 10, streams: nil, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10,
                hotUsers: 11) == "--hot-users takes 0…--users")
        #expect(
            PipelineBenchmark.problem(
                rate: 100, seconds: 2, warmup: 1, users: 10, streams: nil, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10,
                hotShare: 0.5) == "--hot-share needs --hot-users")
        #expect(
            PipelineBenchmark.problem(
                rate: 100, seconds: 2, warmup: 1, users: 10, streams: nil, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10,
                hotUsers: 2, hotShare: .nan) == "--hot-share takes a fraction in [0, 1]")
        #expect(BacklogBenchmark.problem(events: 1_000_000, users: 100_000, paths: 30, partitions: 32, timeoutSeconds: 900) == nil)
        #expect(BacklogBenchmark.problem(events: 0, users: 100_000, paths: 30, partitions: 32, timeoutSeconds: 900) == "--events takes 1…20000000")
        #expect(BacklogBenchmark.problem(events: 10, users: 10, paths: 30, partitions: 0, timeoutSeconds: 900) == "--partitions takes 1…10000")
        #expect(
            PipelineBenchmark.problem(
                rate: 0.1, seconds: 2, warmup: 0, users: 10, streams: nil, paths: 3, partitions: 2, poolSize: 8, drainSeconds: 10)
                == "--rate × --seconds must come to at least one event")
        #expect(
            QueryBenchmark.problem(
                users: 100, connections: 4, clientThreads: 1, poolSize: 2, treeCacheMegabytes: 0, rate: 0, pgbenchClients: nil,
                pgbenchThreads: 1, duration: 1, warmup: 0, sampleUsers: 10, loadBatchUsers: 10, loadWriters: 65)
                == "--load-writers takes 1…64")
        #expect(
            BenchScratch.connectionString("postgres://me@db:5432/app?sslmode=disable", database: "scratch")
                == "postgres://me@db:5432/scratch?sslmode=disable")
        #expect(BenchScratch.connectionString("host=db user=me", database: "scratch") == "host=db user=me dbname=scratch")
        #expect(BenchScratch.connectionString("", database: "scratch") == "dbname=scratch")
    }
}
