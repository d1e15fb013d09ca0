import BadgeCore
import Dispatch
import Foundation
import Logging
import RdKafka
import TestSupport
import Testing

/// `reddot publish` run as a child process against librdkafka's mock cluster (started in this
/// process), read back with `kcat -C`; and the JSON Schema of events checked against the decoder.
@Suite("reddot publish as a child process")
struct PublishTests {
    // MARK: - round trips through Kafka

    @Test("events from flags arrive keyed by user, first user, or * for a broadcast, as compact JSON")
    func flagEventsRoundTrip() async throws {
        let kafka = try MockKafka()
        let single = try await publish(
            ["--id", "e1", "--user", "u1", "--op", "incr", "--path", "root.chat.c7", "--by", "2", "--verbose"],
            kafka: kafka)
        #expect(single.exitCode == 0, "\(single)")
        #expect(single.stdout.hasPrefix("e1 -> partition "), "\(single)")
        #expect(single.stdout.hasSuffix("published 1 event\n"), "\(single)")

        let several = try await publish(
            ["--id", "e2", "--user", "u2", "--user", "u3", "--type", "chat.message", "--attr", "conversation=c7"],
            kafka: kafka)
        #expect(several.exitCode == 0, "\(several)")
        #expect(several.stdout == "published 1 event\n", "\(several)")

        let broadcast = try await publish(
            [
                "--id", "e3", "--all", "--op", "set", "--path", "root.news", "--icon", "new",
                "--occurred-at", "2025-03-01T14:00:00+02:00",
            ],
            kafka: kafka)
        #expect(broadcast.exitCode == 0, "\(broadcast)")

        let generated = try await publish(["--user", "u4", "--op", "clear", "--path", "root.chat", "--force"], kafka: kafka)
        #expect(generated.exitCode == 0, "\(generated)")

        let records = try await kafka.consume()
        #expect(records.count == 4, "\(records)")
        let byKey = Dictionary(records.map { ($0.key, $0.payload) }, uniquingKeysWith: { first, _ in first })
        #expect(byKey["u1"] == #"{"id":"e1","op":"incr","by":2,"path":"root.chat.c7","user":"u1"}"#)
        #expect(byKey["u2"] == #"{"id":"e2","type":"chat.message","attrs":{"conversation":"c7"},"users":["u2","u3"]}"#)
        #expect(
            byKey["*"]
                == #"{"id":"e3","op":"set","count":0,"icon":"new","path":"root.news","audience":"all","occurred_at":"2025-03-01T12:00:00Z"}"#
        )
        // No --id: a random UUID, lower case.
        let clear = try #require(byKey["u4"])
        let event = try EventDecoder().decode(Array(clear.utf8)).get()
        #expect(UUID(uuidString: event.id.rawValue) != nil, "\(clear)")
        #expect(event.id.rawValue == event.id.rawValue.lowercased())
        #expect(event.body == .operation(path: try BadgePath(validating: "root.chat"), operation: .clear(force: true)))
    }

    @Test("stdin: an invalid line in the middle exits 65 naming its line and reason; the valid lines arrive as sent")
    func stdinWithInvalidLines() async throws {
        let kafka = try MockKafka()
        let valid = [
            #"{"id":"s1","op":"incr","user":"u1","path":"root.chat.c7"}"#,
            #"{"id":"s2","op":"incr","user":"u1","path":"root.chat.c7","by":3}"#,
            #"{"id":"s4","type":"chat.message","users":["u7","u1"],"attrs":{"conversation":"c9"}}"#,
            #"{"id":"s5","op":"set","audience":"all","path":"root.news","icon":"hot"}"#,
            #"{"id":"s6","op":"clear","user":"u1","path":"root.chat.c7"}"#,
        ]
        var input = Data()
        input.append(Data((valid[0] + "\n" + valid[1] + "\n").utf8))
        input.append(Data(#"{"id":"s3","op":"set","user":"u1","path":"root.a*b"}"#.utf8 + [0x0A]))  // line 3
        input.append(Data("\n   \n".utf8))  // lines 4 and 5: blank, skipped
        input.append(Data((valid[2] + "\r\n" + valid[3] + "\n").utf8))  // lines 6 and 7
        input.append(Data([0x7B, 0x22, 0xFF, 0x22, 0x7D, 0x0A]))  // line 8: not UTF-8
        input.append(Data(#"{"id":"s7","op":"incr","user":"u1","path":"root.a","by":1,}"#.utf8 + [0x0A]))  // line 9
        input.append(Data(valid[4].utf8))  // line 10, no final newline

        let result = try await publish(["--stdin"], kafka: kafka, input: input)
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stdout == "published 5 events\n", "\(result)")
        #expect(result.stderr.contains("reddot: line 3: invalid_path: path 'root.a*b' has the character '*'"), "\(result)")
        #expect(result.stderr.contains("reddot: line 8: invalid_encoding: "), "\(result)")
        #expect(result.stderr.contains("reddot: line 9: malformed_json: "), "\(result)")
        #expect(result.stderr.contains("reddot: 3 of 8 events are invalid and not published"), "\(result)")

        let records = try await kafka.consume()
        #expect(records.map(\.payload).sorted() == valid.sorted(), "\(records)")
        #expect(records.first { $0.payload == valid[2] }?.key == "u7", "several users: keyed by the first")
        #expect(records.first { $0.payload == valid[3] }?.key == "*", "a broadcast is keyed *")
        // u1's events share one partition, in the order sent.
        let user1 = records.filter { $0.key == "u1" }
        #expect(user1.map(\.payload) == [valid[0], valid[1], valid[4]], "\(records)")
        #expect(Set(user1.map(\.partition)).count == 1, "\(records)")
    }

    @Test("--all-or-nothing: one invalid line and nothing is sent")
    func allOrNothing() async throws {
        let kafka = try MockKafka()
        let input = [
            #"{"id":"n1","op":"incr","user":"u1","path":"root.chat"}"#,
            #"{"id":"n2","op":"incr","user":"u1","path":"root.chat","by":0}"#,
        ].joined(separator: "\n")
        let result = try await publish(["--stdin", "--all-or-nothing"], kafka: kafka, input: Data(input.utf8))
        #expect(result.exitCode == 65, "\(result)")
        #expect(result.stderr.contains("reddot: line 2: invalid_field: field 'by' is 0"), "\(result)")
        #expect(result.stderr.contains("nothing published: 1 of 2 events are invalid"), "\(result)")
        #expect(try await kafka.consume().isEmpty)

        let fine = try await publish(
            ["--stdin", "--all-or-nothing", "--verbose"], kafka: kafka,
            input: Data(input.replacingOccurrences(of: #""by":0"#, with: #""by":2"#).utf8))
        #expect(fine.exitCode == 0, "\(fine)")
        #expect(fine.stdout.contains("line 1: n1 -> partition "), "\(fine)")
        #expect(fine.stdout.contains("line 2: n2 -> partition "), "\(fine)")
        #expect(fine.stdout.hasSuffix("published 2 events\n"), "\(fine)")
        #expect(try await kafka.consume().map(\.payload).count == 2)
    }

    @Test("a record the producer refuses counts as failed: exit 1 with the count; the others arrive")
    func partialFailure() async throws {
        let kafka = try MockKafka()
        let large = String(repeating: "x", count: 3_000)
        let input = [
            #"{"id":"p1","op":"incr","user":"u1","path":"root.chat"}"#,
            #"{"id":"p2","type":"big","user":"u1","attrs":{"blob":"\#(large)"}}"#,
        ].joined(separator: "\n")
        let result = try await publish(
            ["--stdin", "-X", "message.max.bytes=2000"], kafka: kafka, input: Data(input.utf8))
        #expect(result.exitCode == 1, "\(result)")
        #expect(result.stdout == "published 1 event\n", "\(result)")
        #expect(result.stderr.contains("reddot: line 2: p2 was not delivered"), "\(result)")
        #expect(result.stderr.contains("reddot: 1 of 2 events failed: "), "\(result)")
        #expect(try await kafka.consume().map(\.payload) == [#"{"id":"p1","op":"incr","user":"u1","path":"root.chat"}"#])
    }

    // MARK: - without a broker

    @Test("--validate checks without Kafka: 0 when valid, 65 naming each bad line; --rules checks types")
    func validateOnly() async throws {
        // An unreachable broker: --validate must not try it (or it would wait for the timeout).
        let offline = ["--brokers", "127.0.0.1:1", "--validate"]
        let lines = [
            #"{"id":"v1","op":"incr","user":"u1","path":"root.chat.c7"}"#,
            #"{"id":"v2","type":"chat.message","users":["u1","u2"],"attrs":{"conversation":"c7"}}"#,
            #"{"id":"v3","type":"feature.launched","audience":"all","attrs":{"feature":"dark_mode"}}"#,
        ]
        let ok = try await publish(["--stdin"] + offline, input: Data(lines.joined(separator: "\n").utf8))
        #expect(ok.exitCode == 0, "\(ok)")
        #expect(ok.stdout == "ok: 3 events valid\n", "\(ok)")
        #expect(ok.stderr.isEmpty, "\(ok)")

        let bad = lines + [#"{"id":"v4","op":"incr","user":"*","path":"root.chat"}"#, "not json"]
        let invalid = try await publish(["--stdin"] + offline, input: Data(bad.joined(separator: "\n").utf8))
        #expect(invalid.exitCode == 65, "\(invalid)")
        #expect(invalid.stdout.isEmpty, "\(invalid)")
        #expect(invalid.stderr.contains("reddot: line 4: invalid_user: field 'user': user id '*' is reserved"), "\(invalid)")
        #expect(invalid.stderr.contains("reddot: line 5: malformed_json: "), "\(invalid)")
        #expect(invalid.stderr.contains("reddot: 2 of 5 events are invalid"), "\(invalid)")

        let rules = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-publish-rules-\(UUID().uuidString).yaml")
        try Data(
            """
            rules:
              - type: chat.message
                op: incr
                path: root.chat.{conversation}
            """.utf8
        ).write(to: rules)
        defer { try? FileManager.default.removeItem(at: rules) }
        let withRules = lines + [#"{"id":"v5","type":"chat.message","user":"u1","attrs":{"room":"r1"}}"#]
        let checked = try await publish(
            ["--stdin", "--rules", rules.path] + offline, input: Data(withRules.joined(separator: "\n").utf8))
        #expect(checked.exitCode == 65, "\(checked)")
        #expect(checked.stderr.contains("reddot: line 3: unknown_type: "), "\(checked)")
        #expect(checked.stderr.contains("reddot: line 4: missing_attribute: "), "\(checked)")
        #expect(!checked.stderr.contains("line 1:") && !checked.stderr.contains("line 2:"), "\(checked)")

        let flags = try await publish(["--user", "u1", "--type", "chat.message", "--attr", "conversation=c1", "--rules", rules.path] + offline)
        #expect(flags.exitCode == 0, "\(flags)")
        #expect(flags.stdout == "ok: 1 event valid\n", "\(flags)")
    }

    @Test("bad flags exit 64 with a sentence naming the flag or the field")
    func badArguments() async throws {
        let offline = ["--brokers", "127.0.0.1:1"]
        let cases: [([String], String)] = [
            (["--user", "u1", "--op", "incr", "--path", "root.a", "--count", "3"], "--count goes with --op set"),
            (["--user", "u1", "--op", "set", "--path", "root.a*b"], "reddot: invalid_path: path 'root.a*b'"),
            (["--user", "u1", "--op", "set", "--path", "root.a", "--count=-1"], "reddot: invalid_field: field 'count' is -1"),
            (["--user", "*", "--op", "set", "--path", "root.a"], "reddot: invalid_user: "),
            (["--op", "set", "--path", "root.a"], "give --user U (repeatable) or --all"),
            (["--user", "u1", "--all", "--op", "set", "--path", "root.a"], "--user and --all exclude each other"),
            (["--user", "u1"], "give --op (a badge operation) or --type (a content event)"),
            (["--user", "u1", "--type", "t", "--path", "root.a"], "--path goes with --op, not --type"),
            (["--user", "u1", "--type", "t", "--attr", "novalue"], "--attr 'novalue' is not key=value"),
            (["--stdin", "--user", "u1"], "--stdin reads whole events; leave out --user"),
            (["--user", "u1", "--op", "incr", "--path", "root.a", "--expires-at", "tomorrow"], "reddot: invalid_field: field 'expires_at'"),
            (["--user", "u1", "--op", "incr", "--path", "root.a", "-X", "novalue"], "-X 'novalue' is not key=value"),
            (["--user", "u1", "--op", "incr", "--path", "root.a", "-X", "no.such.property=1"], "Kafka property 'no.such.property' was refused"),
            (["--user", "u1", "--op", "incr", "--path", "root.a", "--topic", "bad topic"], "topic 'bad topic' has the character ' '"),
            (["--stdin", "--rules", "/nonexistent/rules.yaml"], "cannot read the rules file /nonexistent/rules.yaml"),
        ]
        for (arguments, message) in cases {
            let result = try await publish(arguments + offline)
            #expect(result.exitCode == 64, "\(arguments): \(result)")
            #expect(result.stderr.contains(message), "\(arguments): \(result)")
            #expect(result.stdout.isEmpty, "\(arguments): \(result)")
        }
    }

    @Test("an unreachable broker exits 69 with one sentence, within the delivery timeout")
    func unreachableBroker() async throws {
        let started = ContinuousClock.now
        let result = try await publish(
            ["--brokers", "127.0.0.1:1", "-X", "message.timeout.ms=2000", "--user", "u1", "--op", "incr", "--path", "root.a"])
        #expect(result.exitCode == 69, "\(result)")
        #expect(
            result.stderr.contains(
                "reddot: cannot reach Kafka at 127.0.0.1:1: the event was not delivered within message.timeout.ms (2000 ms)"),
            "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        // About 3 s alone; up to 16 s was seen with the whole suite on a loaded machine. The
        // bound tells the delivery timeout given from librdkafka's default of 300 s.
        #expect(ContinuousClock.now - started < .seconds(50))
    }

    // MARK: - the JSON Schema

    @Test("the JSON Schema and EventDecoder agree on every event of the corpus")
    func schemaAgreesWithDecoder() async throws {
        let corpus = SchemaCorpus.valid.map { ($0, RejectionReason?.none) } + SchemaCorpus.invalid.map { ($0.1, Optional($0.0)) }
        // The corpus means what it says: the decoder accepts the valid ones and rejects the
        // invalid ones for the reason given.
        for (line, expected) in corpus {
            switch EventDecoder().decode(Array(line.utf8)) {
            case .success:
                #expect(expected == nil, "the decoder accepts \(line.prefix(200))")
            case .failure(let rejection):
                #expect(rejection.reason == expected, "\(rejection) for \(line.prefix(200))")
            }
        }
        #expect(SchemaCorpus.valid.count >= 30 && SchemaCorpus.invalid.count >= 30)

        let output = try await Self.run(
            Self.environmentTool, ["python3", "-c", Self.schemaScript, Self.schemaFile.path],
            input: Data(corpus.map(\.0).joined(separator: "\n").utf8))
        try #require(
            output.exitCode == 0,
            "python3 with the jsonschema package is needed (apt-get install python3-jsonschema): \(output)")
        let verdicts = output.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        try #require(verdicts.count == corpus.count, "\(output)")
        for ((line, expected), verdict) in zip(corpus, verdicts) {
            let schemaAccepts = verdict == "valid"
            #expect(schemaAccepts == (expected == nil), "schema says \(verdict) for \(line.prefix(200))")
        }
    }

    /// Validates each stdin line against the schema given as the first argument; prints `valid`
    /// or `invalid: <first error>` a line. Checks the schema itself against the 2020-12 metaschema.
    static let schemaScript = """
        import json, sys
        import jsonschema
        with open(sys.argv[1], encoding="utf-8") as handle:
            schema = json.load(handle)
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        for line in sys.stdin.buffer.read().decode("utf-8").split("\\n"):
            errors = list(validator.iter_errors(json.loads(line)))
            print("valid" if not errors else "invalid: " + errors[0].message[:120].replace("\\n", " "))
        """

    static let schemaFile = Repository.root.appendingPathComponent("deploy/schema/event.schema.json")

    // MARK: - running things

    /// A mock Kafka cluster in this process, with a fresh three-partition topic.
    final class MockKafka: Sendable {
        let cluster: KafkaMockCluster
        let topic = "reddot.events.test-\(UUID().uuidString.lowercased())"

        init() throws {
            var logger = Logger(label: "reddot.test.publish")
            logger.logLevel = .critical
            cluster = try KafkaMockCluster(logger: logger)
            try cluster.createTopic(topic, partitions: 3)
        }

        var arguments: [String] { ["--brokers", cluster.bootstrapServers, "--topic", topic] }

        /// Every record in the topic, read with `kcat -C` to the end of each partition.
        func consume() async throws -> [(key: String, partition: Int, payload: String)] {
            let output = try await PublishTests.run(
                PublishTests.environmentTool,
                ["kcat", "-C", "-q", "-b", cluster.bootstrapServers, "-t", topic, "-o", "beginning", "-e",
                 "-f", "%k\\t%p\\t%s\\n"])
            try #require(output.exitCode == 0, "kcat is needed (apt-get install kcat): \(output)")
            return output.stdout.split(separator: "\n").map { line in
                let fields = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
                return (String(fields[0]), Int(fields[1]) ?? -1, fields.count > 2 ? String(fields[2]) : "")
            }
        }
    }

    /// Runs `reddot publish` with `arguments`, against `kafka` when given.
    func publish(_ arguments: [String], kafka: MockKafka? = nil, input: Data? = nil) async throws -> CommandOutput {
        let binary = try CLITests.binary.get()
        return try await Self.run(binary, ["publish"] + arguments + (kafka?.arguments ?? []), input: input)
    }

    static let environmentTool = URL(fileURLWithPath: "/usr/bin/env")

    /// Runs a program off Swift's cooperative threads, feeding `input` (or nothing) to its stdin;
    /// kills it after 60 s.
    static func run(_ executable: URL, _ arguments: [String], input: Data? = nil) async throws -> CommandOutput {
        try await ChildProcess.capture(
            executable, arguments, removing: ["REDDOT_KAFKA_BROKERS", "REDDOT_KAFKA_TOPIC", "REDDOT_KAFKA_CONFIG"],
            setting: ["REDDOT_LOG_LEVEL": "critical"], input: input, timeoutSeconds: 60)
    }
}

/// Events on which the JSON Schema and EventDecoder must agree: what the decoder accepts, and
/// what it rejects for a reason a schema can express. (Rejections no schema can see, such as
/// `too_large`, `invalid_encoding` or a trailing comma, are tested through the command.)
enum SchemaCorpus {
    static let longID = String(repeating: "x", count: 128)
    static let visibleASCII = String((0x21...0x7E).map { Character(Unicode.Scalar(UInt8($0))) })
    static let sixteenLabels = "root" + String(repeating: ".l", count: 16)
    static let longLabel = String(repeating: "a", count: 64)
    static let thousandUsers = (1...1000).map { "\"user\($0)\"" }.joined(separator: ",")

    static let valid: [String] = [
        #"{"id":"i1","op":"add","user":"u1","path":"root.chat.c7","item":"m123","occurred_at":"2026-11-23T10:00:00Z"}"#,
        #"{"id":"i2","op":"remove","users":["u1","u2"],"path":"root.chat.c7","item":"m123"}"#,
        #"{"id":"i3","op":"decr","user":"u1","path":"root.chat.c7","by":2}"#,
        #"{"id":"i4","op":"decr","user":"u1","path":"root.chat.c7"}"#,
        #"{"id":"i5","op":"seen","user":"u1","path":"root.chat","occurred_at":"2026-11-23T10:00:00Z"}"#,
        #"{"id":"i6","op":"mute","user":"u1","path":"root.chat.c7"}"#,
        #"{"id":"i6a","op":"mute","user":"u1","path":"root.chat","until":"2026-11-24T08:00:00Z","occurred_at":"2026-11-23T10:00:00Z"}"#,
        #"{"id":"i6b","op":"unmute","users":["u1","u2"],"path":"root.chat.c7","until":null}"#,
        #"{"id":"v1","op":"incr","user":"u42","path":"root.chat.c7","by":1}"#,
        #"{"id":"v2","op":"set","user":"u42","path":"root.promotion.item1","count":5}"#,
        #"{"id":"v3","op":"clear","user":"u42","path":"root.promotion","force":true}"#,
        #"{"id":"v4","type":"chat.message","users":["u42","u43"],"attrs":{"conversation":"c7"}}"#,
        #"{"id":"v5","type":"feature.launched","audience":"all","attrs":{"feature":"dark_mode"}}"#,
        #"{"id":"v6","op":"set","user":"u1","path":"root"}"#,
        #"{"id":"v7","op":"set","user":"u1","path":"root.a","count":0,"icon":"new"}"#,
        #"{"id":"v8","op":"set","user":"u1","path":"root.a","count":1000000000}"#,
        #"{"id":"v9","op":"incr","user":"u1","path":"root.a"}"#,
        #"{"id":"v10","op":"incr","user":"u1","path":"root.a","by":1000000000}"#,
        #"{"id":"v11","op":"clear","user":"u1","path":"root.a","force":false}"#,
        #"{"id":"v12","op":"incr","user":"u1","path":"\#(sixteenLabels)"}"#,
        #"{"id":"v13","op":"incr","user":"u1","path":"root.\#(longLabel).B_9"}"#,
        #"{"id":"v14","op":"incr","user":"u1","path":"root.a","by":null,"count":null,"icon":null,"force":null,"attrs":null,"type":null}"#,
        #"{"id":"v15","type":"t","user":"u1"}"#,
        #"{"id":"v16","type":"t","user":"u1","attrs":{"n":5,"b":true,"s":"x","empty":""}}"#,
        #"{"id":"v17","type":"t","users":["a","a","b"]}"#,
        #"{"id":"v18","type":"t","users":[\#(thousandUsers)]}"#,
        #"{"id":"v19","op":"incr","user":"\#(visibleASCII.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))","path":"root.a"}"#,
        #"{"id":"v20","op":"incr","user":"user:42@example.com","path":"root.a"}"#,
        #"{"id":"\#(longID)","op":"incr","user":"u1","path":"root.a"}"#,
        #"{"id":"v22","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01T12:00:00Z","expires_at":"2025-03-01T14:00:00.5+02:00"}"#,
        #"{"id":"v23","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01t12:00:00z"}"#,
        #"{"id":"v24","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01 12:00:00-05:30"}"#,
        #"{"id":"v25","op":"incr","user":"u1","path":"root.a","occurred_at":"2016-12-31T23:59:60Z"}"#,
        #"{"id":"v26","op":"incr","user":"u1","path":"root.a","expires_at":"2024-02-29T00:00:00Z"}"#,
        #"{"id":"v27","op":"incr","user":"u1","path":"root.a","extra":{"x":[1,2]},"version":3}"#,
        #"{"id":"v28","op":"set","user":"u1","path":"root.a","count":5.0}"#,
        #"{"id":"v29","op":"incr","user":"u1","users":null,"audience":null,"path":"root.a"}"#,
        #"{"id":"v30","op":"set","user":"u1","path":"root.a","icon":"hot_new-2"}"#,
        #"{"id":"v31","op":null,"type":"t","audience":"all","path":null}"#,
        #"{"id":"v32","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01T12:00:00.123456789012345678Z"}"#,
        #"{"id":"v33","type":"t","audience":"all","attrs":{}}"#,
    ]

    static let invalid: [(RejectionReason, String)] = [
        (.invalidField, #"{"id":"j1","op":"add","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":"j2","op":"remove","user":"u1","path":"root.a","item":"a b"}"#),
        (.invalidField, #"{"id":"j3","op":"add","user":"u1","path":"root.a","item":"m1","by":2}"#),
        (.invalidField, #"{"id":"j4","op":"incr","user":"u1","path":"root.a","item":"m1"}"#),
        (.invalidField, #"{"id":"j5","op":"add","audience":"all","path":"root.a","item":"m1"}"#),
        (.invalidField, #"{"id":"j6","op":"decr","audience":"all","path":"root.a"}"#),
        (.invalidField, #"{"id":"j7","op":"decr","user":"u1","path":"root.a","by":0}"#),
        (.invalidField, #"{"id":"j8","type":"t","user":"u1","item":"m1"}"#),
        (.invalidField, #"{"id":"j9","op":"seen","user":"u1","path":"root.a","force":true}"#),
        (.invalidField, #"{"id":"j10","op":"seen","audience":"all","path":"root.a"}"#),
        (.invalidField, #"{"id":"j11","op":"mute","audience":"all","path":"root.a"}"#),
        (.invalidPath, #"{"id":"j12","op":"mute","user":"u1","path":"root"}"#),
        (.invalidPath, #"{"id":"j13","op":"unmute","user":"u1","path":"root"}"#),
        (.invalidField, #"{"id":"j14","op":"unmute","user":"u1","path":"root.a","until":"2026-11-24T08:00:00Z"}"#),
        (.invalidField, #"{"id":"j15","op":"mute","user":"u1","path":"root.a","until":"tomorrow"}"#),
        (.invalidField, #"{"id":"j16","op":"mute","user":"u1","path":"root.a","force":true}"#),
        (.invalidField, #"{"id":"j17","op":"clear","user":"u1","path":"root.a","until":"2026-11-24T08:00:00Z"}"#),
        (.invalidField, #"{"id":"j18","type":"t","user":"u1","until":"2026-11-24T08:00:00Z"}"#),
        (.missingField, #"{"op":"incr","user":"u1","path":"root.a"}"#),
        (.missingField, #"{"id":null,"op":"incr","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":"","op":"incr","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":"a b","op":"incr","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":"\#(longID)x","op":"incr","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":5,"op":"incr","user":"u1","path":"root.a"}"#),
        (.missingField, #"{"id":"i7","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":"i8","op":"incr","type":"t","user":"u1","path":"root.a"}"#),
        (.unknownOp, #"{"id":"i9","op":"append","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":"i10","op":1,"user":"u1","path":"root.a"}"#),
        (.missingField, #"{"id":"i11","op":"incr","path":"root.a"}"#),
        (.invalidField, #"{"id":"i12","op":"incr","user":"u1","audience":"all","path":"root.a"}"#),
        (.invalidField, #"{"id":"i13","op":"incr","users":[],"path":"root.a"}"#),
        (.tooManyUsers, #"{"id":"i14","op":"incr","users":[\#(thousandUsers),"one_more"],"path":"root.a"}"#),
        (.invalidField, #"{"id":"i15","op":"incr","users":["u1",2],"path":"root.a"}"#),
        (.invalidField, #"{"id":"i16","op":"incr","users":"u1","path":"root.a"}"#),
        (.invalidUser, #"{"id":"i17","op":"incr","user":"*","path":"root.a"}"#),
        (.invalidUser, #"{"id":"i18","op":"incr","user":"","path":"root.a"}"#),
        (.invalidUser, #"{"id":"i19","op":"incr","users":["u1","u 2"],"path":"root.a"}"#),
        (.invalidUser, #"{"id":"i20","op":"incr","user":"\#(longID)x","path":"root.a"}"#),
        (.invalidUser, #"{"id":"i21","op":"incr","user":"ü","path":"root.a"}"#),
        (.invalidUser, #"{"id":"i22","op":"incr","user":"u1\n","path":"root.a"}"#),
        (.invalidField, #"{"id":"i23","op":"incr","audience":"everyone","path":"root.a"}"#),
        (.missingField, #"{"id":"i24","op":"incr","user":"u1"}"#),
        (.invalidPath, #"{"id":"i25","op":"incr","user":"u1","path":"root.a*b"}"#),
        (.invalidPath, #"{"id":"i26","op":"incr","user":"u1","path":"root..a"}"#),
        (.invalidPath, #"{"id":"i27","op":"incr","user":"u1","path":"chat.c7"}"#),
        (.invalidPath, #"{"id":"i28","op":"incr","user":"u1","path":"\#(sixteenLabels).m"}"#),
        (.invalidPath, #"{"id":"i29","op":"incr","user":"u1","path":"root.\#(longLabel)a"}"#),
        (.invalidPath, #"{"id":"i30","op":"incr","user":"u1","path":"root.a\n"}"#),
        (.invalidPath, #"{"id":"i31","op":"incr","user":"u1","path":"root.é"}"#),
        (.invalidField, #"{"id":"i32","op":"set","user":"u1","path":"root.a","count":-1}"#),
        (.invalidField, #"{"id":"i33","op":"set","user":"u1","path":"root.a","count":1000000001}"#),
        (.invalidField, #"{"id":"i34","op":"set","user":"u1","path":"root.a","count":1.5}"#),
        (.invalidField, #"{"id":"i35","op":"set","user":"u1","path":"root.a","count":"5"}"#),
        (.invalidField, #"{"id":"i36","op":"set","user":"u1","path":"root.a","count":true}"#),
        (.invalidField, #"{"id":"i37","op":"incr","user":"u1","path":"root.a","by":0}"#),
        (.invalidField, #"{"id":"i38","op":"set","user":"u1","path":"root.a","by":1}"#),
        (.invalidField, #"{"id":"i39","op":"incr","user":"u1","path":"root.a","count":1}"#),
        (.invalidField, #"{"id":"i40","op":"clear","user":"u1","path":"root.a","icon":"new"}"#),
        (.invalidField, #"{"id":"i41","op":"set","user":"u1","path":"root.a","force":true}"#),
        (.invalidField, #"{"id":"i42","op":"clear","user":"u1","path":"root.a","force":"yes"}"#),
        (.invalidField, #"{"id":"i43","op":"set","user":"u1","path":"root.a","icon":"New"}"#),
        (.invalidField, #"{"id":"i44","op":"set","user":"u1","path":"root.a","icon":"\#(String(repeating: "i", count: 33))"}"#),
        (.invalidField, #"{"id":"i45","op":"incr","user":"u1","path":"root.a","attrs":{}}"#),
        (.invalidField, #"{"id":"i46","type":"t","user":"u1","path":"root.a"}"#),
        (.invalidField, #"{"id":"i47","type":"t","user":"u1","by":2}"#),
        (.invalidField, #"{"id":"i48","type":"t","user":"u1","attrs":["a"]}"#),
        (.invalidField, #"{"id":"i49","type":"t","user":"u1","attrs":{"a":1.5}}"#),
        (.invalidField, #"{"id":"i50","type":"t","user":"u1","attrs":{"a":null}}"#),
        (.invalidField, #"{"id":"i51","type":"t","user":"u1","attrs":{"a":{"b":"c"}}}"#),
        (.invalidField, #"{"id":"i52","type":"","user":"u1"}"#),
        (.invalidField, #"{"id":"i53","type":"chat message","user":"u1"}"#),
        (.invalidField, #"{"id":"i54","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01"}"#),
        (.invalidField, #"{"id":"i55","op":"incr","user":"u1","path":"root.a","expires_at":"2025-13-01T00:00:00Z"}"#),
        (.invalidField, #"{"id":"i56","op":"incr","user":"u1","path":"root.a","expires_at":"2025-04-31T00:00:00Z"}"#),
        (.invalidField, #"{"id":"i57","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01T12:00:00"}"#),
        (.invalidField, #"{"id":"i58","op":"incr","user":"u1","path":"root.a","occurred_at":1700000000}"#),
        (.invalidField, #"{"id":"i59","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01T24:00:00Z"}"#),
        (.invalidField, #"{"id":"i60","op":"incr","user":"u1","path":"root.a","occurred_at":"2025-03-01T12:00:00+2:00"}"#),
        (.malformedJSON, #"[{"id":"i61","op":"incr","user":"u1","path":"root.a"}]"#),
        (.malformedJSON, #""i62""#),
    ]
}
