import Foundation
import Synchronization
import Testing
import WebImage
@testable import WebImageLMDB

/// A load of bytes that the memory tier misses is read from LMDB on the calling
/// thread (`ImmediateCacheReading`), before the manager makes a plan. These check
/// that it answers what the store's async read answers, and that everything but a
/// hit (a miss, a damaged entry, a refused redirect, a shared tier) still goes the
/// usual way.
@Suite("ImageManager: LMDB hits read on the calling thread")
struct LMDBManagerHitTests {
    static let url = URL(string: "https://origin.test/photos/a.jpg")!
    static let bytesOnly: ImageOptions = [.avoidDecode, .fromCacheOnly]

    static func manager(_ store: any CacheStore) -> ImageManager {
        var configuration = ImageManager.Configuration()
        configuration.store = store
        configuration.memoryCache = nil
        return ImageManager(configuration: configuration)
    }

    /// A clock the test moves.
    final class TestClock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
        var read: @Sendable () -> Date { { self.now.withLock { $0 } } }
    }

    @Test("a bytes hit is the store's entry: bytes, XXH3 checksum, stored date; the same as through a pooled read; its access date is kept")
    func sameAsPooled() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited, clock: clock.read)
        let manager = Self.manager(store)
        let key = manager.cacheKey(for: Self.url)
        let payload = LMDBIntegrityTests.payload(7)
        try await store.setData(payload, forKey: key, metadata: CacheMetadata(contentType: "image/jpeg"))
        let storedAt = clock.now.withLock { $0 }

        #expect(store.immediateEntry(forKey: key)?.data == payload, "read on the calling thread")
        #expect(store.immediateEntry(forKey: "https://origin.test/other.jpg") == nil, "a miss")

        clock.advance(60)
        let hit = try await manager.loadImage(with: Self.url, options: Self.bytesOnly)
        #expect(hit.cacheType == .disk && hit.data == payload && hit.image == nil && hit.key == key)
        #expect(hit.checksum == XXH3.hash(payload), "the stored checksum, for the ETag")
        #expect(hit.lastModified == storedAt)

        // The hit's access date reaches the file (the store's LRU order depends on it).
        try await store.flushAccessDates()
        #expect(try await store.metadata(forKey: key)?.accessedAt == clock.now.withLock { $0 })

        // The same environment read through the I/O pool: no immediate read, the same answer.
        let pooled = try LMDBCacheStore(directory: directory, limits: .unlimited, options: .init(readsOnCallingThread: false))
        #expect(pooled.immediateEntry(forKey: key) == nil, "a store that reads on a pool never answers on the caller's thread")
        let other = try await Self.manager(pooled).loadImage(with: Self.url, options: Self.bytesOnly)
        #expect(other.cacheType == hit.cacheType && other.data == hit.data && other.checksum == hit.checksum && other.lastModified == hit.lastModified)
    }

    @Test("a damaged entry is a miss through the manager, never wrong bytes, and the entry is removed")
    func damaged() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = Self.manager(MemoryCacheStore(limits: .unlimited)).cacheKey(for: Self.url)
        do {
            let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
            try await store.setData(LMDBIntegrityTests.payload(1), forKey: key)
            try await store.setData(LMDBIntegrityTests.payload(2), forKey: "other")
            await store.close()
        }
        let file = directory.appendingPathComponent("data.mdb")
        var bytes = try Data(contentsOf: file)
        let found = try #require(bytes.range(of: LMDBIntegrityTests.payload(1).subdata(in: 20_000..<20_032)))
        bytes[found.lowerBound + 3] ^= 0x10
        try bytes.write(to: file)

        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        #expect(store.immediateEntry(forKey: key) == nil)
        let error = await #expect(throws: WebImageError.self) {
            try await Self.manager(store).loadImage(with: Self.url, options: Self.bytesOnly)
        }
        #expect(error?.code != .forbidden, "a miss under fromCacheOnly: \(String(describing: error))")
        #expect(try await store.count == 1, "the damaged entry is removed")
        #expect(try await store.entry(forKey: "other")?.data == LMDBIntegrityTests.payload(2))
    }

    @Test("an entry a redirect brought from a host the policy now refuses is not served")
    func refusedRedirect() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        let manager = Self.manager(store)
        try await store.setData(Data("bytes".utf8), forKey: manager.cacheKey(for: Self.url),
                                metadata: CacheMetadata(originalURL: "https://elsewhere.test/a.jpg"))
        #expect(try await manager.loadImage(with: Self.url, options: Self.bytesOnly).data == Data("bytes".utf8))
        var refusing = ImageContext()
        refusing.urlPolicy = { $0.host == "elsewhere.test" ? "is not on the allow-list" : nil }
        let error = await #expect(throws: WebImageError.self) {
            try await manager.loadImage(with: Self.url, options: Self.bytesOnly, context: refusing)
        }
        #expect(error?.code == .forbidden && error?.message.contains("redirected to https://elsewhere.test/a.jpg") == true,
                "\(String(describing: error))")
    }

    @Test("a tiered store answers its local LMDB hit on the calling thread, and a shared tier's entry the usual way")
    func tiered() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = try LMDBCacheStore(directory: directory, limits: .unlimited)
        let shared = MemoryCacheStore(limits: .unlimited)
        let tiers = TieredCacheStore(local: local, shared: shared)
        let manager = Self.manager(tiers)
        let sharedURL = URL(string: "https://origin.test/photos/b.jpg")!
        try await local.setData(Data("local".utf8), forKey: manager.cacheKey(for: Self.url))
        try await shared.setData(Data("shared".utf8), forKey: manager.cacheKey(for: sharedURL))

        #expect(tiers.immediateEntry(forKey: manager.cacheKey(for: Self.url))?.data == Data("local".utf8))
        #expect(tiers.immediateEntry(forKey: manager.cacheKey(for: sharedURL)) == nil, "the shared tier is a request: never immediate")
        let localHit = try await manager.loadImage(with: Self.url, options: Self.bytesOnly)
        #expect(localHit.cacheType == .disk && localHit.data == Data("local".utf8))
        let sharedHit = try await manager.loadImage(with: sharedURL, options: Self.bytesOnly)
        #expect(sharedHit.cacheType == .shared && sharedHit.data == Data("shared".utf8))
        await tiers.close()
    }
}
