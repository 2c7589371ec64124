import Foundation
import HTTPTypes
import Testing
import WebImage
@testable import WebImageHTTP

@Suite("ImageEndpoint: parsed queries kept for warm requests")
struct QueryCacheTests {
    @Test("a repeated query is parsed once; its client hints are part of what is kept; a query that fails is never kept; the cache is bounded")
    func keptQueries() async throws {
        let f = try await EndpointFixture.make(["thumbnail.clientHints": "true"])
        defer { Task { await f.close() } }
        let path = "/thumbnail?url=\(f.source("photo-1.jpg"))&h=300&format=jpeg"
        let first = await f.get(path)
        #expect(first.status == .ok, "\(String(decoding: first.body, as: UTF8.self))")
        #expect(f.endpoint.parsedQueries.count == 1)
        let again = await f.get(path)
        #expect(again.headerFields[.imageSource] == "memory" && again.body == first.body)
        #expect(f.endpoint.parsedQueries.count == 1, "the second request parsed nothing new")

        // The same text with a width hint is another request: another box, another entry.
        let hinted = await f.get(path, [HTTPField.Name("Sec-CH-Width")!: "100"])
        #expect(hinted.status == .ok && hinted.body != first.body)
        #expect(f.endpoint.parsedQueries.count == 2)
        let hintedAgain = await f.get(path, [HTTPField.Name("Sec-CH-Width")!: "100"])
        #expect(hintedAgain.body == hinted.body && f.endpoint.parsedQueries.count == 2)

        // A query that does not parse is a 400 each time and is not kept.
        for _ in 0..<2 {
            let bad = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=abc")
            #expect(bad.status == .badRequest)
        }
        #expect(f.endpoint.parsedQueries.count == 2)

        // Bounded: past its capacity it starts over.
        let cache = ThumbnailQueryCache()
        let query = try ThumbnailQuery(QueryParameters("url=http%3A%2F%2Fh%2Fa.jpg&w=10"), settings: f.endpoint.settings)
        for index in 0...ThumbnailQueryCache.capacity {
            _ = cache.query(.init(query: "q\(index)", hints: nil)) { query }
            #expect(cache.count <= ThumbnailQueryCache.capacity)
        }
        #expect(cache.count == 1)
        // A query past maxQueryBytes is answered and not kept.
        // (Made long by `s=`, which a service without a signing key does not read.)
        let long = "url=http%3A%2F%2Fh%2Fa.jpg&w=10&s=" + String(repeating: "x", count: ThumbnailQueryCache.maxQueryBytes)
        let longPath = "/thumbnail?url=\(f.source("photo-1.jpg"))&h=300&format=jpeg&s=" + String(repeating: "x", count: ThumbnailQueryCache.maxQueryBytes)
        let before = f.endpoint.parsedQueries.count
        let answered = await f.get(longPath)
        #expect(answered.status == .ok && f.endpoint.parsedQueries.count == before, "\(answered.status)")
        _ = cache.query(.init(query: long, hints: nil)) { query }
        #expect(cache.count == 1)
    }

    @Test("the route is the path's last non-empty segment, as splitting on / gives it")
    func lastSegment() {
        for path in ["/thumbnail", "/img/thumbnail/", "/", "", "//x//", "thumbnail", "/a/b", "/é/ü"] {
            #expect(ImageEndpoint.lastSegment(path) == path.split(separator: "/").last, "\(path)")
        }
    }
}

