import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Mute and snooze in the model, the batch and the grammar")
struct MuteModelTests {
    func path(_ text: String) throws -> BadgePath { try BadgePath(validating: text) }

    let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// 40 + 1 unseen messages in two chats, 2 in the inbox.
    func chats() throws -> BadgeTree {
        var tree = BadgeTree()
        let early = now.addingTimeInterval(-600)
        tree.apply(.increment(by: 40), at: try path("root.chat.c1"), occurredAt: early, now: now)
        tree.apply(.increment(by: 1), at: try path("root.chat.c2"), occurredAt: early, now: now)
        tree.apply(.increment(by: 2), at: try path("root.inbox"), occurredAt: early, now: now)
        return tree
    }

    @Test("a muted chat keeps its count and unseen, and gives its parent and the root nothing, not even a dot")
    func mutedChatAtEveryAncestor() throws {
        var tree = try chats()
        tree.apply(.mute(until: nil), at: try path("root.chat.c1"), occurredAt: now.addingTimeInterval(-60), now: now)
        let aggregates = tree.aggregates(now: now)
        #expect(aggregates[try path("root.chat.c1")] == BadgeAggregate(count: 40, unseen: 40))
        #expect(aggregates[try path("root.chat")] == BadgeAggregate(count: 1, unseen: 1))
        #expect(aggregates[try path("root")] == BadgeAggregate(count: 3, unseen: 3))

        // The other chat read: root.chat has nothing left to show, whatever c1 holds.
        tree.apply(.clear(force: false), at: try path("root.chat.c2"), occurredAt: now.addingTimeInterval(-30), now: now)
        let after = tree.aggregates(now: now)
        #expect(after[try path("root.chat")] == nil)
        #expect(after[try path("root.chat.c1")]?.count == 40)
        #expect(after[try path("root")] == BadgeAggregate(count: 2, unseen: 2))
        // The muted chat hangs under an unlit root.chat: no dot, no number, but the tree stays a tree.
        let node = try #require(tree.node(at: .root, now: now))
        #expect(node.children.map(\.path.rawValue) == ["root.chat", "root.inbox"])
        let unlit = try #require(node.children.first)
        #expect(!unlit.shown && unlit.count == 0 && unlit.unseen == 0 && unlit.text == nil)
        #expect(unlit.children.map(\.path.rawValue) == ["root.chat.c1"] && unlit.children.first?.shown == true)
        #expect(tree.node(at: try path("root.chat"), now: now)?.shown == false)
        #expect(tree.node(at: try path("root.chat.c1"), now: now)?.count == 40, "the app reads the muted chat itself")
    }

    @Test("a mute of a parent: its subtree counts in place and nothing reaches the root; modes apply inside it")
    func mutedParent() throws {
        var tree = try chats()
        tree.apply(.mute(until: nil), at: try path("root.chat"), occurredAt: now, now: now)
        let modes = AggregationModes(entries: [try AggregationModes.entry(pattern: "root.chat", mode: .children)])
        let aggregates = tree.aggregates(now: now, modes: modes)
        #expect(aggregates[try path("root.chat")] == BadgeAggregate(count: 2, unseen: 2))
        #expect(aggregates[try path("root")] == BadgeAggregate(count: 2, unseen: 2))
    }

