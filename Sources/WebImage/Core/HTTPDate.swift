package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// RFC 9110 IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form of
/// `Last-Modified`, `If-Modified-Since` and a dated `Retry-After`. Formatted and
/// parsed with `gmtime_r` and `timegm`: a `DateFormatter` per call is costly on
/// Linux, and this format has no locale in it. The obsolete RFC 850 and asctime
/// forms are read too, as RFC 9110 asks of a recipient; only IMF-fixdate is written.
package enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    package static func format(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        // Years past 9999 do not fit the fixed form: written as they come.
        guard (0...9999).contains(year) else {
            func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
            return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(year) "
                + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
        }
        // 29 bytes at fixed places, written in place (interpolation was a few
        // percent of a warm request).
        return String(unsafeUninitializedCapacity: 29) { out in
            func put(_ text: String, at index: Int) { for (offset, byte) in text.utf8.enumerated() { out[index + offset] = byte } }
            func digits(_ value: Int, _ count: Int, at index: Int) {
                var value = value
                for place in stride(from: index + count - 1, through: index, by: -1) {
                    out[place] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(days[Int(parts.tm_wday)], at: 0)
            put(", ", at: 3)
            digits(Int(parts.tm_mday), 2, at: 5)
            out[7] = 32
            put(months[Int(parts.tm_mon)], at: 8)
            out[11] = 32
            digits(year, 4, at: 12)
            out[16] = 32
            digits(Int(parts.tm_hour), 2, at: 17)
            out[19] = UInt8(ascii: ":")
            digits(Int(parts.tm_min), 2, at: 20)
            out[22] = UInt8(ascii: ":")
            digits(Int(parts.tm_sec), 2, at: 23)
            put(" GMT", at: 25)
            return 29
        }
    }

    private static let longDays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

    /// A date's fields as a timestamp writes them.
    private struct Fields {
        var year: Int32, month: Int32, day: Int32, hour: Int32, minute: Int32, second: Int32
    }

    /// The date an HTTP-date names (RFC 9110 section 5.6.7: a recipient accepts all
    /// three forms), or nil for any other text or an impossible date (31 February):
    /// - IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`;
    /// - RFC 850, `Sunday, 06-Nov-94 08:49:37 GMT`, whose two-digit year is the
    ///   most recent one with those digits that is not more than 50 years after `now`;
    /// - asctime, `Sun Nov  6 08:49:37 1994`.
    package static func parse(_ text: String) -> Date? { parse(text, now: Date()) }

    /// ``parse(_:)`` with the present given (for an RFC 850 date's century).
    package static func parse(_ text: String, now: Date) -> Date? {
        let bytes = Array(text.utf8)
        guard let fields = imfFixdate(bytes) ?? rfc850(bytes, now: now) ?? asctime(bytes) else { return nil }
        guard (1...31).contains(fields.day), fields.hour < 24, fields.minute < 60, fields.second < 61 else { return nil }
        var parts = tm()
        parts.tm_year = fields.year - 1900
        parts.tm_mon = fields.month
        parts.tm_mday = fields.day
        parts.tm_hour = fields.hour
        parts.tm_min = fields.minute
        parts.tm_sec = fields.second
        let seconds = timegm(&parts)
        // timegm normalises 31 February into March: refuse what it had to move.
        guard parts.tm_mday == fields.day, parts.tm_mon == fields.month else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// The digits in `range`, or nil if any byte there is not one.
    private static func number(_ bytes: [UInt8], _ range: Range<Int>) -> Int32? {
        var value: Int32 = 0
        for byte in bytes[range] {
            guard (48...57).contains(byte) else { return nil }
            value = value * 10 + Int32(byte - 48)
        }
        return value
    }

    private static func text(_ bytes: [UInt8], _ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }

    /// `hh:mm:ss` at `index`: (hour, minute, second).
    private static func time(_ bytes: [UInt8], at index: Int) -> (Int32, Int32, Int32)? {
        guard bytes.count >= index + 8, bytes[index + 2] == UInt8(ascii: ":"), bytes[index + 5] == UInt8(ascii: ":"),
              let hour = number(bytes, index..<index + 2), let minute = number(bytes, index + 3..<index + 5),
              let second = number(bytes, index + 6..<index + 8) else { return nil }
        return (hour, minute, second)
    }

    /// "Sun, 06 Nov 1994 08:49:37 GMT": 29 bytes at fixed places.
    private static func imfFixdate(_ bytes: [UInt8]) -> Fields? {
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 32, bytes[7] == 32, bytes[11] == 32,
              bytes[16] == 32, bytes[25] == 32, text(bytes, 26..<29) == "GMT", days.contains(text(bytes, 0..<3)),
              let month = months.firstIndex(of: text(bytes, 8..<11)),
              let day = number(bytes, 5..<7), let year = number(bytes, 12..<16), let (hour, minute, second) = time(bytes, at: 17)
        else { return nil }
        return Fields(year: year, month: Int32(month), day: day, hour: hour, minute: minute, second: second)
    }

    /// "Sunday, 06-Nov-94 08:49:37 GMT": the long day name, then 24 bytes at fixed places.
    private static func rfc850(_ bytes: [UInt8], now: Date) -> Fields? {
        guard let comma = bytes.firstIndex(of: UInt8(ascii: ",")), longDays.contains(text(bytes, 0..<comma)),
              bytes.count == comma + 24 else { return nil }
        let at = comma + 1  // " 06-Nov-94 08:49:37 GMT"
        guard bytes[at] == 32, bytes[at + 3] == UInt8(ascii: "-"), bytes[at + 7] == UInt8(ascii: "-"), bytes[at + 10] == 32,
              bytes[at + 19] == 32, text(bytes, at + 20..<at + 23) == "GMT",
              let month = months.firstIndex(of: text(bytes, at + 4..<at + 7)),
              let day = number(bytes, at + 1..<at + 3), let twoDigits = number(bytes, at + 8..<at + 10),
              let (hour, minute, second) = time(bytes, at: at + 11)
        else { return nil }
        // RFC 9110: a year that appears more than 50 years in the future is the
        // most recent past year with the same last two digits.
        var current = tm()
        var seconds = time_t(now.timeIntervalSince1970.rounded(.down))
        gmtime_r(&seconds, &current)
        let thisYear = Int32(current.tm_year) + 1900
        var year = thisYear - thisYear % 100 + twoDigits
        if year > thisYear + 50 { year -= 100 }
        return Fields(year: year, month: Int32(month), day: day, hour: hour, minute: minute, second: second)
    }

    /// "Sun Nov  6 08:49:37 1994": 24 bytes at fixed places, the day padded with a space.
    private static func asctime(_ bytes: [UInt8]) -> Fields? {
        guard bytes.count == 24, bytes[3] == 32, bytes[7] == 32, bytes[10] == 32, bytes[19] == 32,
              days.contains(text(bytes, 0..<3)), let month = months.firstIndex(of: text(bytes, 4..<7)),
              let day = bytes[8] == 32 ? number(bytes, 9..<10) : number(bytes, 8..<10),
              let year = number(bytes, 20..<24), let (hour, minute, second) = time(bytes, at: 11)
        else { return nil }
        return Fields(year: year, month: Int32(month), day: day, hour: hour, minute: minute, second: second)
    }
}