@Suite("ThumbnailQuery: the source URL and client hints")
struct ThumbnailQueryTests {
    @Test("a url= with a control character, raw or escaped, is 400 invalidURL naming it: passed on, it only makes the origin fail")
    func controlCharacters() throws {
        for (value, named) in [("http%3A%2F%2Fh%2Fa.jpg%00", "U+0000"), ("http%3A%2F%2Fh%2Fa.jpg%0A", "U+000A"),
                               ("http%3A%2F%2Fh%2Fa.jpg%7F", "U+007F"), ("http%3A%2F%2Fh%2Fa%2500.jpg", "U+0000"),
                               ("http%3A%2F%2Fh%2Fa%250d%250a.jpg", "U+000D"),
                               // With a character a URL cannot hold beside it (a space), the escape is still seen.
                               ("http%3A%2F%2Fh%2Fphoto%20x.jpg%250a", "U+000A"), ("http%3A%2F%2Fh%2Fa%20b%09.jpg", "U+0009")] {
            do {
                _ = try ThumbnailQuery.sourceURL(QueryParameters("url=\(value)"))
                Issue.record("\(value) was taken")
            } catch let error as WebImageError {
                #expect(error.code == .invalidURL && error.message.contains(named), "\(value): \(error.message)")
            }
        }
        // Escapes of other bytes stay as they are, also beside a character that must be escaped.
        #expect(try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2Fh%2Fa%2520b%25C3%25A9.jpg")).absoluteString == "http://h/a%20b%C3%A9.jpg")
        #expect(try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2Fh%2Fphoto%20x%252F.jpg%3Fv%3D1%26w%3D2")).absoluteString == "http://h/photo%20x%2F.jpg?v=1&w=2")
        #expect(throws: WebImageError.self) { try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2Fh%2Fa%25zz.jpg")) }
    }

    @Test("a url= that names a user (user@, user:password@, even an empty one) is 400 invalidURL: its credentials are not sent on; an @ in the path or query is no user")
    func userInfo() throws {
        for value in ["http%3A%2F%2Fuser%40h%2Fa.jpg", "http%3A%2F%2Fu%3Ap%40h%2Fa.jpg", "https%3A%2F%2F%40h%2Fa.jpg", "http%3A%2F%2F%3Ap%40h%3A8080%2Fa.jpg"] {
            let error = #expect(throws: WebImageError.self) { try ThumbnailQuery.sourceURL(QueryParameters("url=\(value)")) }
            #expect(error?.code == .invalidURL && error?.message.contains("names a user") == true, "\(value): \(String(describing: error))")
            #expect(error?.message.contains("u:p") == false && error?.message.contains(":p@") == false, "the password is not quoted: \(String(describing: error))")
        }
        #expect(try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2Fh%2Fa%40b.jpg%3Fby%3Dme%40x")).absoluteString == "http://h/a@b.jpg?by=me@x")
    }

    @Test("url= spellings HTTP reads as one resource give one URL: scheme and host case, a port's leading zeros or the scheme's own port, dot segments, an empty query")
    func oneSpelling() throws {
        func source(_ text: String) throws -> String {
            try ThumbnailQuery.sourceURL(QueryParameters("url=" + text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)).absoluteString
        }
        let canonical = "http://127.0.0.1:24101/img/good.webp"
        for spelling in ["HTTP://127.0.0.1:24101/img/good.webp", "hTtP://127.0.0.1:24101/img/good.webp", "http://127.0.0.1:024101/img/good.webp",
                         "http://127.0.0.1:0000024101/img/good.webp", "http://127.0.0.1:24101/img/./good.webp", "http://127.0.0.1:24101/img/x/../good.webp",
                         "http://127.0.0.1:24101/img/good.webp?", "http://127.0.0.1:24101/./img/good.webp"] {
            #expect(try source(spelling) == canonical, "\(spelling)")
        }
        #expect(try source("http://example.com:80/a.jpg") == "http://example.com/a.jpg")
        for spelling in ["http://LOCALHOST:8701/Case.webp", "http://LocalHost:8701/Case.webp", "HTTP://lOcAlHoSt:08701/Case.webp"] {
            #expect(try source(spelling) == "http://localhost:8701/Case.webp", "a host's case: \(spelling); the path's is kept")
        }
        #expect(try source("http://[2001:DB8::1]:8080/a.jpg") == "http://[2001:db8::1]:8080/a.jpg")
        #expect(try source("https://example.com:443/a.jpg?x=1") == "https://example.com/a.jpg?x=1")
        #expect(try source("https://example.com:8443/a%20b/c.jpg?q=%2F") == "https://example.com:8443/a%20b/c.jpg?q=%2F", "escapes and the query kept")
        #expect(try source("http://example.com/a/b/") == "http://example.com/a/b/" && source("http://example.com") == "http://example.com")
        #expect(try source("http://example.com/../../a.jpg") == "http://example.com/a.jpg")
    }