    @Test("unmute brings it back; the latest time holds whatever the arrival order; at one time an unmute wins")
    func orderFree() throws {
        let chat = try path("root.chat.c1")
        let t1 = now.addingTimeInterval(-300), t2 = now.addingTimeInterval(-200)
        let operations: [(BadgeOperation, Date)] = [(.mute(until: nil), t1), (.unmute, t2), (.mute(until: nil), t2)]
        var results: Set<[BadgePath: BadgeAggregate]> = []
        for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2], [2, 0, 1]] {
            var tree = try chats()
            for index in order { tree.apply(operations[index].0, at: chat, occurredAt: operations[index].1, now: now) }
            results.insert(tree.aggregates(now: now))
        }
        #expect(results.count == 1)
        #expect(results.first?[try path("root")]?.count == 43, "the unmute at t2 holds over the mute at t2")

        var late = try chats()
        late.apply(.unmute, at: chat, occurredAt: t1, now: now)
        late.apply(.mute(until: nil), at: chat, occurredAt: t2, now: now)
        #expect(late.aggregates(now: now)[try path("root")]?.count == 3)
    }

    @Test("a snooze ends on its own time: then the chat counts again, and what arrived meanwhile is unseen")
    func snoozeEnds() throws {
        var tree = try chats()
        let chat = try path("root.chat.c1")
        let end = now.addingTimeInterval(3_600)
        tree.apply(.seen, at: .root, occurredAt: now.addingTimeInterval(-120), now: now)
        tree.apply(.mute(until: end), at: chat, occurredAt: now.addingTimeInterval(-100), now: now)
        tree.apply(.increment(by: 5), at: chat, occurredAt: now.addingTimeInterval(-50), now: now)
        #expect(tree.aggregates(now: now)[try path("root")] == BadgeAggregate(count: 3, unseen: 0))
        #expect(tree.mutedPaths(at: now) == [chat])
        let woken = tree.aggregates(now: end)
        #expect(woken[try path("root")] == BadgeAggregate(count: 48, unseen: 5))
        #expect(tree.mutedPaths(at: end).isEmpty)
        // Of two mutes at one time, the longer holds: none is longest.
        tree.apply(.mute(until: nil), at: chat, occurredAt: now.addingTimeInterval(-100), now: now)
        #expect(tree.mutedPaths(at: end) == [chat])
    }

    @Test("a batch keeps what applying one by one keeps, in any order of its mutes")
    func batchEqualsSequence() throws {
        let user = try UserID(validating: "mute_u")
        var generator = RandomMutes(seed: 5)
        for _ in 0..<200 {
            let mutations = (0..<generator.integer(1...12)).map { _ in generator.next(user: user, now: now) }
            var sequential = try chats()
            for mutation in mutations { sequential.apply(mutation, now: now) }
            var batch = BadgeBatch(now: now)
            batch.append(contentsOf: mutations.shuffled(using: &generator.random))
            var batched = try chats()
            batched.apply(batch, for: user, now: now)
            #expect(batched.mutes == sequential.mutes)
            #expect(batched.aggregates(now: now) == sequential.aggregates(now: now))
        }
    }

    @Test("the grammar: until for mute only, an RFC 3339 time; root refused; broadcasts refused; events round-trip")
    func grammar() throws {
        #expect(try BadgeOperation.named("mute", OperationFields()) == .mute(until: nil))
        #expect(try BadgeOperation.named("unmute", OperationFields()) == .unmute)
        let until = try #require(Date(rfc3339: "2026-12-01T08:00:00Z"))
        #expect(try BadgeOperation.named("mute", OperationFields(until: "2026-12-01T08:00:00Z")) == .mute(until: until))
        #expect(throws: OperationFieldsError.self) { try BadgeOperation.named("mute", OperationFields(until: "tomorrow")) }
        #expect(throws: OperationFieldsError.self) { try BadgeOperation.named("unmute", OperationFields(until: "2026-12-01T08:00:00Z")) }
        #expect(throws: OperationFieldsError.self) { try BadgeOperation.named("clear", OperationFields(until: "2026-12-01T08:00:00Z")) }
        #expect(BadgeOperation.mute(until: nil).pathProblem(.root) != nil)
        #expect(BadgeOperation.mute(until: nil).pathProblem(try path("root.chat")) == nil)
        #expect(Audience.broadcastProblem(.unmute) != nil)

        let decoder = EventDecoder()
        let event = try decoder.decode(
            Array(#"{"id":"m1","op":"mute","user":"u1","path":"root.chat.c1","until":"2026-12-01T08:00:00Z"}"#.utf8)
        ).get()
        #expect(event.body == .operation(path: try path("root.chat.c1"), operation: .mute(until: until)))
        #expect(try decoder.decode(EventEncoder().encode(event)).get() == event)
        for (bad, reason) in [
            (#"{"id":"m2","op":"mute","user":"u1","path":"root"}"#, RejectionReason.invalidPath),
            (#"{"id":"m3","op":"mute","user":"u1","path":"root.a","until":"soon"}"#, .invalidField),
            (#"{"id":"m4","op":"unmute","user":"u1","path":"root.a","until":"2026-12-01T08:00:00Z"}"#, .invalidField),
            (#"{"id":"m5","op":"mute","audience":"all","path":"root.a"}"#, .invalidField),
        ] {
            guard case .failure(let rejection) = decoder.decode(Array(bad.utf8)) else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(rejection.reason == reason, "\(bad): \(rejection.message)")
        }
    }
}

/// A small generator of mutes, unmutes, snoozes and increments over a few chats, each at a time
/// of its own within the last minutes.
struct RandomMutes {
    var random: SeededRandom

    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    mutating func integer(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    mutating func next(user: UserID, now: Date) -> BadgeMutation {
        let chat = ["root.chat", "root.chat.c1", "root.chat.c2", "root.inbox"].randomElement(using: &random) ?? "root.chat"
        let time = now.addingTimeInterval(-Double(Int.random(in: 1...20, using: &random)))
        let operation: BadgeOperation
        switch Int.random(in: 0..<5, using: &random) {
        case 0: operation = .unmute
        case 1: operation = .mute(until: now.addingTimeInterval(Double(Int.random(in: -5...5, using: &random))))
        case 2: operation = .increment(by: 1)
        default: operation = .mute(until: nil)
        }
        return BadgeMutation(user: user, path: (try? BadgePath(validating: chat)) ?? .root, operation: operation, occurredAt: time)
    }
}
