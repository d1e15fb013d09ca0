import Foundation
import RedDotClient
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// RedDotClient against a real `reddot run` (real PostgreSQL, events through librdkafka's mock
/// cluster), with the client's default options unless a test is about an option.
@Suite("RedDotClient against reddot run", .serialized)
struct ClientCLITests {
    /// Waits until the client has streamed the server's tree of `user`: the same version and
    /// the same shown badges.
    static func converged(_ client: RedDotClient, _ harness: ClientServerHarness, seconds: Double = 30) async throws -> Bool {
        try await eventually(seconds: seconds) {
            let server = try await harness.serverTree(client.user)
            guard client.version == server.version else { return false }
            return server.nodes.allSatisfy { path, badge in client.badge(path).looksTheSame(badge) }
        }
    }

    /// What each of up to `attempts` runs of `measure` measured, stopping at the first within
    /// `bound`: a latency bound that the whole suite, sharing two cores, may miss once (a
    /// structurally slow path misses every attempt).
    static func latencies(
        within bound: Duration, attempts: Int = 3, _ measure: () async throws -> Duration
    ) async throws -> [Duration] {
        var latencies: [Duration] = []
        for _ in 0..<attempts {
            latencies.append(try await measure())
            if latencies.last ?? .zero < bound { break }
        }
        return latencies
    }

    /// Publishes with `publish`, waits until the server's tree of `user` passes `shown` (polled),
    /// then until `seen` holds on the client's side, and returns the time from the server to the
    /// client: the client's own latency, apart from the pipeline's, which a loaded machine
    /// stretches (publish to callback took 1.09–1.16 s with every suite running at once).
    static func serverToClient(
        _ harness: ClientServerHarness, user: String, publish: () async throws -> Void,
        shown: @escaping ((version: Int64, nodes: [String: Badge])) -> Bool, seen: () async -> Bool
    ) async throws -> Duration {
        try await publish()
        _ = try await harness.waitForServer(user, shown)
        let shownAt = ContinuousClock.now
        #expect(await eventually(seconds: 10) { await seen() })
        return ContinuousClock.now - shownAt
    }

