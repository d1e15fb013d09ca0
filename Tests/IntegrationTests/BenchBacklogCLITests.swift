import Foundation
import TestSupport
import Testing

/// `reddot bench backlog` through the real binary, on a small backlog: ingest and the rollup run
/// as child processes of the bench (this same binary), and the plain Python consumer beside them.
@Suite("reddot bench backlog")
struct BenchBacklogCLITests {
    let cli = CLITests()

    @Test("a small backlog: every phase runs as its own process, the whole pipeline and the plain consumer verify, exit 0")
    func smallBacklog() async throws {
        let server = try TestServer.adminURL()
        let result = try await cli.reddot([
            "bench", "backlog", "--database-url", server, "--migrations", Repository.migrationsDirectory.path,
            "--events", "3000", "--users", "200", "--paths", "4", "--partitions", "2", "--timeout-seconds", "120",
            "--peer-script", Repository.root.appendingPathComponent("deploy/bench/plain_consumer.py").path,
            "--rollup-argument", "--rollup-backlog-settle-seconds", "--rollup-argument", "5",
        ], timeoutSeconds: 240)  // four phases, each with processes of its own, in a debug build beside other suites
        #expect(result.exitCode == 0, "\(result)")
        let output = result.stdout
        #expect(output.hasPrefix("reddot bench backlog: debug build"), "\(output)")
        #expect(output.contains("3,000 incr by 1 over 200 users × 4 paths"), "\(output)")
        #expect(output.contains("ingest / rollup, with their defaults; rollup also with --rollup-backlog-settle-seconds 5"), "\(output)")
        #expect(output.contains("ingest:     reddot ingest alone, until its offsets cover the backlog: "), "\(output)")
        #expect(output.contains("rollup:     reddot rollup over the "), "\(output)")
        #expect(output.contains("pipeline:   reddot ingest + reddot rollup started together, until every parent is current: "), "\(output)")
        #expect(output.contains("peer:       plain at-least-once consumer"), "\(output)")
        #expect(output.contains("bytes on disk per event retained"), "\(output)")
        #expect(output.contains("versions:   the pipeline made "), "\(output)")
        // The server's WAL per phase (PostgreSQL 15 has pg_stat_wal), with the settings that size it.
        #expect(output.contains("wal:        ingest alone: "), "\(output)")
        #expect(output.contains(" records per user, "), "\(output)")
        #expect(output.contains("(the whole server's WAL; shared_buffers "), "\(output)")
        // The rows each phase wrote: every event leaves exactly one id; the peer writes only its nodes.
        #expect(output.contains("rows:       ingest alone: "), "\(output)")
        #expect(output.contains("applied_user_event_generation 1.00/0.00/0.00"), "\(output)")
        #expect(output.contains(" rows written per user ("), "\(output)")
        #expect(output.contains("            peer: ") && output.contains("most (inserted/updated/deleted): peer_badge "), "\(output)")
        #expect(
            output.contains(
                "verified:   yes, the whole pipeline's leaves sum to 3000 and reddot verify found 0 mismatches; the plain consumer's roots sum to 3000"),
            "\(output)")
    }

    @Test("a --rollup-argument that reddot rollup refuses ends the bench with the rollup's own sentence, exit 1")
    func refusedRollupArgument() async throws {
        let server = try TestServer.adminURL()
        let result = try await cli.reddot([
            "bench", "backlog", "--database-url", server, "--migrations", Repository.migrationsDirectory.path,
            "--events", "200", "--users", "20", "--paths", "2", "--partitions", "1", "--timeout-seconds", "120", "--no-peer",
            "--rollup-argument", "--rollup-backlog-settle-seconds", "--rollup-argument", "4000",
        ], timeoutSeconds: 240)
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stderr.contains("rollup exited early"), "\(result)")
        #expect(result.stderr.contains("--rollup-backlog-settle-seconds takes 0…3600"), "\(result)")
    }

    @Test("out-of-range options name the flag and exit 64")
    func optionLimits() async throws {
        let result = try await cli.reddot(["bench", "backlog", "--events", "0"])
        #expect(result.exitCode == 64, "\(result)")
        #expect(result.stderr.contains("--events takes 1…20000000"), "\(result)")
    }
}
