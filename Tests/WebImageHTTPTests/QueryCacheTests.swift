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
    }

    @Test("the route is the path's last non-empty segment, as splitting on / gives it")
    func lastSegment() {
        for path in ["/thumbnail", "/img/thumbnail/", "/", "", "//x//", "thumbnail", "/a/b", "/é/ü"] {
            #expect(ImageEndpoint.lastSegment(path) == path.split(separator: "/").last, "\(path)")
        }
    }
}