    @Test("observe: called back at once, then within 1 s of the server showing a published event; a released observation stops; 100 observers see their own node")
    func observe() async throws {
        try await ClientServerHarness.with { harness in
            let client = try await harness.client("ada")
            let chat = Received()
            var observation: BadgeObservation? = try client.observe("root.chat") { chat.append($0) }
            #expect(chat.count == 1, "the first callback comes at once, before observe returns")
            #expect(chat.last?.shown == false)
            client.start()
            defer { client.stop() }
            #expect(await eventually(seconds: 10) { client.connectionState == .streaming })

            // A published event reaches the callback within 1 s of the server showing it (once
            // ingest has joined its group): the best of up to three, because the whole suite
            // shares two cores with this test (a slow path, such as polling every 30 s instead of
            // streaming, fails all three).
            try await harness.increment([("warm", "root.x", 1)])
            try await harness.waitForServer("warm") { $0.version > 0 }
            var chatCount: Int64 = 0
            let latencies = try await Self.latencies(within: .seconds(1)) {
                chatCount += 2
                let expected = chatCount
                return try await Self.serverToClient(
                    harness, user: "ada", publish: { try await harness.increment([("ada", "root.chat.c1", 2)]) },
                    shown: { $0.nodes["root.chat"]?.count == expected }, seen: { chat.last?.count == expected })
            }
            #expect(latencies.contains { $0 < .seconds(1) }, "server to callback took \(latencies)")

            // Released: no more callbacks.
            let before = chat.count
            observation = nil
            #expect(observation == nil && client.observerCount == 0)
            try await harness.increment([("ada", "root.chat.c1", 1)])
            let server = try await harness.waitForServer("ada") { $0.nodes["root.chat"]?.count == chatCount + 1 }
            #expect(await eventually { client.version == server.version })
            #expect(chat.count == before)

            // 100 observers of overlapping paths.
            let paths = ["root", "root.chat", "root.chat.c1", "root.chat.c2", "root.feed", "root.feed.f1", "root.feed.f1.x", "root.quiet"]
            let observers = try (0..<100).map { index in
                let received = Received()
                let path = paths[index % paths.count]
                return (path, received, try client.observe(path) { received.append($0) })
            }
            var random = SeededRandom(seed: 7)
            let leaves = ["root.chat.c1", "root.chat.c2", "root.feed.f1.x", "root.feed"]
            var total = Int(chatCount) + 1
            for _ in 0..<6 {
                let burst = (0..<(1 + Int(random.next() % 3))).map { _ in
                    (user: "ada", path: leaves[Int(random.next() % UInt64(leaves.count))], by: 1 + Int(random.next() % 4))
                }
                total += burst.reduce(0) { $0 + $1.by }
                try await harness.increment(burst)
                try await Task.sleep(for: .milliseconds(150))
            }
            try await harness.waitForServer("ada") { $0.nodes["root"]?.count == Int64(total) }
            #expect(try await Self.converged(client, harness))
            let final = try await harness.serverTree("ada")
            for (path, received, observation) in observers {
                let seen = received.all
                #expect(seen.allSatisfy { $0.path == path }, "\(path): only its own node")
                #expect(zip(seen, seen.dropFirst()).allSatisfy { !$0.looksTheSame($1) }, "\(path): a callback only when it changed")
                #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.version <= $1.version }, "\(path): versions never go back")
                let expected = final.nodes[path] ?? .hidden(path, version: final.version)
                #expect(seen.last?.looksTheSame(expected) == true, "\(path): ends at the server's badge")
                if path == "root.quiet" { #expect(seen.count == 1, "an untouched node gets only the first callback") }
                // Observers of one path saw the same sequence.
                let twin = observers.first { $0.0 == path }
                #expect(twin?.1.all.map(\.count) == seen.map(\.count))
                _ = observation
            }
        }
    }

    @Test("resume: the server restarts mid-stream; the client reconnects from its last version and ends at the server's tree")
    func resume() async throws {
        try await ClientServerHarness.with { harness in
            let client = try await harness.client("bo")
            let versions = Received()
            let observation = try client.observe("root") { versions.append($0) }
            defer { observation.cancel() }
            client.start()
            defer { client.stop() }
            try await harness.increment([("bo", "root.chat.c1", 1), ("bo", "root.feed.f1", 2)])
            try await harness.waitForServer("bo") { $0.nodes["root"]?.count == 3 }
            #expect(try await Self.converged(client, harness))
            let before = client.version

            #expect(try await harness.stopServer() == 0)
            #expect(await eventually(seconds: 10) { client.connectionState != .streaming })
            // Published while the server is down: ingest applies them when it is back.
            try await harness.increment([("bo", "root.chat.c2", 3), ("bo", "root.chat.c1", 1)])
            try await harness.startServer()
            #expect(await eventually(seconds: 60) { client.connectionState == .streaming })
            try await harness.waitForServer("bo") { $0.nodes["root"]?.count == 7 }
            try await harness.increment([("bo", "root.feed.f2", 1)])
            try await harness.waitForServer("bo") { $0.nodes["root"]?.count == 8 }
            #expect(try await Self.converged(client, harness))
            #expect(client.version > before)
            #expect(client.badge("root").count == 8)
            let seen = versions.all.map(\.version)
            #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 <= $1 }, "no callback goes back in version: \(seen)")

            // Stopped, then started again after two versions went by: the stream resumes from
            // the version held (the server replays the two from its change log).
            client.stop()
            let replays = try await PrometheusPage.scrape(port: harness.port).values("reddot_api_replays_total").reduce(0, +)
            try await harness.increment([("bo", "root.chat.c3", 1)])
            try await harness.waitForServer("bo") { $0.nodes["root"]?.count == 9 }
            try await harness.increment([("bo", "root.chat.c3", 1)])
            try await harness.waitForServer("bo") { $0.nodes["root"]?.count == 10 }
            client.start()
            #expect(try await Self.converged(client, harness))
            #expect(client.badge("root").count == 10)
            let after = try await PrometheusPage.scrape(port: harness.port).values("reddot_api_replays_total").reduce(0, +)
            #expect(after == replays + 1, "the stream resumed with Last-Event-ID and got the missed versions replayed")
        }
    }

    @Test("polling: 2 s interval and 5 s tolerance window give a request every 5 s; 304s cost no callback")
    func polling() async throws {
        try await ClientServerHarness.with { harness in
            try await harness.increment([("cy", "root.chat.c1", 1)])
            try await harness.waitForServer("cy") { $0.nodes["root.chat"]?.count == 1 }
            let route = "/v1/users/{user}/badges"
            let before = try await harness.requests(route: route)
            let schedule = RedDotClient.Polling(interval: .seconds(2), toleranceWindow: .seconds(5))
            let client = try await harness.client("cy", options: .init(transport: .polling(schedule)))
            let chat = Received()
            let observation = try client.observe("root.chat") { chat.append($0) }
            defer { observation.cancel() }
            let started = ContinuousClock.now
            client.start()
            try await Task.sleep(until: started + .seconds(30))
            let made = try await harness.requests(route: route) - before
            client.stop()
            // Starts at 0, 5, …, 25 s, and maybe one just at 30 s.
            #expect((6...7).contains(made), "\(made) requests in 30 s")
            #expect(try await harness.requests(route: route, status: "304") >= 5)
            // The first callback (hidden), the first answer (count 1); the 304s none.
            #expect(chat.all.map(\.count) == [0, 1])
            #expect(client.connectionState == .idle)
        }
    }

    @Test("offline: a client started with the server down shows the cached tree, then converges when it comes back")
    func offline() async throws {
        try await ClientServerHarness.with { harness in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-client-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: folder) }
            let options = RedDotClient.Options(cacheDirectory: folder)
            let first = try await harness.client("dee", options: options)
            #expect(first.cacheError == nil)
            first.start()
            try await harness.increment([("dee", "root.chat.c1", 4)])
            try await harness.waitForServer("dee") { $0.nodes["root.chat"]?.count == 4 }
            #expect(try await Self.converged(first, harness))
            first.stop()
            let cachedVersion = first.version
            #expect(first.cacheError == nil)
            #expect(FileManager.default.fileExists(atPath: try #require(first.cacheFile).path))

            #expect(try await harness.stopServer() == 0)
            let second = try await harness.client("dee", options: options)
            #expect(second.cacheError == nil)
            #expect(second.badge("root.chat").count == 4, "the cached tree shows before anything is sent")
            #expect(second.version == cachedVersion)
            second.start()
            defer { second.stop() }
            #expect(await eventually(seconds: 10) { if case .waiting = second.connectionState { true } else { false } })
            #expect(second.badge("root.chat").count == 4, "a server that cannot be reached hides nothing")

            try await harness.increment([("dee", "root.chat.c2", 1)])
            try await harness.startServer()
            try await harness.waitForServer("dee") { $0.nodes["root.chat"]?.count == 5 }
            #expect(try await Self.converged(second, harness, seconds: 90))
            #expect(second.badge("root.chat").count == 5)
        }
    }

    @Test("offline taps: a clear with the server down shows at once, survives an app restart, applies once when it is back; two accounts keep their own trees")
    func offlineTaps() async throws {
        try await ClientServerHarness.with { harness in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-taps-\(UUID().uuidString)", isDirectory: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let options = RedDotClient.Options(cacheDirectory: folder)
            try await harness.increment([("kim", "root.chat.c1", 3), ("kim", "root.feed.f1", 1), ("lee", "root.chat.c9", 5)])
            try await harness.waitForServer("kim") { $0.nodes["root"]?.count == 4 }
            try await harness.waitForServer("lee") { $0.nodes["root"]?.count == 5 }
            for name in ["kim", "lee"] {
                let client = try await harness.client(name, options: options)
                client.start()
                #expect(try await Self.converged(client, harness))
                client.stop()
            }
            #expect(try await harness.stopServer() == 0)

            // The server is down: the tap shows at once and is queued, not thrown.
            let kim = try await harness.client("kim", options: options)
            let lee = try await harness.client("lee", options: options)
            #expect(kim.badge("root.chat").count == 3 && lee.badge("root.chat").count == 5, "each account restores its own tree")
            #expect(kim.cacheFile != lee.cacheFile)
            kim.start()
            #expect(await eventually(seconds: 10) { if case .waiting = kim.connectionState { true } else { false } })
            let shown = try await kim.clear("root.chat", force: true)
            #expect(!shown.shown && !kim.badge("root.chat").shown && kim.badge("root").count == 1)
            #expect(kim.queuedActionCount == 1)
            kim.stop()

            // The app restarts, still offline: the tap is still there.
            let restarted = try await harness.client("kim", options: options)
            #expect(!restarted.badge("root.chat").shown && restarted.badge("root").count == 1 && restarted.queuedActionCount == 1)
            // Something arrives meanwhile, after the version the tap was made at: it must stay.
            try await harness.increment([("kim", "root.chat.c2", 1)])
            try await harness.startServer()
            try await harness.waitForServer("kim") { $0.nodes["root.chat.c2"]?.count == 1 }
            restarted.start()
            defer { restarted.stop() }
            #expect(await eventually(seconds: 30) { restarted.queuedActionCount == 0 })
            let server = try await harness.serverTree("kim")
            #expect(server.nodes["root.chat.c1"] == nil, "the tap cleared what was shown")
            #expect(server.nodes["root.chat"]?.count == 1 && server.nodes["root.chat.c2"]?.count == 1, "the arrival after it stays")
            #expect(try await Self.converged(restarted, harness, seconds: 30))
            #expect(restarted.badge("root.chat").count == 1 && restarted.badge("root").count == 2)
            #expect(try await harness.pipeline.count("SELECT count(*) FROM applied_action_generation WHERE user_id = 'kim'") == 1, "applied once")
        }
    }

    @Test("the race: shown at V, two arrivals, clear: the arrivals stay, here and on the server")
    func clearRace() async throws {
        try await ClientServerHarness.with { harness in
            try await harness.increment([("eve", "root.chat.c1", 3)])
            try await harness.waitForServer("eve") { $0.nodes["root.chat"]?.count == 3 }
            // Polling once a minute: the client shows version V and does not hear of the arrivals.
            let schedule = RedDotClient.Polling(interval: .seconds(60), toleranceWindow: .seconds(1))
            let client = try await harness.client("eve", options: .init(transport: .polling(schedule)))
            let chat = Received()
            let observation = try client.observe("root.chat") { chat.append($0) }
            defer { observation.cancel() }
            client.start()
            defer { client.stop() }
            #expect(await eventually(seconds: 10) { client.badge("root.chat").count == 3 })
            let shownAt = client.version

            try await harness.increment([("eve", "root.chat.c2", 1), ("eve", "root.chat.c3", 1)])
            try await harness.waitForServer("eve") { $0.nodes["root.chat"]?.count == 5 }
            #expect(client.version == shownAt, "the client has not heard of the arrivals")

            let answered = try await client.clear("root.chat", force: true)
            #expect(answered.count == 2, "the server kept the two arrivals")
            #expect(client.badge("root.chat").count == 2)
            #expect(client.badge("root.chat.c2").shown && client.badge("root.chat.c3").shown)
            #expect(!client.badge("root.chat.c1").shown, "what was shown is cleared")
            // The optimistic step hid what was shown at once: 3, then nothing, then the answer's 2.
            #expect(chat.all.map(\.count).prefix(3) == [0, 3, 0])
            #expect(chat.last?.count == 2)
            let server = try await harness.serverTree("eve")
            #expect(server.nodes["root.chat"]?.count == 2 && server.nodes["root"]?.count == 2)
            // The poll after the action brings the whole tree at the answer's version.
            #expect(try await Self.converged(client, harness, seconds: 10))
            #expect(client.badge("root").count == 2)
        }
    }
}

