public import Foundation

/// A Swift value that can be bound to a statement parameter in PostgreSQL's text format.
///
/// Parameters are always bound, never pasted into SQL: cast in the SQL (`$1::ltree`, `$2::text[]`).
public protocol PGBindable: Sendable {
    /// The text form PostgreSQL parses, or `nil` for SQL `NULL`.
    var pgText: String? { get }
}

extension String: PGBindable {
    /// The string itself.
    public var pgText: String? { self }
}

extension Int: PGBindable {
    /// Decimal digits.
    public var pgText: String? { String(self) }
}

extension Int64: PGBindable {
    /// Decimal digits.
    public var pgText: String? { String(self) }
}

extension Int32: PGBindable {
    /// Decimal digits.
    public var pgText: String? { String(self) }
}

extension Bool: PGBindable {
    /// `t` or `f`.
    public var pgText: String? { self ? "t" : "f" }
}

extension Double: PGBindable {
    /// A round-trippable decimal form.
    public var pgText: String? { "\(self)" }
}

extension Date: PGBindable {
    /// Seconds since 1970 with microseconds, as an ISO 8601 UTC timestamp.
    public var pgText: String? { PGTimestamp.format(self) }
}

extension Optional: PGBindable where Wrapped: PGBindable {
    /// `nil` binds SQL `NULL`.
    public var pgText: String? {
        switch self {
        case .none: return nil
        case .some(let value): return value.pgText
        }
    }
}

extension Array: PGBindable where Element: PGBindable {
    /// A one-dimensional array literal (`{"a","b",NULL}`); cast it in SQL (`$1::text[]`,
    /// `$2::ltree[]`), then `unnest` several arrays side by side for set-based writes.
    public var pgText: String? {
        var text = "{"
        for (index, element) in enumerated() {
            if index > 0 { text += "," }
            guard let value = element.pgText else {
                text += "NULL"
                continue
            }
            text += "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { text += "\\" }
                text.unicodeScalars.append(character)
            }
            text += "\""
        }
        return text + "}"
    }
}

/// A value that can be read from a result column in text format.
public protocol PGDecodable: Sendable {
    /// Decodes the column's text; `nil` is SQL `NULL`.
    static func decode(pgText: String?) throws(PGError) -> Self
}

extension PGDecodable {
    static func decodingError(_ text: String?) -> PGError {
        let shown = text.map { "'\($0.prefix(40))'" } ?? "NULL"
        return PGError(code: .decoding, message: "cannot decode \(shown) as \(Self.self)")
    }
}

extension String: PGDecodable {
    /// The column text; `NULL` is an error (decode `String?` to allow it).
    public static func decode(pgText: String?) throws(PGError) -> String {
        guard let pgText else { throw decodingError(nil) }
        return pgText
    }
}

extension Int: PGDecodable {
    /// Decimal digits.
    public static func decode(pgText: String?) throws(PGError) -> Int {
        guard let pgText, let value = Int(pgText) else { throw decodingError(pgText) }
        return value
    }
}

extension Int64: PGDecodable {
    /// Decimal digits.
    public static func decode(pgText: String?) throws(PGError) -> Int64 {
        guard let pgText, let value = Int64(pgText) else { throw decodingError(pgText) }
        return value
    }
}

extension Int32: PGDecodable {
    /// Decimal digits.
    public static func decode(pgText: String?) throws(PGError) -> Int32 {
        guard let pgText, let value = Int32(pgText) else { throw decodingError(pgText) }
        return value
    }
}

extension Bool: PGDecodable {
    /// `t` or `f`.
    public static func decode(pgText: String?) throws(PGError) -> Bool {
        switch pgText {
        case "t", "true": return true
        case "f", "false": return false
        default: throw decodingError(pgText)
        }
    }
}

extension Double: PGDecodable {
    /// A decimal or `NaN`/`Infinity`.
    public static func decode(pgText: String?) throws(PGError) -> Double {
        guard let pgText, let value = Double(pgText) else { throw decodingError(pgText) }
        return value
    }
}

extension Date: PGDecodable {
    /// A `timestamptz` in ISO style; connections set `DateStyle=ISO` and `TimeZone=UTC`.
    public static func decode(pgText: String?) throws(PGError) -> Date {
        guard let pgText, let value = PGTimestamp.parse(pgText) else { throw decodingError(pgText) }
        return value
    }
}

extension Optional: PGDecodable where Wrapped: PGDecodable {
    /// `NULL` decodes as `nil`.
    public static func decode(pgText: String?) throws(PGError) -> Wrapped? {
        guard let pgText else { return nil }
        return try Wrapped.decode(pgText: pgText)
    }
}

/// Formats and parses timestamps in the forms PostgreSQL reads and writes (connections use
/// `DateStyle=ISO`, `TimeZone=UTC`), keeping microseconds.
enum PGTimestamp {
    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()

    /// `2026-11-21T06:43:49.123456Z`.
    static func format(_ date: Date) -> String {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let fraction = micros - seconds * 1_000_000
        let parts = calendar.dateComponents(
            [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: Double(seconds)))
        func pad(_ value: Int?, _ width: Int) -> String {
            let text = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.year, 4))-\(pad(parts.month, 2))-\(pad(parts.day, 2))T\(pad(parts.hour, 2)):\(pad(parts.minute, 2)):\(pad(parts.second, 2)).\(pad(Int(fraction), 6))Z"
    }

    /// Parses `2026-11-21 06:43:49.123456+00` (also with `T`, `Z` or other offsets).
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[range] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard bytes.count >= 19,
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        var index = 19
        var fraction = 0.0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
        }
        var offsetSeconds = 0
        if index < bytes.count, bytes[index] != UInt8(ascii: "Z") {
            let sign = bytes[index]
            guard sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") else { return nil }
            let digits = bytes[(index + 1)...].filter { $0 != UInt8(ascii: ":") }
            guard !digits.isEmpty, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            let value = digits.reduce(0) { $0 * 10 + Int($1 - 48) }
            let hours = digits.count <= 2 ? value : value / 100
            let minutes = digits.count <= 2 ? 0 : value % 100
            offsetSeconds = (hours * 3600 + minutes * 60) * (sign == UInt8(ascii: "-") ? -1 : 1)
        }
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        guard let whole = calendar.date(from: components) else { return nil }
        return whole.addingTimeInterval(fraction - Double(offsetSeconds))
    }
}
