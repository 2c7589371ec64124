import Foundation
import Testing
@testable import ThumbnailService

@Suite("EncodedCache")
struct EncodedCacheTests {
    func entry(_ size: Int) -> EncodedCache.Entry { EncodedCache.Entry(data: Data(count: size), etag: "\"\(size)\"", size: nil) }

    @Test("over its limit it drops the least recently used entries to three quarters of it")
    func eviction() {
        let cache = EncodedCache(limit: 1000)
        for index in 0..<9 { cache.set(entry(100), forKey: "k\(index)") }
        #expect(cache.totalBytes == 900 && cache.count == 9)
        _ = cache.entry(forKey: "k0")                       // k0 becomes the most recently used
        cache.set(entry(200), forKey: "k9")                 // 1100 > 1000: trim to at most 750
        #expect(cache.totalBytes <= 750)
        #expect(cache.entry(forKey: "k0") != nil && cache.entry(forKey: "k9") != nil, "recently used entries stay")
        #expect(cache.entry(forKey: "k1") == nil && cache.entry(forKey: "k2") == nil, "the oldest go first")
    }

    @Test("replacing an entry keeps the byte count right; entries over a quarter of the limit are not kept")
    func accounting() {
        let cache = EncodedCache(limit: 1000)
        cache.set(entry(100), forKey: "a")
        cache.set(entry(50), forKey: "a")
        #expect(cache.totalBytes == 50 && cache.count == 1)
        cache.set(entry(300), forKey: "big")
        #expect(cache.entry(forKey: "big") == nil && cache.totalBytes == 50)
    }
}
