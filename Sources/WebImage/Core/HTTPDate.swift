package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// RFC 9110 IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form of
/// `Last-Modified`, `If-Modified-Since` and a dated `Retry-After`. Formatted and
/// parsed with `gmtime_r` and `timegm`: a `DateFormatter` per call is costly on
/// Linux, and this format has no locale in it. The obsolete RFC 850 and asctime
/// forms are not read: an origin that sends them gets no pause from its
/// `Retry-After`, which is the safe side.
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

    /// The date an IMF-fixdate names, or nil for any other text (or an impossible
    /// date, such as 31 February).
    package static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        // "Sun, 06 Nov 1994 08:49:37 GMT": 29 bytes at fixed places.
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 32, bytes[7] == 32, bytes[11] == 32,
              bytes[16] == 32, bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"), bytes[25] == 32,
              String(decoding: bytes[26...], as: UTF8.self) == "GMT",
              days.contains(String(decoding: bytes[0..<3], as: UTF8.self)),
              let month = months.firstIndex(of: String(decoding: bytes[8..<11], as: UTF8.self))
        else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[range] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int32(byte - 48)
            }
            return value
        }
        guard let day = number(5..<7), let year = number(12..<16), let hour = number(17..<19),
              let minute = number(20..<22), let second = number(23..<25),
              (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        let seconds = timegm(&parts)
        // timegm normalises 31 February into March: refuse what it had to move.
        guard parts.tm_mday == day, parts.tm_mon == Int32(month) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
