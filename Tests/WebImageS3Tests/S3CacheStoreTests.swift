import Configuration
import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage
import WebImageConfiguration
import WebImageKit
@testable import WebImageS3
import WebImageTestSupport
import WebImageTesting

@Suite("S3CacheStore against moto, which checks every signature", .serialized)
struct S3CacheStoreTests {
    func store(_ moto: MotoServer, prefix: String? = nil, limits: CacheLimits = .unlimited, key: MotoServer.Key? = nil,
               clock: @escaping @Sendable () -> Date = { Date() }) throws -> S3CacheStore {
        try S3CacheStore(url: "s3://\(moto.bucket)/\(prefix ?? S3Fixtures.unique("t"))/", configuration: S3Fixtures.configuration(moto, key: key),
                         limits: limits, clock: clock)
    }

    @Test("passes CacheStoreConformance (expiry and size are the bucket's, tested below)")
    func conformance() async throws {
        let moto = try await MotoServer.shared()
        try await CacheStoreConformance { try self.store(moto) }.run()
    }

    @Test("one object per entry, PREFIX + SHA-256(key), in the shared codec; count and size list the prefix only")
    func layout() async throws {
        let moto = try await MotoServer.shared()
        let prefix = S3Fixtures.unique("layout")
        let store = try store(moto, prefix: prefix)
        try await store.setData(Data(repeating: 1, count: 1500), forKey: "https://x/a.jpg", metadata: CacheMetadata(contentType: "image/jpeg", etag: "\"e\""))
        #expect(store.objectKey(for: "https://x/a.jpg") == "\(prefix)/" + SHA256Digest.hex("https://x/a.jpg"))
        let object = try await S3Fixtures.get(moto, store.objectKey(for: "https://x/a.jpg"))
        guard case .entry(let entry) = CacheEntryCodec.decode(object.data, key: "https://x/a.jpg") else {
            Issue.record("the object is not in the shared codec")
            return
        }
        #expect(entry.data.count == 1500 && entry.metadata.etag == "\"e\"")
        // A sibling prefix that shares the stem, and a stray object, are not this store's.
        let sibling = try self.store(moto, prefix: prefix + "-other")
        try await sibling.setData(Data([1]), forKey: "k")
        try await S3Fixtures.put(moto, "\(prefix)/not-an-entry", Data([1, 2]))
        let (count, size) = (try await store.count, try await store.totalSize)
        #expect(count == 1 && size == 1500)
    }

    @Test("a damaged object (flipped bytes, or not an entry at all) is a miss and is deleted, never served")
    func damaged() async throws {
        let moto = try await MotoServer.shared()
        let store = try store(moto)
        try await store.setData(Data(repeating: 9, count: 4000), forKey: "k", metadata: CacheMetadata())
        var blob = try await S3Fixtures.get(moto, store.objectKey(for: "k")).data
        blob[100] ^= 0xFF
        try await S3Fixtures.put(moto, store.objectKey(for: "k"), blob)
        #expect(try await store.entry(forKey: "k") == nil)
        #expect(try await S3Fixtures.get(moto, store.objectKey(for: "k")).status == 404, "the damaged object was deleted")
        try await S3Fixtures.put(moto, store.objectKey(for: "j"), Data("plain bytes, no footer".utf8))
        #expect(try await store.entry(forKey: "j") == nil)
        #expect(try await S3Fixtures.get(moto, store.objectKey(for: "j")).status == 404)
    }

    @Test("every read checks the entry's age: past maxAge it is a miss before the bucket's lifecycle rule removes it")
    func ageOnRead() async throws {
        let moto = try await MotoServer.shared()
        let now = Lock(Date())
        let store = try store(moto, limits: CacheLimits(maxAge: .seconds(86_400)), clock: { now.withLock { $0 } })
        try await store.setData(Data([1, 2, 3]), forKey: "k", metadata: CacheMetadata())
        now.withLock { $0 += 3600 }
        #expect(try await store.entry(forKey: "k")?.data == Data([1, 2, 3]))
        now.withLock { $0 += 86_400 }
        #expect(try await store.entry(forKey: "k") == nil, "a day and an hour old, with a maximum age of a day")
        #expect(try await store.count == 1, "the read does not delete: expiry is the bucket's rule")
    }

