import Foundation
import RdKafka

extension PipelineBenchmark {
    /// The CPU of one measured window.
    struct WindowCPU: Sendable {
        var usage: CPUUsage
        var producerSeconds: Double
        var streamSeconds: Double
    }

    /// Waits for the streams to open, warms ingest up, publishes the workload on schedule while
    /// sampling the CPU of the measured window, then waits for the last events to show.
    func publishAndWatch(
        client: PipelineStreamClient, recorder: BenchRecorder, tracker: PipelineTracker, lagCapture: RollupLagCapture
    ) async throws -> Measurement {
        let settings = self.settings
        try await waitForStreams(client, recorder: recorder)
        let producer = try KafkaProducer(configuration: settings.producerConfiguration, logger: logger)
        return try await producer.closing { () async throws -> Measurement in
            let publisher = BenchPublisher(producer: producer, recorder: recorder, stallSeconds: Self.stallSeconds)
            benchProgress("warming up ingest (the consumer group joins)")
            let warmups = try await publisher.warmUp(
                topic: settings.topic, mockPartitions: settings.isMockCluster ? settings.partitions : nil, runID: settings.runID,
                user: Self.warmupUser, path: "root.warmup")

            let total = settings.totalEvents
            benchProgress("generating \(total) events")
            let workload = try await onThread(named: "reddot.bench.generate") { try PipelineWorkload(settings: settings) }
            let start = BenchClock.now + 20_000_000
            let measureStart = start + UInt64(settings.warmup) * 1_000_000_000
            let measureEnd = measureStart + UInt64(settings.seconds) * 1_000_000_000
            benchProgress(
                "publishing \(BenchReport.number(settings.rate)) events/s over \(settings.users) users × \(settings.paths) paths: "
                    + "\(settings.warmup) s warm-up, then \(settings.seconds) s measured")
            // About 2 MB of records per partition may be published and not yet committed (the mock
            // broker keeps ~5 MB of each); the producer waits beyond that.
            let window = settings.isMockCluster ? max(20_000, Int(settings.partitions) * 2_000_000 / (workload.averagePayloadBytes + 60)) : Int.max
            let baseline = recorder.committedTotal
            async let published: UInt64 = onThread(named: "reddot.bench.producer") {
                try publisher.publishOnSchedule(workload, settings: settings, start: start, window: window, baseline: baseline, tracker: tracker)
            }

            try await BenchClock.sleep(until: measureStart)
            let walBefore = await WALSample.now(settings.database, logger: logger)
            let rowsBefore = await TableRowsSample.now(settings.database, logger: logger)
            let before = CPUSample.now(database: settings.databaseName)
            let (producerBefore, streamsBefore) = (tracker.producerCPUNanoseconds, client.cpuNanoseconds)
            try await BenchClock.sleep(until: measureEnd)
            let after = CPUSample.now(database: settings.databaseName)
            let wal = PhaseWAL(before: walBefore, after: await WALSample.now(settings.database, logger: logger))
            let rows = PhaseRows(before: rowsBefore, after: await TableRowsSample.now(settings.database, logger: logger))
            let producerSeconds = Double(tracker.producerCPUNanoseconds - producerBefore) / 1e9
            let streamSeconds = Double(client.cpuNanoseconds - streamsBefore) / 1e9
            let cpu = WindowCPU(
                usage: CPUUsage(before: before, after: after, httpClientSeconds: producerSeconds + streamSeconds),
                producerSeconds: producerSeconds, streamSeconds: streamSeconds)

            let maxBehind = try await published
            let deliveries = try await publisher.awaitDeliveries()

            benchProgress("published \(total) events; waiting for the last ones to become visible")
            let drainStart = BenchClock.now
            let drainDeadline = drainStart + UInt64(settings.drainSeconds) * 1_000_000_000
            let tracked = tracker.trackedCount
            while tracker.visibleCount < tracked, BenchClock.now < drainDeadline, !recorder.hasIngestEnded {
                try await Task.sleep(for: .milliseconds(5))
            }
            let drainSeconds = Double(BenchClock.now - drainStart) / 1e9
            // Let the last commits' callbacks land before reading the history.
            let ends = recorder.logEndOffsets(warmups: warmups, events: total)
            let commitDeadline = BenchClock.now + 5_000_000_000
            while !recorder.committedAll(ends), BenchClock.now < commitDeadline, !recorder.hasIngestEnded {
                try await Task.sleep(for: .milliseconds(5))
            }
            var measurement = summarize(
                workload: workload, deliveries: deliveries, recorder: recorder, tracker: tracker, streams: client.totals, cpu: cpu)
            measurement.wal = wal
            measurement.rows = rows
            var lag = lagCapture.samples(from: measureStart, to: measureEnd)
            lag.sort()
            measurement.rollupLag = LatencySummary(sortedNanoseconds: lag.map { UInt64(max(0, $0)) })
            measurement.rollupLagSamples = lag.count
            measurement.usersRolledUpByIngest = lagCapture.counted("reddot_ingest_users_total", "rolled_up", from: measureStart, to: measureEnd)
            measurement.usersLeftToRollup = lagCapture.counted("reddot_ingest_users_total", "left", from: measureStart, to: measureEnd)
            for trigger in ["idle", "waited", "full"] {
                measurement.ingestBatches[trigger] = lagCapture.counted("reddot_ingest_batches_total", trigger, from: measureStart, to: measureEnd)
            }
            measurement.rollupLagUnder100Percent = lag.isEmpty ? 0 : 100 * Double(lag.count(where: { $0 < 100_000_000 })) / Double(lag.count)
            let feedLag = lagCapture.samples(RollupLagCapture.feedLabel, from: measureStart, to: measureEnd).sorted()
            measurement.feedLag = LatencySummary(sortedNanoseconds: feedLag.map { UInt64(max(0, $0)) })
            measurement.feedLagSamples = feedLag.count
            measurement.maxBehindScheduleMilliseconds = Double(maxBehind) / 1e6
            measurement.trackedEvents = tracked
            measurement.drainSeconds = drainSeconds
            return measurement
        }
    }

