import Foundation
import Testing

@testable import RedDotClient

/// The local step of a clear or seen (shown at once, before the server answers): it takes away
/// what showed when the app acted, and nothing that arrived after.
@Suite("A clear or seen shown before the server answers")
struct PendingActionTests {
    static func tree(_ nodes: [(String, Int64, Int64)], version: Int64 = 7) -> [String: Badge] {
        Dictionary(
            uniqueKeysWithValues: nodes.map { path, count, unseen in
                (path, Badge(path: path, shown: true, count: count, unseen: unseen, text: count > 0 ? String(count) : nil, icon: nil, version: version))
            })
    }

    static let shown = tree([("root", 6, 2), ("root.chat", 5, 2), ("root.chat.c1", 3, 2), ("root.chat.c2", 2, 0), ("root.feed", 1, 0)])

    @Test("a forced clear hides the subtree and takes its count from the ancestors; an arrival after it stays")
    func forcedClear() {
        let action = PendingAction(id: 1, kind: .clear(force: true), path: "root.chat", shown: Self.shown, version: 7)
        let now = action.apply(to: Self.shown)
        #expect(now["root.chat"] == nil && now["root.chat.c1"] == nil && now["root.chat.c2"] == nil)
        #expect(now["root"]?.count == 1 && now["root"]?.unseen == 0 && now["root"]?.text == "1")
        // The tree moved on before the answer: c3 arrived (1).
        let newer = Self.tree(
            [("root", 7, 3), ("root.chat", 6, 3), ("root.chat.c1", 3, 2), ("root.chat.c2", 2, 0), ("root.chat.c3", 1, 1), ("root.feed", 1, 0)],
            version: 8)
        let later = action.apply(to: newer)
        #expect(later["root.chat.c3"]?.count == 1, "the arrival stays")
        #expect(later["root.chat"]?.count == 1 && later["root.chat"]?.unseen == 1)
        #expect(later["root"]?.count == 2)
        #expect(later["root.chat.c1"] == nil)
    }

    @Test("a plain clear takes the node's own part only; a parent with shown children stays")
    func plainClear() {
        let withOwn = Self.tree([("root", 4, 0), ("root.chat", 4, 0), ("root.chat.c1", 3, 0)])
        let parent = PendingAction(id: 1, kind: .clear(force: false), path: "root.chat", shown: withOwn, version: 7).apply(to: withOwn)
        #expect(parent["root.chat"]?.count == 3 && parent["root.chat.c1"]?.count == 3 && parent["root"]?.count == 3)
        let leaf = PendingAction(id: 2, kind: .clear(force: false), path: "root.chat.c1", shown: Self.shown, version: 7).apply(to: Self.shown)
        #expect(leaf["root.chat.c1"] == nil)
        #expect(leaf["root.chat"]?.count == 2 && leaf["root"]?.count == 3)
    }

    @Test("an ancestor left with nothing hides; seen hides nothing and keeps the counts")
    func ancestorsAndSeen() {
        let onlyChat = Self.tree([("root", 3, 1), ("root.chat", 3, 1), ("root.chat.c1", 3, 1)])
        let cleared = PendingAction(id: 1, kind: .clear(force: true), path: "root.chat", shown: onlyChat, version: 7).apply(to: onlyChat)
        #expect(cleared.isEmpty)
        let seen = PendingAction(id: 2, kind: .seen, path: "root.chat", shown: Self.shown, version: 7).apply(to: Self.shown)
        #expect(seen.count == Self.shown.count)
        #expect(seen["root.chat.c1"]?.count == 3 && seen["root.chat.c1"]?.unseen == 0)
        #expect(seen["root"]?.count == 6 && seen["root"]?.unseen == 0)
    }

    @Test("an ancestor with an icon of its own stays (a \"new\" dot); a node that does not show takes nothing from its ancestors")
    func ownIconsStay() {
        var withNew = Self.tree([("root", 0, 0), ("root.settings", 0, 0), ("root.settings.dark_mode", 0, 0)])
        withNew["root.settings"]?.icon = "new"
        // Clearing the only dot under it leaves root.settings showing its own "new".
        let cleared = PendingAction(id: 1, kind: .clear(force: true), path: "root.settings.dark_mode", shown: withNew, version: 7)
            .apply(to: withNew)
        #expect(cleared["root.settings.dark_mode"] == nil)
        #expect(cleared["root.settings"]?.icon == "new" && cleared["root"]?.shown == true)
        // Clearing a child that does not show changes nothing.
        let onlyNew = withNew.filter { $0.key != "root.settings.dark_mode" }
        for kind in [PendingAction.Kind.clear(force: true), .clear(force: false), .mute(until: nil)] {
            let after = PendingAction(id: 2, kind: kind, path: "root.settings.dark_mode", shown: onlyNew, version: 7).apply(to: onlyNew)
            #expect(after == onlyNew, "\(kind)")
        }
        // The icon's own node, cleared by force, goes.
        let own = PendingAction(id: 3, kind: .clear(force: true), path: "root.settings", shown: withNew, version: 7).apply(to: withNew)
        #expect(own.isEmpty)
    }

    @Test("the server's cap stays in the text while the count is above it")
    func cappedText() {
        #expect(PendingAction.text(150, was: "99+") == "99+")
        #expect(PendingAction.text(42, was: "99+") == "42")
        #expect(PendingAction.text(0, was: "99+") == nil)
        #expect(PendingAction.text(5, was: nil) == "5")
    }
}

/// Numbers from a broken server, and durations no one meant: nothing traps.
@Suite("RedDotClient with extreme numbers")
struct ExtremeNumberTests {
    @Test("counts at the ends of Int64 make no clear or seen trap")
    func extremeCounts() {
        let shown = PendingActionTests.tree([
            ("root", .min, .max), ("root.chat", .max, .min), ("root.chat.c1", .max, .max), ("root.chat.c2", .max, .min),
        ])
        for kind in [PendingAction.Kind.clear(force: true), .clear(force: false), .seen] {
            for path in ["root", "root.chat", "root.chat.c1"] {
                let action = PendingAction(id: 1, kind: kind, path: path, shown: shown, version: 7)
                let result = action.apply(to: shown)
                // What the action touched ends at 0 or more; the rest is as the server sent it.
                #expect(action.losses.keys.allSatisfy { node in result[node].map { $0.count >= 0 && $0.unseen >= 0 } ?? true })
            }
        }
        #expect(PendingAction.less(.min, .max) == 0 && PendingAction.less(.max, .min) == .max && PendingAction.plus(.max, 1) == .max)
    }

    @Test("durations beyond a day are brought to a day, negative ones to 0, a zero heartbeat timeout to 100 ms")
    func extremeDurations() {
        let huge = Duration.seconds(Int64.max)
        let options = RedDotClient.Options(
            transport: .polling(.init(initialDelay: huge, interval: .seconds(-5), toleranceWindow: huge, longPoll: huge)),
            heartbeatTimeout: .zero, reconnectDelay: huge, maximumReconnectDelay: huge, requestTimeout: huge)
        let client = RedDotClient(server: URL(string: "http://127.0.0.1:1")!, user: "ann", options: options)
        let day = Duration.seconds(86_400)
        #expect(client.options.heartbeatTimeout == .milliseconds(100))
        #expect(client.options.reconnectDelay == day && client.options.maximumReconnectDelay == day && client.options.requestTimeout == day)
        #expect(client.options.transport == .polling(.init(initialDelay: day, interval: .zero, toleranceWindow: day, longPoll: day)))
        #expect(RedDotClient.milliseconds(day) == 86_400_000)
    }
}
