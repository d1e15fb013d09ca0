public import Foundation

/// Parses and formats RFC 3339 timestamps (`2025-03-01T12:00:00Z`, `2025-03-01T12:00:00.250+02:00`)
/// without a calendar or locale.
enum RFC3339 {
    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `t`, `z` and a space for `T` are
    /// accepted as RFC 3339 allows. Returns nil for anything else, an impossible date, or an
    /// instant outside 1970-01-01T00:00:00Z … 9999-12-31T23:59:59.99997Z (after the offset);
    /// with `clamping`, such an instant is read as the nearest end of that range instead (for a
    /// time that only has to be compared with now, such as a snooze's end).
    static func parse(_ text: String, clamping: Bool = false) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }
        func expect(_ allowed: String) -> Bool {
            guard index < bytes.count, allowed.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
            expect("Tt "), let hour = digits(2), expect(":"), let minute = digits(2), expect(":"),
            let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), (1...daysInMonth(year: year, month: month)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        var fraction = 0.0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                index += 1
            }
            guard index > start, index - start <= 18,
                let value = Double("0." + String(decoding: bytes[start..<index], as: UTF8.self))
            else { return nil }
            fraction = value
        }
        var offset = 0
        if expect("Zz") {
            offset = 0
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHour = digits(2), expect(":"), let offsetMinute = digits(2),
                (0...23).contains(offsetHour), (0...59).contains(offsetMinute)
            else { return nil }
            offset = sign * (offsetHour * 3600 + offsetMinute * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        // The instant must fall in 1970-01-01 … 9999-12-31 UTC (after the offset). Below, the
        // calendars disagree: Foundation's Gregorian calendar is Julian before 1582-10-15, so it
        // would write 1500-03-10 as 1500-02-29, which PostgreSQL refuses (and a batch holding it
        // would fail on every retry); nothing a badge shows happened before 1970 anyway. Above,
        // RFC 3339 has no years. Checked on the Double the Date holds: near 9999 its unit in the
        // last place is about 30 µs, so 23:59:59.999999 rounds to the year 10000.
        let interval = Double(seconds) + fraction
        guard interval >= Self.firstSecond, interval < Self.endSecond else {
            return clamping ? Date(timeIntervalSince1970: min(max(interval, Self.firstSecond), Self.endSecond - 1)) : nil
        }
        return Date(timeIntervalSince1970: interval)
    }

    /// 1970-01-01T00:00:00Z: the first instant read.
    static let firstSecond: Double = 0
    /// 10000-01-01T00:00:00Z in seconds since 1970: the first instant after the years read.
    static let endSecond: Double = 253_402_300_800

    /// Formats `date` in UTC with up to microsecond precision, trailing zeros dropped:
    /// `2025-03-01T12:00:00.25Z`. Years outside 0000–9999 are clamped to that range (``parse(_:)``
    /// reads only years 1970–9999, so what it reads formats back to the same instant).
    static func format(_ date: Date) -> String {
        let limit = endSecond.nextDown  // 9999-12-31T23:59:59.99997Z, the last Double before 10000
        let zeroSecond = -62_167_219_200.0  // 0000-01-01T00:00:00Z
        let interval = min(max(date.timeIntervalSince1970, zeroSecond), limit)
        let micros = Int64((interval * 1_000_000).rounded())
        var seconds = micros / 1_000_000
        var fraction = micros % 1_000_000
        if fraction < 0 {
            fraction += 1_000_000
            seconds -= 1
        }
        var days = Int(seconds / 86_400)
        var secondOfDay = Int(seconds % 86_400)
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let (year, month, day) = civilFromDays(days)
        var text = pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
        if fraction > 0 {
            var digits = pad(Int(fraction), 6)
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text + "Z"
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(width - text.count, 0)) + text
    }

    static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}

extension Date {
    /// The time an RFC 3339 timestamp from 1970 to 9999 names (`2025-03-01T12:00:00Z`,
    /// `2025-03-01T14:00:00.5+02:00`), to the microsecond; nil for anything else. The one parser
    /// of events' times, for the API and the command line too.
    public init?(rfc3339 text: String) {
        guard let date = RFC3339.parse(text) else { return nil }
        self = date.toMicroseconds
    }

    /// Parses an RFC 3339 timestamp of any year 0000–9999, an instant before 1970 read as
    /// 1970-01-01T00:00:00Z and one after 9999 as 9999-12-31T23:59:59Z: for a time that is only
    /// compared with now (a snooze's end), where that changes nothing. Nil for anything else.
    public init?(rfc3339Clamping text: String) {
        guard let date = RFC3339.parse(text, clamping: true) else { return nil }
        self = date.toMicroseconds
    }

    /// The time as events and answers write it: UTC RFC 3339, to the microsecond
    /// (`2025-03-01T12:00:00.25Z`).
    public var rfc3339: String { RFC3339.format(self) }
}