    @Test("a read-only key reads entries; its writes fail as storeFailed naming AccessDenied")
    func readOnly() async throws {
        let moto = try await MotoServer.shared()
        let prefix = S3Fixtures.unique("ro")
        try await store(moto, prefix: prefix).setData(Data([7]), forKey: "k", metadata: CacheMetadata())
        let reader = try store(moto, prefix: prefix, key: moto.readOnly)
        #expect(try await reader.entry(forKey: "k")?.data == Data([7]))
        let error = await #expect(throws: WebImageError.self) { try await reader.setData(Data([8]), forKey: "k", metadata: CacheMetadata()) }
        #expect(error?.code == .storeFailed && error?.message.contains("AccessDenied") == true, "\(error?.message ?? "")")
    }

    @Test("bucket URLs: bad ones are typed errors")
    func urls() throws {
        let s3 = S3Configuration(credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"))
        #expect(try S3CacheStore(url: "s3://cache-bucket/", configuration: s3).prefix == "")
        #expect(try S3CacheStore(url: "s3://cache-bucket/v1/thumbs/", configuration: s3).prefix == "v1/thumbs/")
        for bad in ["https://cache-bucket/", "s3://", "s3://Cache/", "s3://cache-bucket:9000/", "s3://cache-bucket/?x=1", "redis://x"] {
            let error = #expect(throws: WebImageError.self, "\(bad)") { try S3CacheStore(url: bad, configuration: s3) }
            #expect(error?.code == .invalidArgument, "\(bad)")
        }
    }
}

@Suite("A bucket as the shared tier, from configuration", .serialized)
struct S3SharedTierTests {
    func flags(_ moto: MotoServer, prefix: String, local: URL?, secret: String? = nil) -> [String: String] {
        var flags = ["store.shared.kind": "s3", "store.shared.url": "s3://\(moto.bucket)/\(prefix)/",
                     "s3.endpoint": moto.endpoint.absoluteString, "s3.region": "us-east-1",
                     "s3.accessKeyID": moto.full.accessKeyID, "s3.secretAccessKey": secret ?? moto.full.secretAccessKey]
        if let local { flags["store.kind"] = "lmdb"; flags["store.path"] = local.path } else { flags["store.kind"] = "memory" }
        return flags
    }

    func manager(_ flags: [String: String]) async throws -> ImageManager {
        try ConfigLayers.manager(config: try await ConfigLayers.reader(flags: flags, file: nil, environment: [:]))
    }

    @Test("store.shared.kind = s3 makes a TieredCacheStore with the bucket behind the local store; bad values name their key")
    func wiring() async throws {
        let moto = try await MotoServer.shared()
        let manager = try await manager(flags(moto, prefix: "wiring", local: nil))
        let tiered = try #require(manager.store as? TieredCacheStore)
        let bucket = try #require(tiered.shared as? S3CacheStore)
        #expect(bucket.bucket == moto.bucket && bucket.prefix == "wiring/" && bucket.s3.endpoint == moto.endpoint)
        for (flags, key) in [(["store.shared.kind": "s3"], "store.shared.url"),
                             (["store.shared.kind": "s3", "store.shared.url": "s3://UPPER/"], "store.shared.url"),
                             (["store.shared.kind": "s3", "store.shared.url": "s3://fine-bucket/", "s3.pathStyle": "perhaps"], "s3.pathStyle"),
                             (["store.shared.kind": "s3", "store.shared.url": "s3://fine-bucket/", "s3.accessKeyID": "only-the-id"], "s3.secretAccessKey"),
                             (["s3.endpoint": "gopher://x"], "s3.endpoint")] {
            let error = await #expect(throws: WebImageError.self, "\(flags)") { try await self.manager(flags.merging(["store.kind": "memory"]) { a, _ in a }) }
            #expect(error?.code == .invalidArgument && error?.message.contains(key) == true, "\(flags): \(error?.message ?? "")")
        }
    }