extension ClientCLITests {
    @Test("long-polling: a change reaches the callback at once, not at the next interval")
    func longPolling() async throws {
        try await ClientServerHarness.with { harness in
            try await harness.increment([("hux", "root.chat.c1", 1)])
            try await harness.waitForServer("hux") { $0.nodes["root.chat"]?.count == 1 }
            let schedule = RedDotClient.Polling(interval: .zero, toleranceWindow: .seconds(1), longPoll: .seconds(20))
            let client = try await harness.client("hux", options: .init(transport: .polling(schedule)))
            let chat = Received()
            let observation = try client.observe("root.chat") { chat.append($0) }
            defer { observation.cancel() }
            client.start()
            defer { client.stop() }
            #expect(await eventually(seconds: 10) { chat.last?.count == 1 })
            try await Task.sleep(for: .seconds(2))  // the next request now waits on the server
            let published = ContinuousClock.now
            try await harness.increment([("hux", "root.chat.c1", 2)])
            #expect(await eventually(seconds: 10) { chat.last?.count == 3 })
            let latency = ContinuousClock.now - published
            #expect(latency < .seconds(3), "publish to callback took \(latency) with a long-poll waiting")
            #expect(client.connectionState == .polling)
        }
    }

    @Test("a streaming client's clear and seen: shown at once, then the stream's versions include them")
    func streamActions() async throws {
        try await ClientServerHarness.with { harness in
            try await harness.increment([("gus", "root.chat.c1", 2), ("gus", "root.feed.f1", 1)])
            try await harness.waitForServer("gus") { $0.nodes["root"]?.count == 3 }
            let client = try await harness.client("gus")
            client.start()
            defer { client.stop() }
            #expect(try await Self.converged(client, harness))
            let cleared = try await client.clear("root.chat", force: true)
            #expect(!cleared.shown && !client.badge("root.chat").shown && client.badge("root").count == 1)
            let seen = try await client.seen("root")
            #expect(seen.unseen == 0 && seen.count == 1 && client.badge("root.feed.f1").unseen == 0)
            #expect(try await Self.converged(client, harness, seconds: 10))
            let server = try await harness.serverTree("gus")
            #expect(server.nodes["root"]?.count == 1 && server.nodes["root"]?.unseen == 0 && server.nodes["root.chat"] == nil)
        }
    }
}