    @Test("numbers in crop=fp: and in t= are plain decimals: hexadecimal, exponents, inf, nan and a leading + are refused; plain forms pass")
    func plainNumbers() throws {
        for spelling in ["fp:0x1:0", "fp:0.5:0x0p0", "fp:1e-1:0.5", "fp:+0.5:0.5", "fp:inf:0", "fp:nan:0.5", "fp: 0.5:0.5", "fp:.:0"] {
            #expect(CropFocus(parsing: spelling) == nil, "\(spelling)")
        }
        for (spelling, x) in [("fp:0.5:0", 0.5), ("fp:.25:1", 0.25), ("fp:1:0", 1.0), ("fp:0:1.", 0.0)] {
            guard case .point(let parsedX, _)? = CropFocus(parsing: spelling) else { Issue.record("\(spelling) did not parse"); continue }
            #expect(parsedX == x, "\(spelling)")
        }
        #expect(plainDecimal("-2.5") == -2.5 && plainDecimal("10") == 10 && plainDecimal("-") == nil && plainDecimal("1.2.3") == nil)
        #expect(plainDecimal(String(repeating: "1", count: 33)) == nil)
    }

    @Test("an IP address written in another form than its shortest (IPv4 as 127.10 or hex, IPv6 with zeros, IPv4 mapped into IPv6) is 400 naming that form, as is an IPv6 zone; the forms themselves, names and case pass")
    func ipv4Spellings() throws {
        for (host, dotted) in [("127.10", "127.0.0.10"), ("2130706442", "127.0.0.10"), ("0x7f00000a", "127.0.0.10"), ("0177.0.0.10", "127.0.0.10"),
                               ("127.000.000.010", "127.0.0.8"), ("0x7f.0.0.10", "127.0.0.10"), ("127.0.10", "127.0.0.10")] {
            let error = #expect(throws: WebImageError.self) { try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2F\(host)%3A8080%2Fa.jpg")) }
            #expect(error?.code == .invalidURL && error?.message.contains("write it as \(dotted)") == true, "\(host): \(String(describing: error))")
        }
        // IPv6: a longer form of one address, and an IPv4 address mapped into IPv6.
        for (host, canonical) in [("[0::1]", "[::1]"), ("[0:0:0:0:0:0:0:1]", "[::1]"), ("[::00:1]", "[::1]"), ("[2001:db8:0::1]", "[2001:db8::1]"),
                                  ("[::ffff:7f00:a]", "127.0.0.10"), ("[::ffff:127.0.0.10]", "127.0.0.10"), ("[0::FFFF:7F00:000A]", "127.0.0.10")] {
            let escaped = host.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let error = #expect(throws: WebImageError.self) { try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2F\(escaped)%3A8080%2Fa.jpg")) }
            #expect(error?.code == .invalidURL && error?.message.contains("write it as \(canonical)") == true, "\(host): \(String(describing: error))")
        }
        let zoned = #expect(throws: WebImageError.self) { try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2F%5Bfe80%3A%3A1%2525lo%5D%2Fa.jpg")) }
        #expect(zoned?.code == .invalidURL && zoned?.message.contains("zone") == true, "\(String(describing: zoned))")
        for host in ["127.0.0.10", "images.example", "1.example", "%5B%3A%3A1%5D", "0x7f.example", "%5B2001%3ADB8%3A%3A1%5D", "%5B2001%3Adb8%3A%3A1%5D"] {
            #expect(throws: Never.self) { try ThumbnailQuery.sourceURL(QueryParameters("url=http%3A%2F%2F\(host)%2Fa.jpg")) }
        }
    }

    @Test("the viewport's width is times the DPR as hinted, also when that DPR is lowered to fit the query's own side")
    func viewportWidth() throws {
        var settings = ImageEndpoint.Settings()
        settings.clientHints = true
        let hints = ThumbnailQuery.ClientHints(dpr: 2, width: nil, viewportWidth: 300)
        for h in [500, 1024, 2000] {
            let query = try ThumbnailQuery(QueryParameters("url=http%3A%2F%2Fh%2Fa.jpg&h=\(h)"), settings: settings, hints: hints)
            #expect(query.box.width == 600, "h=\(h): \(query.box)")
        }
    }
}
