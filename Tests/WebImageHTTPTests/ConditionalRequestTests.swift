import Foundation
import HTTPTypes
import Testing
import WebImage
import WebImageHTTP

@Suite("ConditionalRequest, QueryParameters, HostAllowList, URLSigner")
struct HTTPPartsTests {
    @Test("If-None-Match: weak comparison, lists, spacing, *, and junk")
    func ifNoneMatch() {
        let tag = "\"abc-12\""
        #expect(ConditionalRequest.ifNoneMatch(tag, matches: tag))
        #expect(ConditionalRequest.ifNoneMatch("W/\"abc-12\"", matches: tag))
        #expect(ConditionalRequest.ifNoneMatch("\"x\",W/\"abc-12\"", matches: tag))
        #expect(ConditionalRequest.ifNoneMatch(" \"x\" ,\t \"abc-12\"", matches: tag))
        #expect(ConditionalRequest.ifNoneMatch("*", matches: tag))
        #expect(!ConditionalRequest.ifNoneMatch("\"abc-1\"", matches: tag))
        #expect(!ConditionalRequest.ifNoneMatch("abc-12", matches: tag), "unquoted is not a tag")
        #expect(!ConditionalRequest.ifNoneMatch("\"abc-12", matches: tag))
        #expect(!ConditionalRequest.ifNoneMatch("", matches: tag))
        #expect(ConditionalRequest.ifNoneMatch("junk, \"abc-12\"", matches: tag))
    }

    @Test("If-Match: strong comparison (a weak tag never matches), lists, *; then If-Unmodified-Since; 412 before 304, in RFC 9110's order")
    func preconditions() {
        let tag = "\"abc-12\""
        #expect(ConditionalRequest.ifMatch(tag, matches: tag))
        #expect(ConditionalRequest.ifMatch(" \"x\" ,\t\"abc-12\"", matches: tag))
        #expect(ConditionalRequest.ifMatch("*", matches: tag))
        #expect(!ConditionalRequest.ifMatch("W/\"abc-12\"", matches: tag), "weak never matches strongly")
        #expect(!ConditionalRequest.ifMatch(tag, matches: "W/" + tag))
        #expect(ConditionalRequest.ifMatch("*", matches: "W/" + tag))
        #expect(!ConditionalRequest.ifMatch("\"abc-1\"", matches: tag))
        #expect(!ConditionalRequest.ifMatch("abc-12", matches: tag), "unquoted is not a tag")
        #expect(!ConditionalRequest.ifMatch("", matches: tag))

        let modified = Date(timeIntervalSince1970: 1_700_000_000)
        func outcome(_ fields: HTTPFields) -> ConditionalRequest.Outcome {
            ConditionalRequest.evaluate(fields, entityTag: tag, lastModified: modified)
        }
        let before = HTTPDate.format(modified.addingTimeInterval(-60)), after = HTTPDate.format(modified.addingTimeInterval(60))
        #expect(outcome([:]) == .proceed)
        #expect(outcome([.ifMatch: tag]) == .proceed)
        #expect(outcome([.ifMatch: "\"other\""]) == .preconditionFailed)
        #expect(outcome([.ifMatch: "\"other\"", .ifNoneMatch: tag]) == .preconditionFailed, "If-Match is evaluated first")
        #expect(outcome([.ifMatch: tag, .ifNoneMatch: tag]) == .notModified)
        #expect(outcome([.ifUnmodifiedSince: before]) == .preconditionFailed)
        #expect(outcome([.ifUnmodifiedSince: after]) == .proceed)
        #expect(outcome([.ifUnmodifiedSince: "not a date"]) == .proceed, "an invalid date is ignored")
        #expect(outcome([.ifMatch: tag, .ifUnmodifiedSince: before]) == .proceed, "If-Unmodified-Since only without If-Match")
        #expect(ConditionalRequest.evaluate([.ifMatch: "*"], entityTag: nil, lastModified: nil) == .proceed, "any representation")
        #expect(ConditionalRequest.evaluate([.ifMatch: tag], entityTag: nil, lastModified: nil) == .preconditionFailed, "no tag to match")
    }

    @Test("query parameters: percent-decoding, + kept, first of a repeated name, bad escapes as written; a request's values over a preset's")
    func query() {
        let q = QueryParameters("url=http%3A%2F%2Fh%2Fa+b.jpg&w=10&w=20&x&bad=%zz%4")
        #expect(q["url"] == "http://h/a+b.jpg" && q["w"] == "10" && q["x"] == "" && q["bad"] == "%zz%4" && q["none"] == nil)
        #expect(q.names == ["url", "w", "x", "bad"])
        let merged = QueryParameters("w=5&format=png").filling(from: QueryParameters("w=64&h=64&format=jpeg"))
        #expect(merged["w"] == "5" && merged["h"] == "64" && merged["format"] == "png")
        // Bytes, as RFC 3986 reads a query: empty parts skipped, the first `=` splits,
        // a combining mark after `&` does not hide it, escapes of UTF-8 make text and
        // bytes that are no UTF-8 become U+FFFD; a `%` at the end stays.
        let bytes = QueryParameters("&&a=b=c&\u{301}n=%C3%A9&raw=é&bad=%FF&end=%")
        #expect(bytes.pairs.map(\.name) == ["a", "\u{301}n", "raw", "bad", "end"])
        #expect(bytes["a"] == "b=c" && bytes["\u{301}n"] == "é" && bytes["raw"] == "é" && bytes["bad"] == "\u{FFFD}" && bytes["end"] == "%")
    }

    @Test("allow-list patterns, and signatures over path and query")
    func allowAndSign() throws {
        let list = try #require(HostAllowList(["images.example.com", "*.cdn.example.com", "h:8443"]))
        #expect(list.allows(URL(string: "https://images.example.com/a.jpg")!))
        #expect(list.allows(URL(string: "http://a.cdn.example.com/a.jpg")!))
        #expect(!list.allows(URL(string: "http://cdn.example.com/a.jpg")!))
        #expect(list.allows(URL(string: "https://h:8443/a")!) && !list.allows(URL(string: "https://h/a")!))
        #expect(HostAllowList(["a/b"]) == nil && HostAllowList(["h:0"]) == nil)
        let signer = try #require(URLSigner(key: "0123456789abcdef"))
        #expect(URLSigner(key: "short") == nil)
        let signed = signer.sign("/thumbnail?url=x&w=1")
        let query = String(signed.split(separator: "?", maxSplits: 1)[1])
        #expect(signer.verify(path: "/thumbnail", query: query))
        #expect(!signer.verify(path: "/placeholder", query: query))
        #expect(!signer.verify(path: "/thumbnail", query: query + "&s=x"), "two signatures")
        // RFC 4231, test case 1 (key: 20 bytes of 0x0b, data "Hi There"), in base64url
        // without padding: the signature is HMAC-SHA256 as `openssl dgst -hmac` makes it.
        let rfc = try #require(URLSigner(key: String(repeating: "\u{0B}", count: 20)))
        #expect(rfc.signature(of: "Hi There") == "sDRMYdjbOFNcqK_OrwvxK4gdwgDJgz2nJuk3bC4yz_c")
    }
}
