public import ArgumentParser
import BadgeCore
import BadgePublish
import Foundation
import Logging
import RdKafka
import RedDotCommandLine
import Synchronization

/// `reddot publish`: the producers' command-line tool (DESIGN §3). Sends one event built from
/// flags, or JSON lines from stdin, after checking each with the decoder that ingestion uses.
///
/// Runs synchronously on the main thread: reading stdin and waiting for delivery reports block,
/// and must not block Swift's cooperative threads.
struct PublishCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish badge events to Kafka: one event from flags, or JSON lines from stdin.",
        discussion: """
            Every event is checked before it is sent, by the same decoder that `reddot ingest` \
            uses (and with --rules, against the rules: its type must have a rule and the rule's \
            path must render). An invalid event is reported on stderr with its line, reason and \
            message ("reddot: line 3: invalid_path: …") and is not sent; the valid ones still \
            are, unless --all-or-nothing.

            The record key is the user id, so one user's events stay in order on one partition. \
            An event for several users ("users", or --user given more than once) is keyed by its \
            first user; a broadcast ("audience": "all", --all) by "*". publish waits for the \
            broker to acknowledge every event, for at most message.timeout.ms (10000 here unless \
            -X message.timeout.ms=N says otherwise). Lines from stdin are sent as they are; an \
            event from flags is sent as compact JSON. Blank lines are skipped.

            Exit codes:
              0   every event was delivered (or, with --validate, every event is valid)
              1   some events were not delivered (the count and the first reason on stderr)
              64  bad arguments, a bad -X property, or an invalid event from flags
              65  some input lines were invalid (not sent); the valid ones were delivered,
                  unless --all-or-nothing (then nothing was sent)
              69  no Kafka broker could be reached: nothing was delivered

            Examples:
              reddot publish --user u42 --op incr --path root.chat.c7
              reddot publish --user u42 --op set --path root.promotion.item1 --icon new
              reddot publish --user u42 --op clear --path root.promotion --force
              reddot publish --user u42 --op add --path root.chat.c7 --item m123
              reddot publish --user u42 --op mute --path root.chat.c7 --until 2026-12-01T08:00:00Z
              reddot publish --user u42 --user u43 --type chat.message \\
                --attr conversation=c7
              reddot publish --all --type feature.launched --attr feature=dark_mode
              reddot publish --stdin --verbose < events.jsonl
              reddot publish --stdin --validate --rules rules.yaml < events.jsonl

            The same with kcat (no local check: a bad event goes to the dead letters):
              echo 'u42:{"id":"e1","op":"incr","user":"u42","path":"root.chat.c7"}' |
                kcat -P -b localhost:9092 -t reddot.events -K:
              echo '*:{"id":"e2","op":"set","audience":"all","path":"root.news"}' |
                kcat -P -b localhost:9092 -t reddot.events -K:
              kcat -C -b localhost:9092 -t reddot.events -e -f '%k\\t%s\\n'
            -K: splits the key off at the first ':' (pick another delimiter for user
            ids that hold ':').
            """
    )

    @OptionGroup(title: "Kafka")
    var kafka: KafkaOptions

    // MARK: one event from flags

    @Option(help: ArgumentHelp("The event id (1–128 visible ASCII characters). Default: a random UUID.", valueName: "id"))
    var id: String?

    @Option(
        name: .customLong("user"),
        help: ArgumentHelp("A user the event is for (repeatable: several make \"users\").", valueName: "user-id"))
    var users: [String] = []

    @Flag(name: .customLong("all"), help: "The event is for every user (a broadcast, keyed \"*\").")
    var everyone = false

    @Option(
        help: ArgumentHelp("A direct operation: set, incr, decr, clear, add, remove, seen, mute or unmute (with --path).", valueName: "op"))
    var op: FlagEvent.Operation?

    @Option(help: ArgumentHelp("The badge path of --op, e.g. root.chat.c7.", valueName: "path"))
    var path: String?

    @Option(help: ArgumentHelp("--op set: the absolute count (0…1000000000; default 0, a dot).", valueName: "n"))
    var count: Int64?

    @Option(help: ArgumentHelp("--op incr, decr: how much to add or take (1…1000000000; default 1).", valueName: "k"))
    var by: Int64?

    @Option(help: ArgumentHelp("--op set: a short label shown instead of a dot (1–32 of a-z, 0-9, _ and -).", valueName: "name"))
    var icon: String?

    @Flag(help: "--op clear: also clear the node's whole subtree.")
    var force = false
    @Option(help: ArgumentHelp("--op add, remove: the item (a message id: 1–128 visible ASCII).", valueName: "id"))
    var item: String?
    @Option(help: ArgumentHelp("--op mute: when the snooze ends (RFC 3339); without it, until --op unmute.", valueName: "time"))
    var until: String?

    @Option(help: ArgumentHelp("A content event's type, mapped by the ingest rules (instead of --op).", valueName: "type"))
    var type: String?

    @Option(
        name: .customLong("attr"),
        help: ArgumentHelp("--type: an attribute for the rule's path template (repeatable).", valueName: "key=value"))
    var attributes: [String] = []

    @Option(help: ArgumentHelp("When it happened (RFC 3339, e.g. 2025-03-01T12:00:00Z).", valueName: "time"))
    var occurredAt: String?

    @Option(help: ArgumentHelp("When the badge disappears (RFC 3339).", valueName: "time"))
    var expiresAt: String?

    // MARK: JSON lines, checking, output

    @Flag(help: "Read events from stdin instead, one JSON object a line.")
    var stdin = false

    @Option(help: ArgumentHelp("Also check content events against this rules file (YAML).", valueName: "file"))
    var rules: String?

    @Flag(name: .customLong("validate"), help: "Only check the events (Kafka is not contacted); prints 'ok: N events valid'.")
    var validateOnly = false

    @Flag(help: "With --stdin: if any line is invalid, send nothing.")
    var allOrNothing = false

    @Flag(help: "Print each delivered event's partition and offset.")
    var verbose = false

    @Option(help: "trace, debug, info, notice, warning, error or critical. Default: REDDOT_LOG_LEVEL, else warning.")
    var logLevel: String?

    /// Milliseconds librdkafka tries to deliver a record before failing it, unless `-X` says.
    static let defaultMessageTimeoutMilliseconds = 10_000

    /// The one event the flags describe.
    var flagEvent: FlagEvent {
        var event = FlagEvent()
        event.id = id
        event.users = users
        event.everyone = everyone
        event.operation = op
        event.path = path
        event.count = count
        event.by = by
        event.icon = icon
        event.force = force
        event.item = item
        event.until = until
        event.type = type
        event.attributes = attributes
        event.occurredAt = occurredAt
        event.expiresAt = expiresAt
        return event
    }

    func validate() throws {
        let event = flagEvent
        if stdin {
            if !event.givenFlags.isEmpty {
                throw ValidationError("--stdin reads whole events; leave out \(event.givenFlags.joined(separator: ", "))")
            }
            return
        }
        if allOrNothing { throw ValidationError("--all-or-nothing goes with --stdin") }
        if let problem = event.problem { throw ValidationError(problem) }
    }

    func run() throws {
        let logger = try LoggingSetup.logger(label: "reddot.publish", levelText: logLevel, defaultLevel: .warning)
        let checker = EventIntake(rules: try loadRules())
        if stdin {
            try publishLines(checker: checker, logger: logger)
        } else {
            try publishFlagEvent(checker: checker, logger: logger)
        }
    }

    func loadRules() throws -> RuleSet? {
        guard let rules else { return nil }
        return try readRules(at: rules, failureCode: ExitCodes.usage)
    }

    // MARK: - one event from flags

    func publishFlagEvent(checker: EventIntake, logger: Logger) throws {
        let event: BadgeEvent
        switch checker.check(Array(try flagEvent.json())) {
        case .failure(let rejection):
            throw fail("\(rejection)", code: ExitCodes.usage)
        case .success(let decoded):
            event = decoded
        }
        if validateOnly {
            print("ok: 1 event valid")
            return
        }
        let sender = try makeSender(logger: logger)
        let outcome = sender.sendAll([PublishItem(line: nil, event: event, payload: EventEncoder().encode(event))])
        try finish(sender, outcome, invalid: 0, total: 1)
    }

    // MARK: - JSON lines from stdin

    func publishLines(checker: EventIntake, logger: Logger) throws {
        let sender = validateOnly ? nil : try makeSender(logger: logger)
        let source = CheckedLines(reader: LineReader(fileDescriptor: FileHandle.standardInput.fileDescriptor), checker: checker) {
            Self.printError("line \($0): \($1)")
        }
        let items = AnySequence { AnyIterator { source.next() } }
        guard let sender else {
            for _ in items {}
            try Self.rethrowReadError(source)
            if source.invalid > 0 {
                throw fail("\(source.invalid) of \(source.total) \(PublishSummary.events(source.total)) invalid", code: ExitCodes.dataError)
            }
            print("ok: \(source.total) \(PublishSummary.events(source.total, verb: false)) valid")
            return
        }
        let outcome: EventSender.Outcome
        if allOrNothing {
            let held = Array(items)
            try Self.rethrowReadError(source)
            if source.invalid > 0 {
                sender.close()
                throw fail(
                    "nothing published: \(source.invalid) of \(source.total) \(PublishSummary.events(source.total)) invalid (--all-or-nothing)",
                    code: ExitCodes.dataError)
            }
            outcome = sender.sendAll(held)
        } else {
            outcome = sender.sendAll(items)
            try Self.rethrowReadError(source)
        }
        try finish(sender, outcome, invalid: source.invalid, total: source.total)
    }

    // MARK: - sending

    func makeSender(logger: Logger) throws -> EventSender {
        let defaults: [(key: String, value: String)] = [
            ("client.id", "reddot-publish"),
            ("message.timeout.ms", String(Self.defaultMessageTimeoutMilliseconds)),
        ]
        let configuration: KafkaConfiguration
        do {
            configuration = try kafka.configuration(defaults: defaults)
        } catch let error as ValidationError {
            throw fail(error.message, code: ExitCodes.usage)
        }
        logger.debug(
            "publishing",
            metadata: [
                "kafka.brokers": "\(kafka.brokers)", LogKey.topic: "\(kafka.topic)",
                "kafka.properties": "\(kafka.propertyKeys().joined(separator: ","))",
            ])
        do {
            let producer = try KafkaProducer(configuration: configuration, logger: logger)
            return EventSender(
                producer: producer, topic: kafka.topic, brokers: kafka.brokers, configuration: configuration,
                keepReports: verbose)
        } catch {
            throw fail(error.message, code: error.code == .configuration ? ExitCodes.usage : ExitCodes.failure)
        }
    }

    /// Prints the outcome of a run and picks the exit code.
    func finish(_ sender: EventSender, _ outcome: EventSender.Outcome, invalid: Int, total: Int) throws {
        let summary = PublishSummary(outcome, sender: sender, invalid: invalid, total: total, verbose: verbose)
        summary.output.forEach { print($0) }
        summary.errors.forEach(Self.printError)
        guard let failure = summary.failure else { return }
        switch failure.kind {
        case .unreachable: throw fail(failure.message, code: ExitCodes.unavailable)
        case .notDelivered: throw fail(failure.message, code: ExitCodes.failure)
        case .invalidInput: throw fail(failure.message, code: ExitCodes.dataError)
        }
    }

    /// Stops with exit 1 and the reader's sentence when stdin could not be read to its end.
    static func rethrowReadError(_ source: CheckedLines) throws {
        do {
            try source.throwIfFailed()
        } catch {
            throw fail("\(error)", code: ExitCodes.failure)
        }
    }

    static func printError(_ message: String) {
        FileHandle.standardError.write(Data("reddot: \(message)\n".utf8))
    }
}

extension FlagEvent.Operation: ExpressibleByArgument {}
