import BadgeCore
import BadgeIngest
import TestSupport
import Testing

@Suite("Preparing a batch: decode, validate, map, in record order")
struct PreparedBatchTests {
    @Test("every rejection reason lands in rejected, with its reason and the record unchanged")
    func everyReason() {
        let poisons = poisonRecords()
        let batch = PreparedBatch(records: poisons.map(\.record), rules: testRules)
        #expect(batch.accepted.isEmpty)
        #expect(batch.rejected.map(\.rejection.reason) == poisons.map(\.reason))
        #expect(batch.rejected.map(\.record) == poisons.map(\.record))
        #expect(Set(poisons.map(\.reason)) == Set(RejectionReason.allCases))
        let noValue = batch.rejected.first { $0.record.payload == nil }
        #expect(noValue?.rejection.message == "record has no value")
        for rejected in batch.rejected {
            #expect(!rejected.rejection.message.isEmpty)
        }
    }

    @Test("users are spread while they have at most two events each on average; broadcasts and rejections do not count")
    func spreadUsers() {
        func batch(_ users: [String], from offset: Int64 = 0) -> PreparedBatch {
            let records = users.enumerated().map { index, user in
                record(#"{"id":"s\#(offset)-\#(index)","op":"incr","user":"\#(user)","path":"root.x"}"#, offset: offset + Int64(index))
            }
            return PreparedBatch(records: records, rules: testRules)
        }
        #expect(PreparedBatch.usersAreSpread([]))
        #expect(PreparedBatch.usersAreSpread([batch(["a", "b", "c", "d"])]))
        // Two events each: still spread; a third for one of them is not.
        #expect(PreparedBatch.usersAreSpread([batch(["a", "a", "b", "b"])]))
        #expect(!PreparedBatch.usersAreSpread([batch(["a", "a", "a", "b", "b"])]))
        // Counted over every writer's batch together.
        #expect(!PreparedBatch.usersAreSpread([batch(["a", "b"]), batch(["a", "b", "a", "b"], from: 2)]))
        // One event naming several users counts once for each; a broadcast and a bad record not at all.
        let many = record(#"{"id":"m","op":"incr","users":["x","y","z"],"path":"root.x"}"#, offset: 10)
        let everyone = record(#"{"id":"e","op":"set","audience":"all","path":"root.x","count":2}"#, offset: 11)
        let bad = record(#"{"id":"bad","op":"nope"}"#, offset: 12)
        let mixed = PreparedBatch(records: [many, everyone, everyone, everyone, bad, bad, bad], rules: testRules)
        #expect(mixed.accepted.count == 4 && mixed.rejected.count == 3)
        #expect(PreparedBatch.usersAreSpread([mixed]))
    }

    @Test("the event id of a rejected record is kept when it can be read")
    func rejectedEventIDs() {
        let batch = PreparedBatch(records: poisonRecords().map(\.record), rules: testRules)
        let ids = Dictionary(batch.rejected.map { ($0.rejection.reason, $0.eventID) }, uniquingKeysWith: { first, _ in first })
        #expect(ids[.unknownOp] == "p-op")
        #expect(ids[.unknownType] == "p-type")
        #expect(ids[.invalidPath] == "p-path")
        #expect(ids[.missingAttribute] == "p-attr")
        #expect(ids[.tooManyUsers] == "p-many")
        #expect(ids[.missingField] == .some(nil))
        #expect(ids[.tooLarge] == .some(nil))
        #expect(ids[.invalidEncoding] == .some(nil))

        // Nested "id" members are not the event's; escaped or invalid ids are not read.
        let nested = record(#"{"attrs":{"id":"inner"},"id":"outer","op":"bad"}"#, offset: 0)
        let escaped = record(#"{"id":"a\"b","op":"bad"}"#, offset: 1)
        let notString = record(#"{"id":42,"op":"bad"}"#, offset: 2)
        let invalid = record(#"{"id":"has space","op":"bad"}"#, offset: 3)
        let truncated = record(#"{"x":[1,{"y":"]"}],"id":"late","op""#, offset: 4)
        let prepared = PreparedBatch(records: [nested, escaped, notString, invalid, truncated], rules: testRules)
        #expect(prepared.rejected.map(\.eventID) == ["outer", nil, nil, nil, "late"])
    }

    @Test("poison records interleaved with good ones keep their order; offsets per partition")
    func interleaved() throws {
        var records: [IngestRecord] = []
        var expectedAccepted: [Int64] = []
        var expectedRejected: [Int64] = []
        let poisons = poisonRecords()
        for index in 0..<40 {
            let offset = Int64(100 + index)
            let partition = Int32(index % 3)
            if index % 3 == 1 {
                var poison = poisons[index % poisons.count].record
                poison.offset = offset
                poison.partition = partition
                records.append(poison)
                expectedRejected.append(offset)
            } else if index % 5 == 0 {
                records.append(
                    record(
                        #"{"id":"c\#(index)","type":"chat.message","users":["a","b"],"attrs":{"conversation":"c\#(index)"}}"#,
                        offset: offset, partition: partition))
                expectedAccepted.append(offset)
            } else {
                records.append(
                    record(#"{"id":"e\#(index)","op":"incr","user":"u\#(index)","path":"root.x","by":2}"#, offset: offset, partition: partition))
                expectedAccepted.append(offset)
            }
        }
        let batch = PreparedBatch(records: records, rules: testRules)
        #expect(batch.records == records)
        #expect(batch.accepted.map(\.offset) == expectedAccepted)
        #expect(batch.rejected.map(\.record.offset) == expectedRejected)
        #expect(batch.accepted.count + batch.rejected.count == records.count)
        // Offsets: index 39 is the last of partition 0, 37 of 1, 38 of 2.
        #expect(
            batch.nextOffsets == [
                TopicPartition(topic: topic, partition: 0): 140,
                TopicPartition(topic: topic, partition: 1): 138,
                TopicPartition(topic: topic, partition: 2): 139,
            ])
        let content = try #require(batch.accepted.first { $0.offset == 100 })
        #expect(content.operation.path == path("root.chat.c0"))
        #expect(content.operation.audience == .users([user("a"), user("b")]))
        #expect(content.operation.operation == .increment(by: 1))
        #expect(content.topicPartition == TopicPartition(topic: topic, partition: 0))
    }

    @Test("next offsets take the highest offset of each partition, whatever the record order")
    func nextOffsets() {
        let records = [
            record(bytes: nil, offset: 7, partition: 1),
            record(bytes: nil, offset: 3, partition: 1),
            IngestRecord(topic: "other", partition: 1, offset: 0, key: nil, payload: nil),
        ]
        let batch = PreparedBatch(records: records, rules: .empty)
        #expect(
            batch.nextOffsets == [
                TopicPartition(topic: topic, partition: 1): 8, TopicPartition(topic: "other", partition: 1): 1,
            ])
        #expect(PreparedBatch(records: [], rules: .empty).nextOffsets.isEmpty)
    }
}
