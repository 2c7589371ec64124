import Foundation
import Testing
import WebImageTestSupport
import WebImage
import WebImageTesting

/// A store that fails every call, as a shared tier that is down does.
struct FailingStore: CacheStore {
    func fail() -> WebImageError { WebImageError(.storeFailed, "the shared tier is down") }
    func entry(forKey key: String) async throws -> CacheEntry? { throw fail() }
    func metadata(forKey key: String) async throws -> CacheMetadata? { throw fail() }
    func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws { throw fail() }
    func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws { throw fail() }
    func removeData(forKey key: String) async throws { throw fail() }
    func removeAll() async throws { throw fail() }
    func removeExpired() async throws { throw fail() }
    var totalSize: Int { get async throws { throw fail() } }
    var count: Int { get async throws { throw fail() } }
}

@Suite("TieredCacheStore")
struct TieredCacheStoreTests {
    @Test("passes CacheStoreConformance (local and shared in memory)")
    func conformance() async throws {
        try await CacheStoreConformance {
            TieredCacheStore(local: MemoryCacheStore(limits: .unlimited), shared: MemoryCacheStore(limits: .unlimited))
        }.run()
    }

    @Test("a read tries local, then shared; a shared hit says so and is copied into the local store")
    func readOrder() async throws {
        let local = MemoryCacheStore(limits: .unlimited), shared = MemoryCacheStore(limits: .unlimited)
        let tiered = TieredCacheStore(local: local, shared: shared)
        try await shared.setData(Data([1]), forKey: "k", metadata: CacheMetadata(etag: "e"))
        let first = try #require(try await tiered.entry(forKey: "k"))
        #expect(first.source == .shared && first.data == Data([1]) && first.metadata.etag == "e")
        #expect(try await eventually { try await local.data(forKey: "k") == Data([1]) }, "copied into the local tier")
        #expect(try await tiered.entry(forKey: "k")?.source == .local)
        #expect(try await tiered.entry(forKey: "missing") == nil)
    }

    @Test("a write reaches both tiers (shared in the background); a remove and removeAll reach both")
    func writesAndRemoves() async throws {
        let local = MemoryCacheStore(limits: .unlimited), shared = MemoryCacheStore(limits: .unlimited)
        let tiered = TieredCacheStore(local: local, shared: shared)
        try await tiered.setData(Data([2]), forKey: "a")
        try await tiered.setData(Data([3]), forKey: "b")
        #expect(try await local.data(forKey: "a") == Data([2]))
        #expect(try await eventually { try await shared.count == 2 })
        try await tiered.removeData(forKey: "a")
        let (localA, sharedA) = (try await local.data(forKey: "a"), try await shared.data(forKey: "a"))
        #expect(localA == nil && sharedA == nil)
        try await tiered.removeAll()
        let (localCount, sharedCount) = (try await local.count, try await shared.count)
        #expect(localCount == 0 && sharedCount == 0)
    }

    @Test("a shared tier that fails is a miss, never a failure; the local tier goes on")
    func sharedDown() async throws {
        let local = MemoryCacheStore(limits: .unlimited)
        let tiered = TieredCacheStore(local: local, shared: FailingStore())
        #expect(try await tiered.entry(forKey: "k") == nil)
        #expect(try await tiered.metadata(forKey: "k") == nil)
        try await tiered.setData(Data([4]), forKey: "k")
        #expect(try await tiered.data(forKey: "k") == Data([4]))
        try await tiered.updateMetadata(CacheMetadata(etag: "x"), forKey: "k")
        try await tiered.removeExpired()
        try await tiered.removeData(forKey: "k")
        #expect(try await local.count == 0)
        await tiered.close()
        #expect(tiered.pendingWrites.count == 0)
    }

    @Test("shared writes are bounded: past the bound they are dropped, not queued")
    func bounded() async throws {
        let shared = GatedStore()
        let tiered = TieredCacheStore(local: MemoryCacheStore(limits: .unlimited), shared: shared, limits: .init(maxPendingWrites: 2))
        for index in 0..<6 { try await tiered.setData(Data([UInt8(index)]), forKey: "k\(index)") }
        #expect(tiered.pendingWrites.count == 2, "two writes wait for the shared tier; four were dropped")
        shared.open()
        #expect(await eventually { tiered.pendingWrites.count == 0 })
        #expect(try await shared.count == 2)
    }

    @Test("through the manager: a hit in the shared tier is cacheType .shared")
    func managerSharedHit() async throws {
        let local = MemoryCacheStore(limits: .unlimited), shared = MemoryCacheStore(limits: .unlimited)
        let h = Harness(store: TieredCacheStore(local: local, shared: shared))
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 3, height: 3))
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        #expect(try await eventually { try await shared.count == 1 })
        // Another host: its memory and local tiers are empty.
        h.manager.memoryCache?.removeAll()
        try await local.removeAll()
        let result = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(result.cacheType == .shared && result.image?.pixelSize == PixelSize(width: 3, height: 3))
        let bytes = try await h.manager.loadImage(with: h.url("a.timg"), options: [.avoidDecode, .fromCacheOnly])
        #expect(bytes.data == TestCoder.encode(width: 3, height: 3))
        #expect(h.loader.requestCount == 1, "the origin was asked once")
    }
}
