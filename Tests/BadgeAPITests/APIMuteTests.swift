import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LibPQ
import TestSupport
import Testing

@Suite("POST …/badges/mute and …/unmute", .serialized)
struct APIMuteTests {
    @Test("bad requests are 400 with a sentence; another user's tree answers as missing")
    func validation() async throws {
        try await MemoryHarness.with { harness in
            let alice = try await harness.token("alice")
            try await harness.apply([BadgeMutation(user: user("alice"), path: path("root.chat.c1"), operation: .increment(by: 2))])
            for (route, body, code) in [
                ("mute", #"{"path": "root"}"#, "invalid_path"),
                ("unmute", #"{"path": "root"}"#, "invalid_path"),
                ("mute", #"{"path": "root..a"}"#, "invalid_path"),
                ("mute", #"{"path": "root.chat", "until": "tomorrow"}"#, "invalid_body"),
                ("mute", #"{"path": "root.chat", "until": 5}"#, "invalid_body"),
                ("unmute", #"{"path": "root.chat", "until": "2026-12-01T08:00:00Z"}"#, "invalid_body"),
                ("mute", #"{"path": "root.chat", "force": true}"#, "invalid_body"),
                ("mute", #"{"path": "root.chat", "seen_version": 3}"#, "invalid_body"),
                ("clear", #"{"path": "root.chat", "until": "2026-12-01T08:00:00Z"}"#, "invalid_body"),
                ("mute", #"["root.chat"]"#, "invalid_body"),
            ] {
                let response = try await harness.call(.post, "/v1/users/alice/badges/\(route)", token: alice, body: body)
                #expect(response.status == .badRequest, "\(route) \(body): \(response.text)")
                #expect(response.errorCode == code, "\(route) \(body): \(response.text)")
            }
            // The sentence names what is wrong: the whole body, or a number out of range (valid JSON).
            let array = try await harness.call(.post, "/v1/users/alice/badges/clear", token: alice, body: "[]")
            #expect(array.text.contains("the body (a JSON object) has the wrong type"), "\(array.text)")
            let huge = try await harness.call(
                .post, "/v1/users/alice/badges/clear", token: alice, body: #"{"path":"root.chat","seen_version":9223372036854775808}"#)
            #expect(huge.errorCode == "invalid_body" && huge.text.contains("out of its field's range"), "\(huge.text)")
            var ifMatch = HTTPFields()
            ifMatch[.ifMatch] = "\"1\""
            let withIfMatch = try await harness.call(
                .post, "/v1/users/alice/badges/mute", token: alice, headers: ifMatch, body: #"{"path": "root.chat"}"#)
            #expect(withIfMatch.status == .badRequest && withIfMatch.errorCode == "invalid_if_match")
            let other = try await harness.call(.post, "/v1/users/bob/badges/mute", token: alice, body: #"{"path": "root.chat"}"#)
            #expect(other.status == .notFound)
            #expect(try await harness.get("/v1/users/alice/badges", token: alice).tree().tree?.count == 2, "nothing was muted")
        }
    }

    @Test("through HTTP on PostgreSQL: a muted chat leaves the tab and the app icon, stays in place, is listed; a snooze lists its end; unmute")
    func muteFlow() async throws {
        try await APIHarness.with { harness in
            let dana = try await harness.token("dana")
            try await harness.apply([
                BadgeMutation(user: user("dana"), path: path("root.chat.c1"), operation: .increment(by: 40)),
                BadgeMutation(user: user("dana"), path: path("root.chat.c2"), operation: .increment(by: 1)),
            ])
            let before = try await harness.get("/v1/users/dana/badges", token: dana).tree()
            #expect(before.tree?.count == 41 && before.mutes.isEmpty)

            let muted = try await harness.call(.post, "/v1/users/dana/badges/mute", token: dana, body: #"{"path": "root.chat.c1"}"#)
            #expect(muted.status == .ok, "\(muted.text)")
            #expect(muted.text.contains(#""mutes":[{"path":"root.chat.c1","until":null}]"#), "\(muted.text)")
            let answer = try muted.tree()
            #expect(answer.tree?.count == 40 && answer.tree?.path.rawValue == "root.chat.c1", "the muted subtree keeps its count")
            let tree = try await harness.get("/v1/users/dana/badges", token: dana).tree()
            #expect(tree.version > before.version)
            #expect(tree.tree?.count == 1 && tree.tree?.unseen == 1)
            let chat = try #require(tree.tree?.children.first)
            #expect(chat.count == 1 && chat.children.map(\.count) == [40, 1])

            // The other chat read: root.chat is unlit, the muted chat still in place below it.
            _ = try await harness.call(.post, "/v1/users/dana/badges/clear", token: dana, body: #"{"path": "root.chat.c2"}"#)
            let unlit = try await harness.get("/v1/users/dana/badges", token: dana).tree()
            #expect(unlit.tree?.shown == false && unlit.tree?.count == 0)
            #expect(unlit.tree?.children.first?.shown == false && unlit.tree?.children.first?.children.first?.count == 40)

            // A snooze instead: the answer lists its end.
            let snoozed = try await harness.call(
                .post, "/v1/users/dana/badges/mute", token: dana, body: #"{"path": "root.chat.c1", "until": "2099-01-01T08:00:00Z"}"#)
            #expect(snoozed.text.contains(#""mutes":[{"path":"root.chat.c1","until":"2099-01-01T08:00:00Z"}]"#), "\(snoozed.text)")
            // Unmute: the chat lights its parent and the root again; unmuting again is no new version.
            let unmuted = try await harness.call(.post, "/v1/users/dana/badges/unmute", token: dana, body: #"{"path": "root.chat.c1"}"#)
            #expect(unmuted.status == .ok)
            let after = try await harness.get("/v1/users/dana/badges", token: dana).tree()
            #expect(after.tree?.count == 40 && after.tree?.shown == true && after.mutes.isEmpty)
            _ = try await harness.call(.post, "/v1/users/dana/badges/unmute", token: dana, body: #"{"path": "root.chat.c1"}"#)
            #expect(try await harness.get("/v1/users/dana/badges", token: dana).tree().version == after.version)

            // Any year RFC 3339 has: a snooze that ended before 1970 has ended (the chat counts);
            // one past 9999 (after its offset) lasts to the last second of 9999.
            let ended = try await harness.call(
                .post, "/v1/users/dana/badges/mute", token: dana, body: #"{"path": "root.chat.c1", "until": "0001-01-01T00:00:00Z"}"#)
            #expect(ended.status == .ok, "\(ended.text)")
            let counting = try await harness.get("/v1/users/dana/badges", token: dana).tree()
            #expect(counting.tree?.count == 40 && counting.tree?.shown == true, "an ended snooze hides nothing")
            let lasting = try await harness.call(
                .post, "/v1/users/dana/badges/mute", token: dana, body: #"{"path": "root.chat.c1", "until": "9999-12-31T23:59:59-01:00"}"#)
            #expect(lasting.text.contains(#""until":"9999-12-31T23:59:59Z""#), "\(lasting.text)")
            #expect(try await harness.get("/v1/users/dana/badges", token: dana).tree().tree?.count == 0)
            #expect(try await BadgeVerifier(store: harness.store).run(repair: false).mismatches == 0)
        }
    }
}