extension Badge {
    /// Whether `other` shows the same (the version aside).
    func looksTheSame(_ other: Badge) -> Bool {
        shown == other.shown && count == other.count && unseen == other.unseen && text == other.text && icon == other.icon
    }
}

/// `reddot watch` in a real terminal (tmux).
@Suite("reddot watch", .serialized)
struct WatchCLITests {
    @Test("reddot watch draws the tree in tmux and shows a published event within 2 s of the server; Ctrl-C stops it with exit 0")
    func watchInTmux() async throws {
        let tmux = "/usr/bin/tmux"
        try #require(FileManager.default.isExecutableFile(atPath: tmux), "tmux is missing (deploy/test.sh installs it)")
        try await ClientServerHarness.with { harness in
            let token = try await harness.token("fay")
            let socket = "reddot-watch-\(UInt32.random(in: 0...UInt32.max))"
            let binary = try CLITests.binary.get().path
            let status = harness.pipeline.folder.appendingPathComponent("watch.status").path
            // The shell records watch's exit status, then the pane stays for the test to read.
            let command = "'\(binary)' watch --url \(harness.url.absoluteString) --token \(token) --user fay; echo \"exit $?\" > '\(status)'; sleep 60"
            let started = try await Self.spawn(tmux, ["-L", socket, "new-session", "-d", "-x", "100", "-y", "30", command])
            try #require(started == 0, "tmux new-session failed with \(started)")
            try await tearingDown({ _ = try? await Self.spawn(tmux, ["-L", socket, "kill-server"]) }) {
                func screen() async throws -> String {
                    try await ChildProcess.run(tmux, ["-L", socket, "capture-pane", "-p"]).output
                }
                let live = await eventually(seconds: 15) { (try? await screen())?.contains("· live ·") == true }
                let first = try await screen()
                #expect(live, "\(first)")
                #expect(first.contains("(no badges)"))

                try await harness.increment([("warm", "root.x", 1)])
                try await harness.waitForServer("warm") { $0.version > 0 }
                // The best of up to three publishes, as in `observe`: the whole suite shares two cores.
                var count = 0
                let latencies = try await ClientCLITests.latencies(within: .seconds(2)) {
                    count += 2
                    let (total, expected) = (Int64(count), "c7  \(count)")
                    return try await ClientCLITests.serverToClient(
                        harness, user: "fay", publish: { try await harness.increment([("fay", "root.chat.c7", 2)]) },
                        shown: { $0.nodes["root.chat.c7"]?.count == total },
                        seen: { (try? await screen())?.contains(expected) == true })
                }
                #expect(latencies.contains { $0 < .seconds(2) }, "server to screen took \(latencies)")
                let drawn = try await screen()
                #expect(
                    drawn.contains("● root  \(count)") && drawn.contains("  ● chat  \(count)") && drawn.contains("    ● c7  \(count)"),
                    "\(drawn)")
                // A mute shows on its node's line.
                let app = try await harness.client("fay")
                _ = try await app.mute("root.chat.c7")
                let muted = await eventually(seconds: 10) {
                    (try? await screen())?.split(separator: "\n").contains { $0.contains("● c7") && $0.hasSuffix("muted") } == true
                }
                let afterMute = (try? await screen()) ?? ""
                #expect(muted, "\(afterMute)")

                _ = try await ChildProcess.run(tmux, ["-L", socket, "send-keys", "-t", "0", "C-c"])
                #expect(await eventually(seconds: 10) { (try? String(contentsOfFile: status, encoding: .utf8)) == "exit 0\n" })
                _ = try await Self.spawn(tmux, ["-L", socket, "kill-server"])
            }
        }
    }

    /// Runs `executable` to its end with its standard streams on /dev/null and no signal blocked;
    /// returns its exit status. Not `Process`: the tmux client waits for a signal from the server
    /// it starts (a child inherits this process's blocked signals), and `Process` did not see that
    /// client exit.
    static func spawn(_ executable: String, _ arguments: [String]) async throws -> Int32 {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else { throw TestSetupError("cannot start \(executable): error \(result)") }
        let child = pid
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var status: Int32 = 0
                while waitpid(child, &status, 0) == -1 && errno == EINTR {}
                continuation.resume(returning: (status >> 8) & 0xff)
            }
        }
    }

    @Test("reddot watch refuses a bad token with exit 77 and a sentence, and bad arguments with 64")
    func watchRefusals() async throws {
        try await ClientServerHarness.with { harness in
            let refused = try await CLITests().reddot(["watch", "--url", harness.url.absoluteString, "--token", "not-a-jwt", "--user", "fay"])
            #expect(refused.exitCode == 77, "\(refused)")
            #expect(refused.stderr.contains("401"), "\(refused.stderr)")
        }
        let cli = CLITests()
        for arguments in [
            ["watch", "--user", "fay", "--poll-seconds", "nan"], ["watch", "--user", "fay", "--url", "ftp://x"],
            ["watch", "--user", "fay", "--path", "chat"], ["watch", "--user", ""],
            // Ports Foundation would wrap (99999 is 34463) or read as none (port 80).
            ["watch", "--user", "fay", "--url", "http://127.0.0.1:99999"],
            ["watch", "--user", "fay", "--url", "http://127.0.0.1:9223372036854775808"],
            ["watch", "--user", "fay", "--url", "http://[::1]:0/"],
        ] {
            let answer = try await cli.reddot(arguments)
            #expect(answer.exitCode == 64, "\(arguments): \(answer)")
            #expect(!answer.stderr.isEmpty)
        }
    }
}
