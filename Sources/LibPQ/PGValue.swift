public import Foundation

/// A Swift value that can be bound to a statement parameter in PostgreSQL's text format.
///
/// Parameters are always bound, never pasted into SQL: cast in the SQL (`$1::ltree`, `$2::text[]`).
public protocol PGBindable: Sendable {
    /// The text form PostgreSQL parses, or `nil` for SQL `NULL`.
    var pgText: String? { get }

    /// Appends the value as an element of an array literal: quoted and escaped, or `NULL`.
    /// The default quotes `pgText`; the standard types write their bytes directly (ingest binds
    /// arrays of thousands of elements per statement).
    func appendArrayElement(to bytes: inout [UInt8])
}

extension PGBindable {
    public func appendArrayElement(to bytes: inout [UInt8]) {
        guard let text = pgText else {
            bytes.append(contentsOf: PGArrayLiteral.null)
            return
        }
        PGArrayLiteral.appendQuoted(text, to: &bytes)
    }
}

/// The pieces of a one-dimensional array literal (`{"a","b",NULL}`).
enum PGArrayLiteral {
    static let null: [UInt8] = Array("NULL".utf8)

    /// Whether `byte` is escaped inside a quoted element: `"` and `\`.
    static func isSpecial(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") }

    /// `"text"`, with `"` and `\` escaped by a backslash.
    static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        let utf8 = text.utf8
        if utf8.contains(where: isSpecial) {
            for byte in utf8 {
                if isSpecial(byte) { bytes.append(UInt8(ascii: "\\")) }
                bytes.append(byte)
            }
        } else {
            bytes.append(contentsOf: utf8)
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A decimal integer, unquoted.
    static func appendDecimal(_ value: some BinaryInteger, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: String(value).utf8)
    }
}

extension String: PGBindable {
    /// The string itself.
    public var pgText: String? { self }

    public func appendArrayElement(to bytes: inout [UInt8]) { PGArrayLiteral.appendQuoted(self, to: &bytes) }
}

extension Int: PGBindable {
    /// Decimal digits.
    public var pgText: String? { String(self) }

    public func appendArrayElement(to bytes: inout [UInt8]) { PGArrayLiteral.appendDecimal(self, to: &bytes) }
}

extension Int64: PGBindable {
    /// Decimal digits.
    public var pgText: String? { String(self) }

    public func appendArrayElement(to bytes: inout [UInt8]) { PGArrayLiteral.appendDecimal(self, to: &bytes) }
}

extension Int32: PGBindable {
    /// Decimal digits.
    public var pgText: String? { String(self) }

    public func appendArrayElement(to bytes: inout [UInt8]) { PGArrayLiteral.appendDecimal(self, to: &bytes) }
}

extension Bool: PGBindable {
    /// `t` or `f`.
    public var pgText: String? { self ? "t" : "f" }

    public func appendArrayElement(to bytes: inout [UInt8]) { bytes.append(self ? UInt8(ascii: "t") : UInt8(ascii: "f")) }
}

extension Double: PGBindable {
    /// A round-trippable decimal form.
    public var pgText: String? { "\(self)" }
}

extension Date: PGBindable {
    /// Seconds since 1970 with microseconds, as an ISO 8601 UTC timestamp.
    public var pgText: String? { PGTimestamp.format(self) }

    public func appendArrayElement(to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        PGTimestamp.append(self, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }
}

extension Optional: PGBindable where Wrapped: PGBindable {
    /// `nil` binds SQL `NULL`.
    public var pgText: String? {
        switch self {
        case .none: return nil
        case .some(let value): return value.pgText
        }
    }

    public func appendArrayElement(to bytes: inout [UInt8]) {
        switch self {
        case .none: bytes.append(contentsOf: PGArrayLiteral.null)
        case .some(let value): value.appendArrayElement(to: &bytes)
        }
    }
}

extension Array: PGBindable where Element: PGBindable {
    /// A one-dimensional array literal (`{"a","b",NULL}`); cast it in SQL (`$1::text[]`,
    /// `$2::ltree[]`), then `unnest` several arrays side by side for set-based writes.
    public var pgText: String? {
        // Built as UTF-8 bytes (ingest binds arrays of thousands of elements per statement).
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(count * 24 + 2)
        var first = true
        for element in self {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            element.appendArrayElement(to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
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
    /// `2026-11-21T06:43:49.123456Z` (proleptic Gregorian, as PostgreSQL counts; a year before
    /// 1 as `… BC`). Plain arithmetic, no `Calendar`: ingest formats a timestamp per increment.
    /// A time no `timestamptz` holds (NaN, or beyond about ±292,000 years) is clamped, never a
    /// trap; PostgreSQL refuses it with a clear error.
    static func format(_ date: Date) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        append(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `format(date)`'s bytes.
    static func append(_ date: Date, to bytes: inout [UInt8]) {
        let scaled = (date.timeIntervalSince1970 * 1_000_000).rounded()
        let limit = 9.2e18
        let micros = scaled.isNaN ? 0 : Int64(max(-limit, min(limit, scaled)))
        let (seconds, fraction) = floorDivision(micros, 1_000_000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civil(fromDays: days)
        // `value` (0 or more) in decimal, zero-padded to `width` digits.
        func append(_ value: Int64, width: Int) {
            var divisor: Int64 = 1
            var digits = 1
            while digits < width || value / divisor >= 10 {
                divisor *= 10
                digits += 1
            }
            while divisor > 0 {
                bytes.append(UInt8(48 + value / divisor % 10))
                divisor /= 10
            }
        }
        append(year > 0 ? year : 1 - year, width: 4)
        bytes.append(UInt8(ascii: "-"))
        append(month, width: 2)
        bytes.append(UInt8(ascii: "-"))
        append(day, width: 2)
        bytes.append(UInt8(ascii: "T"))
        append(secondOfDay / 3600, width: 2)
        bytes.append(UInt8(ascii: ":"))
        append(secondOfDay / 60 % 60, width: 2)
        bytes.append(UInt8(ascii: ":"))
        append(secondOfDay % 60, width: 2)
        bytes.append(UInt8(ascii: "."))
        append(fraction, width: 6)
        bytes.append(UInt8(ascii: "Z"))
        if year <= 0 { bytes.append(contentsOf: " BC".utf8) }
    }

    /// `value / divisor` rounded down, and the remainder (0 ..< divisor); `divisor` > 0.
    static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (year 0 is 1 BC).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468  // from 0000-03-01
        let (era, dayOfEra) = floorDivision(shifted, 146_097)
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153  // 0 is March
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days from 1970-01-01 to the proleptic Gregorian date (the inverse of `civil(fromDays:)`).
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let year = month <= 2 ? year - 1 : year
        let (era, yearOfEra) = floorDivision(year, 400)
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
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
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        let days = days(year: Int64(year), month: Int64(month), day: Int64(day))
        let whole = Double(days * 86_400 + Int64(hour * 3600 + minute * 60 + second))
        return Date(timeIntervalSince1970: whole + fraction - Double(offsetSeconds))
    }
}
