import Foundation
import Testing
@testable import WebImage

@Suite("HTTP dates")
struct HTTPDateTests {
    @Test("IMF-fixdate: RFC 9110's example, round trips, and what is not one")
    func imfFixdate() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 253_402_300_799)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -62_135_596_800)) == "Mon, 01 Jan 0001 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 253_402_300_800)) == "Sat, 01 Jan 10000 00:00:00 GMT", "past 9999: as it comes")
        for seconds in [0, 951_782_400, 1_795_000_000, 4_102_444_799] as [TimeInterval] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
        }
        for text in ["Sun, 06 Nov 1994 08:49:37 UTC",
                     "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                     "Sun, 0x Nov 1994 08:49:37 GMT", "", "Sun, 06 Nov 1994 08:49:37 GMT "] {
            #expect(HTTPDate.parse(text) == nil, "\(text)")
        }
    }

    @Test("the obsolete forms a recipient must accept: RFC 850 (two-digit years within 50 years of now) and asctime")
    func obsoleteForms() {
        let example = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        let now = Date(timeIntervalSince1970: 1_795_000_000)  // 2026
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == example)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == example)
        #expect(HTTPDate.parse("Sun Nov 06 08:49:37 1994") == example)
        // 2026: "76" is 2076 (50 years on), "77" 1977.
        #expect(HTTPDate.parse("Thursday, 01-Jan-76 00:00:00 GMT", now: now) == HTTPDate.parse("Thu, 01 Jan 2076 00:00:00 GMT"))
        #expect(HTTPDate.parse("Saturday, 01-Jan-77 00:00:00 GMT", now: now) == HTTPDate.parse("Sat, 01 Jan 1977 00:00:00 GMT"))
        #expect(HTTPDate.parse("Wednesday, 25-Nov-26 10:00:00 GMT", now: now) == HTTPDate.parse("Wed, 25 Nov 2026 10:00:00 GMT"))
        for text in ["Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 UTC",
                     "Funday, 06-Nov-94 08:49:37 GMT", "Sunday, 31-Feb-94 08:49:37 GMT", "Sunday, 06-Nov-94 25:49:37 GMT",
                     "Sun Nov  6 08:49:37 94", "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 1994 ", "Sun Foo  6 08:49:37 1994",
                     "Sun Nov  x 08:49:37 1994", ",", "Sunday,", "Sunday, 06-Nov-94 08:49:37 GMTX"] {
            #expect(HTTPDate.parse(text, now: now) == nil, "\(text)")
        }
    }
}