    @Test("host B, with an empty local cache, serves every image host A loaded (originals and thumbnails) from the bucket, never asking the origin")
    func secondHost() async throws {
        let moto = try await MotoServer.shared()
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let prefix = S3Fixtures.unique("fleet")
        let photos = Array(try await S3Fixtures.photos().prefix(4))
        try #require(photos.count >= 2)
        let urls = photos.indices.map { origin.url("/photo-\($0).jpg") }
        for (url, photo) in zip(urls, photos) { origin.serve(url.path, photo, contentType: "image/jpeg") }
        let thumbnail = ImageContext(thumbnailPixelSize: PixelSize(64))
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("s3-fleet-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }

        let hostA = try await manager(flags(moto, prefix: prefix, local: root.appendingPathComponent("a")))
        for url in urls {
            #expect(try await hostA.loadImage(with: url, options: [.avoidDecode]).cacheType == .none)
            _ = try await hostA.loadImage(with: url, context: thumbnail)
        }
        #expect(await hostA.shutdown(), "host A's background writes to the bucket finished")
        let asked = urls.map { origin.requestCount(path: $0.path) }
        #expect(asked.allSatisfy { $0 == 1 }, "\(asked)")

        let hostB = try await manager(flags(moto, prefix: prefix, local: root.appendingPathComponent("b")))
        for (url, photo) in zip(urls, photos) {
            let original = try await hostB.loadImage(with: url, options: [.avoidDecode])
            #expect(original.cacheType == .shared && original.data == photo)
            let small = try await hostB.loadImage(with: url, context: thumbnail)
            #expect(small.cacheType == .shared && small.image.map { max($0.pixelSize.width, $0.pixelSize.height) } == 64)
        }
        #expect(urls.map { origin.requestCount(path: $0.path) } == asked, "host B never asked the origin")
        _ = await hostB.shutdown()
    }

    @Test("a failing bucket (wrong secret, or down) degrades to the local tier and the origin: loads succeed")
    func degrades() async throws {
        let moto = try await MotoServer.shared()
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let photo = try #require(try await S3Fixtures.photos().first)
        origin.serve("/a.jpg", photo, contentType: "image/jpeg")
        var down = flags(moto, prefix: "down", local: nil)
        down["s3.endpoint"] = "http://127.0.0.1:\(try RedisServer.freePort())"
        for flags in [self.flags(moto, prefix: "wrong", local: nil, secret: "wrong"), down] {
            let manager = try await manager(flags)
            let result = try await manager.loadImage(with: origin.url("/a.jpg"), options: [.avoidDecode])
            #expect(result.cacheType == .none && result.data == photo)
            _ = await manager.shutdown()
        }
    }

    @Test("an s3:// URL loads through a pipeline built from configuration (the s3 loader of the standard catalog)")
    func loaderFromConfiguration() async throws {
        let moto = try await MotoServer.shared()
        let key = S3Fixtures.unique("config") + ".jpg"
        let photo = try #require(try await S3Fixtures.photos().first)
        try await S3Fixtures.put(moto, key, photo)
        let manager = try await manager(["store.kind": "memory", "s3.endpoint": moto.endpoint.absoluteString,
                                         "s3.accessKeyID": moto.full.accessKeyID, "s3.secretAccessKey": moto.full.secretAccessKey])
        let result = try await manager.loadImage(with: URL(string: "s3://\(moto.bucket)/\(key)")!, options: [.avoidDecode])
        #expect(result.data == photo)
    }
}

@Suite("memory → local → Redis → bucket: two TieredCacheStores")
struct S3ChainTests {
    /// Until neither tier has background writes left (30 s at most, stretched under a sanitizer).
    func settled(_ tiers: TieredCacheStore...) async throws {
        let deadline = ContinuousClock.now + .seconds(30 * TestTiming.scale)
        while tiers.contains(where: { $0.pendingWrites.count > 0 }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test("a bucket hit is copied into both inner tiers; a write reaches all three; a remove reaches all three")
    func chain() async throws {
        let moto = try await MotoServer.shared()
        // The inner shared tier stands in for Redis (tested on its own elsewhere): the chain is TieredCacheStore's logic.
        let local = MemoryCacheStore(), redis = MemoryCacheStore()
        let bucket = try S3CacheStore(url: "s3://\(moto.bucket)/\(S3Fixtures.unique("chain"))/", configuration: S3Fixtures.configuration(moto), limits: .unlimited)
        let hot = TieredCacheStore(local: local, shared: redis)
        let chain = TieredCacheStore(local: hot, shared: bucket)
        try await bucket.setData(Data([1, 2, 3]), forKey: "from-another-host", metadata: CacheMetadata())
        let hit = try #require(try await chain.entry(forKey: "from-another-host"))
        #expect(hit.source == .shared && hit.data == Data([1, 2, 3]))
        try await settled(chain, hot)
        let (copiedLocally, copiedToRedis) = (try await local.data(forKey: "from-another-host"), try await redis.data(forKey: "from-another-host"))
        #expect(copiedLocally == Data([1, 2, 3]) && copiedToRedis == Data([1, 2, 3]))

        try await chain.setData(Data([4]), forKey: "made-here", metadata: CacheMetadata())
        try await settled(chain, hot)
        let written = [try await local.data(forKey: "made-here"), try await redis.data(forKey: "made-here"), try await bucket.data(forKey: "made-here")]
        #expect(written == [Data([4]), Data([4]), Data([4])])
        try await chain.removeData(forKey: "made-here")
        let removed = [try await local.data(forKey: "made-here"), try await redis.data(forKey: "made-here"), try await bucket.data(forKey: "made-here")]
        #expect(removed == [nil, nil, nil])
    }
}
