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

/// Formats and parses timestamps in the forms PostgreSQL reads and writes.
enum PGTimestamp {
    static func format(_ date: Date) -> String {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        let seconds = Int64((micros / 1_000_000).rounded(.down))
        let fraction = Int64(micros) - seconds * 1_000_000
        var components = civilComponents(seconds)
        components.fraction = String(fraction).leftPadded(to: 6)
        return "\(components.date)T\(components.time).\(components.fraction)Z"
    }

    /// Parses `2026-11-21 06:43:49.123456+00` (and `T`, `Z` or other offsets).
    static func parse(_ text: String) -> Date? {
        let scalars = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= scalars.count else { return nil }
            var value = 0
            for byte in scalars[range] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard scalars.count >= 19,
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        var index = 19
        var fraction = 0.0
        if index < scalars.count, scalars[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            while index < scalars.count, scalars[index] >= 48, scalars[index] <= 57 {
                fraction += Double(scalars[index] - 48) * scale
                scale /= 10
                index += 1
            }
        }
        var offsetSeconds = 0
        if index < scalars.count {
            let sign = scalars[index]
            if sign == UInt8(ascii: "Z") {
                offsetSeconds = 0
            } else if sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                let digits = scalars[(index + 1)...].filter { $0 != UInt8(ascii: ":") }
                var value = 0
                for byte in digits {
                    guard byte >= 48, byte <= 57 else { return nil }
                    value = value * 10 + Int(byte - 48)
                }
                let hours = digits.count <= 2 ? value : value / 100
                let minutes = digits.count <= 2 ? 0 : value % 100
                offsetSeconds = (hours * 3600 + minutes * 60) * (sign == UInt8(ascii: "-") ? -1 : 1)
            } else {
                return nil
            }
        }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civilComponents(_ seconds: Int64) -> (date: String, time: String, fraction: String) {
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        // Civil from days (inverse of daysFromCivil).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let date = "\(String(year).leftPadded(to: 4))-\(String(month).leftPadded(to: 2))-\(String(day).leftPadded(to: 2))"
        let time =
            "\(String(secondOfDay / 3600).leftPadded(to: 2)):\(String(secondOfDay / 60 % 60).leftPadded(to: 2)):\(String(secondOfDay % 60).leftPadded(to: 2))"
        return (date, time, "")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
