import Foundation
import LibPQ
import TestSupport
import Testing

/// The runbook's metrics, scraped from `/metrics` of `reddot ingest --metrics-port` and
/// `reddot rollup --metrics-port` run as child processes, while the test drives them.
@Suite("reddot ingest and rollup /metrics, scraped while driven")
struct MetricsScrapeTests {
    /// `count` direct `incr` events for users m0…m9, ids `<prefix>-<n>`.
    static func goodEvents(_ prefix: String, count: Int) -> [(key: String, payload: String)] {
        (0..<count).map { index in
            let user = "m\(index % 10)"
            return (user, #"{"id":"\#(prefix)-\#(index)","op":"incr","user":"\#(user)","path":"root.chat.c\#(index % 3)"}"#)
        }
    }

    /// Two unknown types, one malformed record, one invalid path.
    static let badEvents: [(key: String, payload: String)] = [
        ("m0", #"{"id":"bad-1","type":"promo.flash","users":["m0"],"attrs":{"item":"x1"}}"#),
        ("m1", #"{"id":"bad-2","type":"promo.flash","users":["m1"],"attrs":{"item":"x2"}}"#),
        ("m2", #"{"id":"bad-3","op":"incr","user":"m2","#),
        ("m3", #"{"id":"bad-4","op":"set","user":"m3","path":"root.a*b"}"#),
    ]

    @Test(
        "ingest: applied = good events sent, rejected and dead letters = bad records sent, a repeated id is a duplicate and rewrites its batch once (then ingest merges), lag rises with records read but not committed and returns to 0; rollup: queue depth shows the waiting users and drains",
        .timeLimit(.minutes(4)))
    func metricsMoveAsDriven() async throws {
        let harness = try await PipelineHarness(partitions: 2)
        try await tearingDown({ await harness.tearDown() }) {
            let ingestPort = try ServeCLITests.freePort(), rollupPort = try ServeCLITests.freePort()
            let ingest = try ReddotChild(
                harness.ingestArguments(group: "g-metrics", metricsPort: ingestPort, batchWaitMilliseconds: 6_000, batchWhenIdle: false),
                in: harness.folder,
                name: "ingest")
            defer { _ = ingest }
            let lag = "reddot_kafka_consumer_lag_records"
            let topicLabel = #"topic="\#(harness.topic)""#

            // 1. Good and bad records: the counters match what was sent, the lag ends at 0.
            try await harness.publish(Self.goodEvents("a", count: 30) + Self.badEvents)
            let settled = try await PrometheusPage.waitFor(port: ingestPort, seconds: 60) { page in
                page.value(#"reddot_ingest_records_total{outcome="applied"}"#) == 30
                    && page.value("reddot_ingest_dead_letters_published_total") == 4
                    && page.values(lag, matching: [topicLabel]).count == 2
                    && page.values(lag, matching: [topicLabel]).allSatisfy { $0 == 0 }
            }
            #expect(settled.held, "ingest's /metrics did not settle:\n\(settled.page.text)\n\(ingest.standardError)")
            let page = settled.page
            #expect(page.value(#"reddot_ingest_records_total{outcome="applied"}"#) == 30)
            #expect(page.value(#"reddot_ingest_records_total{outcome="consumed"}"#) == 34)
            #expect(page.value(#"reddot_ingest_rejected_total{reason="unknown_type"}"#) == 2)
            #expect(page.value(#"reddot_ingest_rejected_total{reason="malformed_json"}"#) == 1)
            #expect(page.value(#"reddot_ingest_rejected_total{reason="invalid_path"}"#) == 1)
            #expect(page.values("reddot_ingest_rejected_total").reduce(0, +) == 4)
            #expect(page.value("reddot_ingest_dead_letters_published_total") == 4)
            // With --no-batch-when-idle and 34 records, every batch went after its wait.
            #expect(page.value(#"reddot_ingest_batches_total{trigger="waited"}"#) ?? 0 >= 1)
            for trigger in ["idle", "full", "stop"] {
                #expect(page.value(#"reddot_ingest_batches_total{trigger="\#(trigger)"}"#) ?? 0 == 0, "trigger \(trigger)")
            }
            #expect(try await harness.count("SELECT count(*) FROM \(AppliedKeys.table)") == 30)
            #expect(try await harness.count("SELECT count(*) FROM rejected_record WHERE published_at IS NOT NULL") == 4)
            // Ingest (--rollup-in-ingest, the default) brought its users current itself: no user
            // waits for the rollup, which is not running yet.
            #expect(page.value(#"reddot_ingest_users_total{rollup="rolled_up"}"#) ?? 0 >= 10)
            #expect(page.value(#"reddot_ingest_users_total{rollup="left"}"#) ?? 0 == 0)
            #expect(try await harness.count("SELECT count(*) FROM user_version") == 10)
            #expect(try await harness.count("SELECT count(*) FROM dirty_mark") == 0)

            // 2. More records: while ingest waits to fill its batch (6 s, --no-batch-when-idle) they
            //    are read but not committed, so the lag rises; once committed it returns to 0. (Not
            //    always to all 20 at once: on a loaded machine ingest once read one partition's
            //    records, wrote them after the wait, and only then read the other's. With a 1.5 s
            //    wait, a run of the whole suite once saw no lag at all: librdkafka's statistics,
            //    every 200 ms here, and the scrapes both missed the window.)
            try await harness.publish(Self.goodEvents("b", count: 20))
            let behind = try await PrometheusPage.waitFor(port: ingestPort, seconds: 30) { page in
                let total = page.values(lag, matching: [topicLabel]).reduce(0, +)
                return total > 0 && total <= 20
            }
            #expect(behind.held, "the lag did not rise:\n\(behind.page.text)")
            let drained = try await PrometheusPage.waitFor(port: ingestPort, seconds: 60) { page in
                page.value(#"reddot_ingest_records_total{outcome="applied"}"#) == 50
                    && page.values(lag, matching: [topicLabel]).allSatisfy { $0 == 0 }
            }
            #expect(drained.held, "the lag did not return to 0:\n\(drained.page.text)")

            // 2a. An event id applied before: a duplicate, and its batch's plain inserts met the
            //     stored id, so it was written again with merging inserts.
            #expect(drained.page.value("reddot_ingest_rewritten_batches_total") ?? 0 == 0)
            try await harness.publish(Self.goodEvents("a", count: 1))
            let repeated = try await PrometheusPage.waitFor(port: ingestPort, seconds: 60) { page in
                page.value(#"reddot_ingest_records_total{outcome="duplicate"}"#) == 1
                    && page.value("reddot_ingest_rewritten_batches_total") == 1
            }
            #expect(repeated.held, "the repeated id was not counted:\n\(repeated.page.text)")
            #expect(repeated.page.value("reddot_ingest_rewritten_batches_total") == 1)
            #expect(repeated.page.value(#"reddot_ingest_records_total{outcome="applied"}"#) == 50)
            //     The same id again, in a later batch: ingest now merges from the start, so nothing
            //     is rewritten.
            try await harness.publish(Self.goodEvents("a", count: 1))
            let again = try await PrometheusPage.waitFor(port: ingestPort, seconds: 60) { page in
                page.value(#"reddot_ingest_records_total{outcome="duplicate"}"#) == 2
            }
            #expect(again.held, "the repeated id was not counted again:\n\(again.page.text)")
            #expect(again.page.value("reddot_ingest_rewritten_batches_total") == 1)

            // 2b. The database is stuck (the offsets table locked) while records keep arriving: the
            //     lag should keep rising (the runbook's "stuck on the database" alert).
            let sql = PGConfiguration(connectionString: harness.database.url)
            try await withHeldSession(sql, holding: "BEGIN; LOCK TABLE consumer_offset IN EXCLUSIVE MODE", until: "ROLLBACK") {
                // The first batch goes to the writers and waits for the database; the poll loop goes
                // on reading the second until it must hand it over; then the third arrives.
                try await harness.publish(Self.goodEvents("c", count: 10))
                try await Task.sleep(for: .seconds(3))
                try await harness.publish(Self.goodEvents("d", count: 10))
                try await Task.sleep(for: .seconds(3))
                try await harness.publish(Self.goodEvents("e", count: 10))
                // librdkafka's statistics come every 5 s: give them a few rounds on a loaded machine.
                let stuck = try await PrometheusPage.waitFor(port: ingestPort, seconds: 20) { page in
                    page.values(lag, matching: [topicLabel]).reduce(0, +) == 30
                }
                #expect(stuck.held, "the lag did not rise to 30 while the database was stuck:\n\(stuck.page.text)")
            }
            let recovered = try await PrometheusPage.waitFor(port: ingestPort, seconds: 60) { page in
                page.value(#"reddot_ingest_records_total{outcome="applied"}"#) == 80
                    && page.values(lag, matching: [topicLabel]).allSatisfy { $0 == 0 }
            }
            #expect(recovered.held, "ingest did not catch up once the database was free:\n\(recovered.page.text)")

            // 3. Rollup: ten users wait (their rollup locks held, so ingest leaves them to the
            //    rollup, and the rollup's claim passes them by); the queue depth shows 10, then 0
            //    once they are free and rolled up.
            #expect(try await harness.count("SELECT count(DISTINCT user_id) FROM dirty_mark") == 0)
            let (rollup, waiting) = try await withHeldSession(
                sql, holding: "BEGIN; SELECT pg_advisory_xact_lock(1919247460, hashtext('m' || g)) FROM generate_series(0, 9) AS g",
                until: "ROLLBACK"
            ) {
                try await harness.publish(Self.goodEvents("f", count: 10))
                let left = try await PrometheusPage.waitFor(port: ingestPort, seconds: 60) { page in
                    page.value(#"reddot_ingest_records_total{outcome="applied"}"#) == 90
                }
                #expect(left.held, "ingest did not apply the events of the held users:\n\(left.page.text)")
                #expect(left.page.value(#"reddot_ingest_users_total{rollup="left"}"#) == 10)
                #expect(try await harness.count("SELECT count(DISTINCT user_id) FROM dirty_mark") == 10)
                let rollup = try ReddotChild(
                    ["rollup", "--database-url", harness.database.url, "--log-level", "error", "--metrics-port", "\(rollupPort)"],
                    in: harness.folder, name: "rollup")
                let waiting = try await PrometheusPage.waitFor(port: rollupPort, seconds: 30) { page in
                    page.value("reddot_rollup_queue_depth_users") == 10
                }
                return (rollup, waiting)
            }
            defer { _ = rollup }
            #expect(waiting.held, "rollup's queue depth did not show 10:\n\(waiting.page.text)\n\(rollup.standardError)")
            #expect(waiting.page.value("reddot_rollup_users_total") ?? 0 == 0)
            let rolled = try await PrometheusPage.waitFor(port: rollupPort, seconds: 30) { page in
                page.value("reddot_rollup_queue_depth_users") == 0 && page.value("reddot_rollup_users_total") == 10
            }
            #expect(rolled.held, "rollup's queue depth did not drain:\n\(rolled.page.text)")
            #expect(rolled.page.value("reddot_rollup_changed_users_total") == 10)
            #expect(rolled.page.value("reddot_rollup_lag_seconds_count") == 10)
            #expect(rolled.page.value("reddot_rollup_errors_total") ?? 0 == 0)
            #expect(try await harness.count("SELECT count(DISTINCT user_id) FROM dirty_mark") == 0)

            #expect(try await ingest.stop() == 0, "\(ingest.standardError)")
            #expect(try await rollup.stop() == 0, "\(rollup.standardError)")
        }
    }

    @Test(
        "with the defaults, batches go when the writers are free: reddot_ingest_batches_total counts them as idle, none as waited or full",
        .timeLimit(.minutes(3)))
    func batchesGoWhenIdle() async throws {
        let harness = try await PipelineHarness(partitions: 2)
        try await tearingDown({ await harness.tearDown() }) {
            let port = try ServeCLITests.freePort()
            // A batch wait of ten minutes: only the writers being free sends these batches.
            let ingest = try ReddotChild(
                harness.ingestArguments(group: "g-idle-metrics", metricsPort: port, batchWaitMilliseconds: 600_000),
                in: harness.folder, name: "ingest")
            defer { _ = ingest }
            try await harness.publish(Self.goodEvents("i", count: 20))
            let applied = try await PrometheusPage.waitFor(port: port, seconds: 60) { page in
                page.value(#"reddot_ingest_records_total{outcome="applied"}"#) == 20
            }
            #expect(applied.held, "ingest did not apply the records within a minute:\n\(applied.page.text)\n\(ingest.standardError)")
            #expect(applied.page.value(#"reddot_ingest_batches_total{trigger="idle"}"#) ?? 0 >= 1, "\(applied.page.text)")
            #expect(applied.page.value(#"reddot_ingest_batches_total{trigger="waited"}"#) ?? 0 == 0)
            #expect(applied.page.value(#"reddot_ingest_batches_total{trigger="full"}"#) ?? 0 == 0)
            #expect(try await ingest.stop() == 0, "\(ingest.standardError)")
        }
    }
}
