/// The one step from a record's bytes to what it means (DESIGN §3): size, UTF-8, JSON and fields
/// (``EventDecoder``), then the rules (``RuleSet/map(_:)``). Ingest, dead-letter replay,
/// `reddot publish` and `POST /v1/events` all take records through it, so they accept and refuse
/// the same records for the same reasons.
public struct EventIntake: Sendable {
    /// The rules that map content events; nil to check records without mapping them.
    public let rules: RuleSet?
    private let decoder = EventDecoder()

    /// An intake with `rules`, or without rules (nil).
    public init(rules: RuleSet?) {
        self.rules = rules
    }

    /// Decodes and validates one record, then, when the intake has rules, maps it (checking only
    /// that it maps): for callers that send the event on.
    ///
    /// - Returns: the event, or the rejection with the event id the record names.
    public func check(_ bytes: some Collection<UInt8>) -> Result<BadgeEvent, IntakeRejection> {
        decode(bytes).flatMap { event in
            guard let rules else { return .success(event) }
            return Self.map(event, with: rules).map { _ in event }
        }
    }

    /// Decodes, validates and maps one record (with the empty rule set when the intake has none,
    /// so that every content event is then `unknown_type`).
    ///
    /// - Returns: the operation, or the rejection with the event id the record names.
    public func map(_ bytes: some Collection<UInt8>) -> Result<MappedOperation, IntakeRejection> {
        decode(bytes).flatMap { event in Self.map(event, with: rules ?? .empty) }
    }

    private func decode(_ bytes: some Collection<UInt8>) -> Result<BadgeEvent, IntakeRejection> {
        decoder.decode(bytes).mapError { rejection in
            IntakeRejection(rejection: rejection, eventID: Self.eventID(in: bytes))
        }
    }

    private static func map(_ event: BadgeEvent, with rules: RuleSet) -> Result<MappedOperation, IntakeRejection> {
        rules.map(event).mapError { rejection in IntakeRejection(rejection: rejection, eventID: event.id) }
    }

    /// The event id a record the decoder refused still names: its top-level `id`, read by
    /// ``JSONParser`` up to the first error, when that is a valid ``EventID`` written without
    /// escapes. None for a record over ``EventDecoder/maximumRecordSize`` or one that repeats a
    /// key (the decoder refused it before reading any id).
    static func eventID(in bytes: some Collection<UInt8>) -> EventID? {
        guard bytes.count <= EventDecoder.maximumRecordSize else { return nil }
        return JSONParser.leadingStringMember("id", in: bytes).flatMap(EventID.init(rawValue:))
    }
}

/// A record the intake refused: why, and the event id it names (DESIGN §3), for the dead letter.
public struct IntakeRejection: Error, Hashable, Sendable, CustomStringConvertible {
    /// The reason and message.
    public var rejection: EventRejection
    /// The record's event id: the decoded event's, or for a record the decoder refused the one
    /// ``EventIntake`` could still read; nil when none.
    public var eventID: EventID?

    /// A rejection of a record that names `eventID`.
    public init(rejection: EventRejection, eventID: EventID?) {
        self.rejection = rejection
        self.eventID = eventID
    }

    /// `reason: message`, as ``EventRejection``.
    public var description: String { rejection.description }
}