    /// Waits until every stream has opened (its first event arrived), for at most 60 s.
    private func waitForStreams(_ client: PipelineStreamClient, recorder: BenchRecorder) async throws {
        let openDeadline = BenchClock.now + 60_000_000_000
        while client.readyStreams < settings.streams {
            if recorder.hasIngestEnded { throw BenchFailure("the services stopped: \(recorder.ingestError ?? "")") }
            if let problem = client.totals.firstError {
                // A stream fails when the services do (a Kafka property librdkafka refuses stops
                // them at once): their reason, when they end within a second, is the one to say.
                let waitUntil = BenchClock.now + 1_000_000_000
                while !recorder.hasIngestEnded, BenchClock.now < waitUntil { try await Task.sleep(for: .milliseconds(20)) }
                if recorder.hasIngestEnded {
                    throw BenchFailure("the services stopped: \(recorder.ingestError ?? "") (an SSE stream then failed: \(problem))")
                }
                throw BenchFailure("an SSE stream failed while opening: \(problem)")
            }
            if BenchClock.now > openDeadline { throw BenchFailure("only \(client.readyStreams) of \(settings.streams) SSE streams opened within 60 s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// The latencies of the measured window's events: publish → visible, publish → commit,
    /// commit → visible; the publish rate; how many were tracked, seen and committed.
    private func summarize(
        workload: PipelineWorkload, deliveries: BenchRecorder.Deliveries, recorder: BenchRecorder, tracker: PipelineTracker,
        streams: PipelineStreamClient.Totals, cpu: WindowCPU
    ) -> Measurement {
        let (total, warmupEvents) = (settings.totalEvents, settings.warmupEvents)
        let (producedAt, visibleAt) = tracker.times
        let commits = recorder.commitHistory
        var toVisible: [UInt64] = []
        var toCommit: [UInt64] = []
        var commitToVisible: [UInt64] = []
        var uncommitted = 0
        var trackedInWindow = 0
        // Publish → commit by the second of the window each event was published in, to tell a
        // stall (a few slow seconds) from a pipeline that is slow throughout.
        var toCommitBySecond: [[UInt64]] = []
        let windowStart = producedAt[warmupEvents]
        for index in warmupEvents..<total {
            let produced = producedAt[index]
            let visible = visibleAt[index]
            if visible > 0 { toVisible.append(visible >= produced ? visible - produced : 0) }
            if Int(workload.users[index]) < settings.streams { trackedInWindow += 1 }
            guard let history = commits[deliveries.partitions[index]],
                let committedAt = BenchRecorder.firstCommit(after: deliveries.offsets[index], in: history)
            else {
                uncommitted += 1
                continue
            }
            let latency = committedAt >= produced ? committedAt - produced : 0
            toCommit.append(latency)
            let second = Int((produced >= windowStart ? produced - windowStart : 0) / 1_000_000_000)
            while toCommitBySecond.count <= second { toCommitBySecond.append([]) }
            toCommitBySecond[second].append(latency)
            if visible > 0 { commitToVisible.append(visible >= committedAt ? visible - committedAt : 0) }
        }
        toVisible.sort()
        toCommit.sort()
        commitToVisible.sort()
        let (firstProduced, lastProduced) = (producedAt[warmupEvents], producedAt[total - 1])
        return Measurement(
            postgresqlSettings: [:], publishedInWindow: total - warmupEvents, trackedInWindow: trackedInWindow,
            windowPublishSeconds: lastProduced > firstProduced ? Double(lastProduced - firstProduced) / 1e9 : 0,
            visibleInWindow: toVisible.count, toVisible: LatencySummary(sortedNanoseconds: toVisible),
            toCommit: LatencySummary(sortedNanoseconds: toCommit), commitToVisible: LatencySummary(sortedNanoseconds: commitToVisible),
            totalEvents: total, visibleEvents: tracker.visibleCount, uncommittedEvents: uncommitted, streams: streams, cpu: cpu.usage,
            producerCPUSeconds: cpu.producerSeconds, streamClientCPUSeconds: cpu.streamSeconds,
            toCommitP99BySecond: toCommitBySecond.map { LatencySummary(sortedNanoseconds: $0.sorted()).p99Milliseconds })
    }
}
