public import BadgeCore

/// A record that cannot be applied: the record itself, the reason, and its event id when one could
/// be read. Stored in `rejected_record` in the batch's transaction, then published to the
/// dead-letter topic.
public struct RejectedRecord: Sendable, Hashable {
    /// The record, bytes unchanged.
    public var record: IngestRecord
    /// Why it was rejected.
    public var rejection: EventRejection
    /// The event's `id`, when the record has a readable, valid one.
    public var eventID: String?

    /// Creates a rejected record.
    public init(record: IngestRecord, rejection: EventRejection, eventID: String?) {
        self.record = record
        self.rejection = rejection
        self.eventID = eventID
    }

    /// The value of a top-level `"id"` member holding a valid ``EventID`` written without escapes,
    /// or nil. One linear pass without recursion, so safe on any bytes (nesting depth, size,
    /// encoding); it does not check that the rest is valid JSON.
    static func eventID(in payload: [UInt8]) -> String? {
        guard payload.count <= EventDecoder.maximumRecordSize else { return nil }
        var scanner = TopLevelScanner(bytes: payload)
        return scanner.stringMember(named: Array("id".utf8)).flatMap { bytes in
            String(validating: bytes, as: UTF8.self).flatMap { EventID(rawValue: $0)?.rawValue }
        }
    }
}

/// Walks a JSON object's bytes, tracking strings and nesting, to find a top-level member.
struct TopLevelScanner {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")

    /// Skips white space; returns the byte there, if any.
    mutating func peek() -> UInt8? {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                index += 1
            default:
                return bytes[index]
            }
        }
        return nil
    }

    /// Reads a string starting at the opening quote; returns its raw bytes and whether it had escapes.
    mutating func string() -> (bytes: ArraySlice<UInt8>, escaped: Bool)? {
        guard index < bytes.count, bytes[index] == Self.quote else { return nil }
        let start = index + 1
        var escaped = false
        index = start
        while index < bytes.count {
            let byte = bytes[index]
            if byte == Self.backslash {
                escaped = true
                index += 2
                continue
            }
            if byte == Self.quote {
                let content = bytes[start..<index]
                index += 1
                return (content, escaped)
            }
            index += 1
        }
        return nil
    }

    /// Skips one value of any kind (nested ones by counting brackets outside strings).
    mutating func skipValue() -> Bool {
        guard let first = peek() else { return false }
        if first == Self.quote { return string() != nil }
        var depth = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case Self.quote:
                guard string() != nil else { return false }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return true }
                depth -= 1
            case UInt8(ascii: ","):
                if depth == 0 { return true }
            default:
                break
            }
            index += 1
        }
        return depth == 0
    }

    /// The raw bytes of the last top-level member called `name` whose value is a string without
    /// escapes (JSON decoders keep the last of repeated keys), or nil.
    mutating func stringMember(named name: [UInt8]) -> ArraySlice<UInt8>? {
        guard peek() == UInt8(ascii: "{") else { return nil }
        index += 1
        var found: ArraySlice<UInt8>?
        while true {
            guard let next = peek() else { return found }
            if next == UInt8(ascii: "}") { return found }
            guard let key = string(), peek() == UInt8(ascii: ":") else { return found }
            index += 1
            if !key.escaped, key.bytes.elementsEqual(name), peek() == Self.quote {
                guard let value = string() else { return found }
                found = value.escaped ? nil : value.bytes
            } else if !skipValue() {
                return found
            }
            guard peek() == UInt8(ascii: ",") else { return found }
            index += 1
        }
    }
}
