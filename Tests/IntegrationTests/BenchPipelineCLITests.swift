import Foundation
import TestSupport
import Testing

/// `reddot bench pipeline` through the real binary, briefly and at a low rate: it runs the whole
/// pipeline in its own scratch database and prints the figures.
@Suite("reddot bench pipeline")
struct BenchPipelineCLITests {
    let cli = CLITests()

    @Test("a short run at 100 events/s: every event becomes visible over SSE, the figures are printed, exit 0")
    func shortRun() async throws {
        let server = try TestServer.adminURL()
        let result = try await cli.reddot([
            "bench", "pipeline", "--database-url", server, "--migrations", Repository.migrationsDirectory.path,
            "--rate", "100", "--warmup", "1", "--seconds", "2", "--users", "10", "--paths", "3", "--partitions", "2",
            "--drain-seconds", "10",
        ], timeoutSeconds: 120)  // a watchdog against a hang: the run asserts what it prints, not how fast
        #expect(result.exitCode == 0, "\(result)")
        let output = result.stdout
        #expect(output.hasPrefix("reddot bench pipeline: debug build"), "\(output)")
        #expect(output.contains("10 SSE streams, one per user"), "\(output)")
        #expect(output.contains("mock cluster (in-process), 2 partitions; the bench's producer lingers 20 ms"), "\(output)")
        #expect(output.contains("open loop, 100 events/s offered; 1 s warm-up + 2 s measured; 200 events in the window"), "\(output)")
        #expect(output.contains("publish → visible over SSE p50 "), "\(output)")
        #expect(output.contains("(200 of 200 events)"), "\(output)")
        #expect(output.contains("rollup lag: dirty mark → aggregates committed"), "\(output)")
        #expect(output.contains(" records per event in the window, "), "\(output)")
        #expect(output.contains("(the whole server's; shared_buffers "), "\(output)")
        // The rows per event, about (a 2 s window is within PostgreSQL's counts' delay).
        #expect(output.contains("rows:       about ") && output.contains(" rows written per event in the window ("), "\(output)")
        #expect(output.contains("verified:   yes, every event visible over SSE; 300 event ids applied, 0 rejected; leaf counts sum to 300"), "\(output)")
        #expect(output.contains("(dropped)"), "\(output)")
    }

    @Test("a Kafka property librdkafka refuses: exit 1 with librdkafka's reason, not only the streams' failure")
    func refusedKafkaProperty() async throws {
        let server = try TestServer.adminURL()
        let result = try await cli.reddot([
            "bench", "pipeline", "--database-url", server, "--migrations", Repository.migrationsDirectory.path,
            "--rate", "100", "--warmup", "1", "--seconds", "2", "--users", "10", "--paths", "3", "--partitions", "2",
            "-X", "linger.ms=abc",
        ], timeoutSeconds: 120)  // a watchdog against a hang
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("Kafka property 'linger.ms' was refused"), "\(result)")
    }

    @Test("--help says what is measured and the exit codes")
    func help() async throws {
        let result = try await cli.reddot(["bench", "pipeline", "--help"])
        #expect(result.exitCode == 0, "\(result)")
        // The help is wrapped to the terminal's width: compare with single spaces.
        let help = result.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(help.contains("publish → visible p50/p99/max"), "\(result)")
        #expect(help.contains("reddot_rollup_lag_seconds"), "\(result)")
        #expect(help.contains("Exit codes: 0 measured and verified"), "\(result)")
    }
}
