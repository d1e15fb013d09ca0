import BadgeCore
import TestSupport
import Testing

/// How a stream's view takes in the user's logged versions (``UserView/applying(_:broadcasts:)``).
@Suite("A view follows the change log")
struct UserViewFollowTests {
    let news = BroadcastBadge(id: 7, path: path("root.promo.news"), count: 2)

    func view(at subtree: String = "root", depth: Int? = nil) -> UserView {
        UserView(
            path: path(subtree), depth: depth, userVersion: 4, broadcastVersion: 2,
            aggregates: [path(subtree): BadgeAggregate(count: 1)], broadcasts: [:], dismissed: [])
    }

    func change(_ version: Int64, under broadcastVersion: Int64 = 2, _ nodes: [(String, Int64?)], dismissed: [Int64] = []) -> OwnLayerChange {
        OwnLayerChange(
            version: version, broadcastVersion: broadcastVersion,
            nodes: nodes.map { OwnLayerChange.Node(path: path($0.0), before: nil, after: $0.1.map { BadgeAggregate(count: $0, unseen: $0) }) },
            dismissed: dismissed)
    }

    @Test("the next version applies its nodes within the subtree and depth, and its dismissals")
    func applies() throws {
        let next = try #require(
            view(at: "root.chat", depth: 1).applying(
                change(5, [("root", 9), ("root.chat", 3), ("root.chat.c1", 3), ("root.chat.c1.m", 3), ("root.promo", 1), ("root.chatter", 1)],
                    dismissed: [7]),
                broadcasts: nil))
        #expect(next.userVersion == 5)
        #expect(next.broadcastVersion == 2)
        #expect(next.aggregates.keys.map(\.rawValue).sorted() == ["root.chat", "root.chat.c1"])
        #expect(next.aggregates[path("root.chat")] == BadgeAggregate(count: 3, unseen: 3))
        #expect(next.dismissed == [7])
        // A node gone from the tree goes from the view.
        let gone = try #require(next.applying(change(6, [("root.chat.c1", nil)]), broadcasts: nil))
        #expect(gone.aggregates[path("root.chat.c1")] == nil)
    }

    @Test("a version that is not the next one, or made under a broadcast version the view cannot take, gives nil")
    func refuses() {
        let base = view()
        #expect(base.applying(change(6, [("root", 2)]), broadcasts: nil) == nil)
        #expect(base.applying(change(4, [("root", 2)]), broadcasts: nil) == nil)
        // Made under an older broadcast version than the view's.
        #expect(base.applying(change(5, under: 1, [("root", 2)]), broadcasts: nil) == nil)
        // Made under a newer one: only with that set at hand.
        #expect(base.applying(change(5, under: 3, [("root", 2)]), broadcasts: nil) == nil)
        #expect(base.applying(change(5, under: 3, [("root", 2)]), broadcasts: BroadcastSet(version: 4, active: [:])) == nil)
        var last = base
        last.userVersion = .max
        #expect(last.applying(change(.max, [("root", 2)]), broadcasts: nil) == nil)
    }

    @Test("a version made under a newer broadcast version moves the view to that set")
    func rebases() throws {
        let set = BroadcastSet(version: 3, active: [news.id: news])
        let next = try #require(view().applying(change(5, under: 3, [("root", 2)]), broadcasts: set))
        #expect(next.broadcastVersion == 3)
        #expect(next.version == 8)
        #expect(next.broadcasts == [news.id: news])
        #expect(next.visibleAggregates[path("root.promo.news")]?.count == 2)
        let dismissed = try #require(next.applying(change(6, under: 3, [], dismissed: [news.id]), broadcasts: set))
        #expect(dismissed.visibleAggregates[path("root.promo.news")] == nil)
    }

    @Test("the logged dismissals are read strictly")
    func dismissedLog() throws {
        #expect(try OwnLayerChange.decodeBroadcastLog("[]") == [])
        #expect(try OwnLayerChange.decodeBroadcastLog("[3, 7]") == [3, 7])
        for bad in ["", "{}", "[\"3\"]", "[1.5]", "[null]", "[1,", "3", "[[1]]", "[99999999999999999999]"] {
            #expect(throws: ChangeLogFormatError.self, "\(bad)") { try OwnLayerChange.decodeBroadcastLog(bad) }
        }
    }
}
