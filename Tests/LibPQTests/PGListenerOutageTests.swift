import Foundation
import LibPQ
import Logging
import Synchronization
import TestSupport
import Testing

/// A listener whose server goes away must wait with growing pauses (never poll a dead socket or
/// reconnect in a tight loop) and must come back by itself.
@Suite("PGListener when its database goes away")
struct PGListenerOutageTests {
    @Test("a database that refuses connections is retried with growing pauses; the listener comes back when it accepts again")
    func refusedThenBack() async throws {
        let database = try await TestDatabase.create(prefix: "listen")
        do {
            let channel = "reddot_outage_\(UInt32.random(in: 0...UInt32.max))"
            let reconnections = ReconnectionLogCount()
            let listener = try PGListener(
                configuration: database.configuration, channels: [channel], logger: reconnections.logger(level: .info))
            let events = EventLog(listener)
            let running = RunningListener(listener)
            defer { running.stop() }
            #expect(try await events.waitFor(connections: 1, seconds: 30))

            // The database goes away: its sessions end and new ones are refused.
            try await database.beginOutage()
            let before = reconnections.value
            try await Task.sleep(for: .seconds(6))
            let attempts = reconnections.value - before
            // Pauses of 100 ms doubling to 5 s make about 6 attempts in 6 s; a loop that polls
            // the closed socket, or reconnects without pausing, makes thousands.
            #expect(attempts >= 1, "the listener never noticed the database went away")
            #expect(attempts <= 15, "\(attempts) reconnection attempts in 6 s")
            #expect(events.connections == 1)

            // The database is back: the listener reconnects by itself and receives again.
            try await database.endOutage()
            #expect(try await events.waitFor(connections: 2, seconds: 30))
            let sender = PGPool(configuration: database.configuration, maximumConnections: 1, logger: TestServer.logger)
            defer { sender.close() }
            try await sender.withConnection { connection in
                try connection.query(PGStatement("test.notify", "SELECT pg_notify($1, $2)"), [channel, "back"])
            }
            #expect(try await events.waitFor(payload: "back", seconds: 30))
        } catch {
            _ = try? await database.endOutage()
            await database.drop()
            throw error
        }
        await database.drop()
    }

    @Test("a server that drops every connection at once is retried with growing pauses, not ten times a second")
    func droppedAtOnce() async throws {
        let adminURL = try TestServer.adminURL()
        let channel = "reddot_flap_\(UInt32.random(in: 0...UInt32.max))"
        let listener = try PGListener(
            configuration: PGConfiguration(connectionString: adminURL), channels: [channel], logger: TestServer.logger)
        let events = EventLog(listener)
        let running = RunningListener(listener)
        defer { running.stop() }
        #expect(try await events.waitFor(connections: 1, seconds: 30))

        // Ends the listener's session as soon as it has listened: for 6 s, and on a loaded
        // machine until it has been ended at least twice (at most 60 s). The kills are counted
        // here, by the killer, so a test task that runs late cannot miss a reconnection.
        let killer = PGPool(configuration: PGConfiguration(connectionString: adminURL), maximumConnections: 1, logger: TestServer.logger)
        defer { killer.close() }
        let started = ContinuousClock.now
        var kills = 0
        var killsInSixSeconds = 0
        while ContinuousClock.now - started < .seconds(60), ContinuousClock.now - started < .seconds(6) || kills < 2 {
            kills += try await killer.withConnection { connection in
                try connection.query(
                    PGStatement(
                        "test.kill_listener",
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()",
                        prepared: false),
                    ["LISTEN \(channel)"]
                ).rows.filter { try $0.decode(0, as: Bool.self) }.count
            }
            if ContinuousClock.now - started <= .seconds(6) { killsInSixSeconds = kills }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Growing pauses (100 ms, 200 ms, … 3.2 s) allow about 6 connections in 6 s; restarting
        // from 100 ms after every connection makes 30 or more.
        #expect(kills >= 2, "the listener did not reconnect after its session was ended")
        #expect(killsInSixSeconds <= 12, "\(killsInSixSeconds) connections in 6 s")

        // Left alone, it settles (after its current pause, at most 5 s) and receives again.
        let sender = PGPool(configuration: PGConfiguration(connectionString: adminURL), maximumConnections: 1, logger: TestServer.logger)
        defer { sender.close() }
        var delivered = false
        for attempt in 0..<30 where !delivered {
            try await sender.withConnection { connection in
                try connection.query(PGStatement("test.notify", "SELECT pg_notify($1, $2)"), [channel, "settled-\(attempt)"])
            }
            delivered = try await events.waitFor(payload: "settled-\(attempt)", seconds: 1)
        }
        #expect(delivered)
    }
}

/// Collects a listener's events on a task of its own.
private final class EventLog: Sendable {
    private final class Seen: Sendable {
        let state = Mutex<(connections: Int, payloads: [String])>((0, []))
    }

    private let seen = Seen()
    private let reader: Task<Void, Never>

    init(_ listener: PGListener) {
        let seen = self.seen
        reader = Task {
            for await event in listener.events {
                switch event {
                case .connected: seen.state.withLock { $0.connections += 1 }
                case .disconnected: break
                case .notification(let notification): seen.state.withLock { $0.payloads.append(notification.payload) }
                }
            }
        }
    }

    deinit { reader.cancel() }

    var connections: Int { seen.state.withLock { $0.connections } }

    func waitFor(connections: Int, seconds: Int) async throws -> Bool {
        try await waitUntil(seconds: seconds) { seen.state.withLock { $0.connections >= connections } }
    }

    func waitFor(payload: String, seconds: Int) async throws -> Bool {
        try await waitUntil(seconds: seconds) { seen.state.withLock { $0.payloads.contains(payload) } }
    }

    private func waitUntil(seconds: Int, _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }
}

/// Counts the listener's "reconnecting" log lines (one per failed connection attempt).
private final class ReconnectionLogCount: Sendable {
    private let count = Atomic<Int>(0)

    var value: Int { count.load(ordering: .acquiring) }

    func logger(level: Logger.Level) -> Logger {
        Logger(label: "reddot.test.listener") { _ in Handler(count: self, logLevel: level) }
    }

    private struct Handler: LogHandler {
        let count: ReconnectionLogCount
        var logLevel: Logger.Level
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            if "\(event.message)".hasSuffix("reconnecting") { count.count.add(1, ordering: .releasing) }
        }
    }
}
