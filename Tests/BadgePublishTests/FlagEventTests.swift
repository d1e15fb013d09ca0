import BadgeCore
import BadgePublish
import Foundation
import Testing

@Suite("reddot publish's flags, lines and summary (no Kafka)")
struct FlagEventTests {
    @Test("which flags go together, in the sentences the command prints")
    func problems() {
        var event = FlagEvent()
        #expect(event.problem == "give --op (a badge operation) or --type (a content event) for one event, or --stdin for JSON lines")
        event.operation = .incr
        event.type = "chat.message"
        #expect(event.problem == "--op and --type exclude each other")
        event.type = nil
        #expect(event.problem == "give --user U (repeatable) or --all")
        event.users = ["u1"]
        #expect(event.problem == "--op incr needs --path")
        event.path = "root.chat"
        event.count = 3
        #expect(event.problem == "--count goes with --op set")
        event.count = nil
        #expect(event.problem == nil)
        event.everyone = true
        #expect(event.problem == "--user and --all exclude each other")

        var content = FlagEvent()
        content.type = "chat.message"
        content.users = ["u1"]
        content.force = true
        #expect(content.problem == "--force goes with --op, not --type")
        content.force = false
        content.attributes = ["=x"]
        #expect(content.problem == "--attr '=x' is not key=value")
        #expect(content.givenFlags == ["--user", "--type", "--attr"])
    }

    @Test("the JSON of a flag event is what the decoder accepts, with the fields given")
    func json() throws {
        var event = FlagEvent()
        event.id = "e1"
        event.users = ["u1", "u2"]
        event.type = "chat.message"
        event.attributes = ["conversation=c7", "lang=a=b"]
        let bytes = Array(try event.json())
        #expect(String(decoding: bytes, as: UTF8.self)
            == #"{"attrs":{"conversation":"c7","lang":"a=b"},"id":"e1","type":"chat.message","users":["u1","u2"]}"#)
        guard case .success(let decoded) = EventIntake(rules: nil).check(bytes) else {
            Issue.record("the decoder refused the flag event")
            return
        }
        #expect(decoded.id.rawValue == "e1")
        #expect(decoded.recordKey == "u1")
    }

    @Test("lines are read whole from a file descriptor, trimmed, a BOM dropped, invalid ones reported with their number")
    func lines() throws {
        let text = "\u{FEFF}{\"id\":\"a\",\"op\":\"incr\",\"user\":\"u\",\"path\":\"root.x\"}  \r\n\n  not json\n{\"id\":\"b\",\"op\":\"clear\",\"user\":\"u\",\"path\":\"root.x\"}"
        // A file, not a pipe: a program a parallel test starts could keep a pipe's writing end,
        // and the read below would wait for that program's end.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-lines-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(text.utf8).write(to: file)
        let reading = try FileHandle(forReadingFrom: file)
        var refused: [Int] = []
        let lines = CheckedLines(reader: LineReader(fileDescriptor: reading.fileDescriptor), checker: EventIntake(rules: nil)) {
            line, _ in refused.append(line)
        }
        var items: [PublishItem] = []
        while let item = lines.next() { items.append(item) }
        try lines.throwIfFailed()
        #expect(items.map(\.event.id.rawValue) == ["a", "b"])
        #expect(items.map(\.line) == [1, 4])
        #expect(items.first?.label == "line 1: ")
        #expect(refused == [3])
        #expect(lines.total == 3 && lines.invalid == 1)
    }

    @Test("plural words of the summary")
    func words() {
        #expect(PublishSummary.events(1) == "event is")
        #expect(PublishSummary.events(2) == "events are")
        #expect(PublishSummary.events(1, verb: false) == "event")
        #expect(PublishSummary.events(0, verb: false) == "events")
    }
}
