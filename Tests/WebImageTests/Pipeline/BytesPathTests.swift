import Foundation
import Synchronization
import Testing
import WebImageTestSupport
@_spi(WebImageInternal) @testable import WebImage

/// A store that remembers which task each read ran on, and counts the reads and writes of each key.
final class TaskRecordingStore: CacheStore {
    let base = MemoryCacheStore(limits: .unlimited)
    private let readers = Lock<[Int]>([])
    private let counts = Lock<(reads: [String: Int], writes: [String: Int])>(([:], [:]))
    var readTasks: [Int] { readers.withLock { $0 } }
    func reads(_ key: String) -> Int { counts.withLock { $0.reads[key] ?? 0 } }
    func writes(_ key: String) -> Int { counts.withLock { $0.writes[key] ?? 0 } }

    static func currentTask() -> Int { withUnsafeCurrentTask { $0?.hashValue ?? 0 } }

    func entry(forKey key: String) async throws -> CacheEntry? {
        readers.withLock { $0.append(Self.currentTask()) }
        counts.withLock { $0.reads[key, default: 0] += 1 }
        return try await base.entry(forKey: key)
    }
    func metadata(forKey key: String) async throws -> CacheMetadata? { try await base.metadata(forKey: key) }
    func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        counts.withLock { $0.writes[key, default: 0] += 1 }
        try await base.setData(data, forKey: key, metadata: metadata)
    }
    func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws { try await base.updateMetadata(metadata, forKey: key) }
    func removeData(forKey key: String) async throws { try await base.removeData(forKey: key) }
    func removeAll() async throws { try await base.removeAll() }
    func removeExpired() async throws { try await base.removeExpired() }
    var totalSize: Int { get async throws { try await base.totalSize } }
    var count: Int { get async throws { try await base.count } }
}

@Suite("ImageManager: results with their bytes")
struct ResultBytesTests {
    @Test("a derived result made with waitStoreCache carries the bytes stored; a bytes-only load reads them back without decoding")
    func derivedBytes() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 8, height: 6))
        var context = ImageContext()
        context.transformer = HalvingTransformer()
        let made = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache, context: context)
        let stored = try await h.store.data(forKey: made.key)
        #expect(made.data != nil && made.data == stored, "the result holds the bytes the manager encoded and stored")
        #expect(made.image?.pixelSize == PixelSize(width: 4, height: 3))

        // The memory tier holds the image, not bytes: a bytes-only load reads the disk, and decodes nothing.
        let fromDisk = try await h.manager.loadImage(with: h.url("a.timg"), options: .avoidDecode, context: context)
        #expect(fromDisk.cacheType == .disk && fromDisk.image == nil && fromDisk.data == stored && fromDisk.key == made.key)
        // Now the bytes are in memory too, beside the image, charged at their length.
        let cache = try #require(h.manager.memoryCache)
        let imageCost = try #require(made.image).cost
        #expect(cache.totalCost == imageCost + stored!.count)
        let fromMemory = try await h.manager.loadImage(with: h.url("a.timg"), options: .avoidDecode, context: context)
        #expect(fromMemory.cacheType == .memory && fromMemory.data == stored)
        let imageHit = try await h.manager.loadImage(with: h.url("a.timg"), context: context)
        #expect(imageHit.cacheType == .memory && imageHit.image != nil && imageHit.data == stored)
        #expect(h.loader.requestCount == 1)
    }

    @Test("a bytes result carries its format, content type and ETag; the ETag comes from the checksum the pipeline already had (encode, memory, a verified disk read) and matches the bytes")
    func metadata() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("etag-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let h = Harness(store: try FileCacheStore(directory: directory, limits: .unlimited))
        h.loader.serve("test://host/e.timg", data: TestCoder.encode(width: 8, height: 6))
        var context = ImageContext()
        context.transformer = HalvingTransformer()
        let expectedTag = { (data: Data) in "\"" + String(XXH3.hash(data), radix: 16) + "-" + String(data.count, radix: 16) + "\"" }

        let made = try await h.manager.loadImage(with: h.url("e.timg"), options: [.avoidDecode, .waitStoreCache], context: context)
        let bytes = try #require(made.data)
        #expect(made.cacheType == .none && made.checksum == XXH3.hash(bytes))
        #expect(made.entityTag == expectedTag(bytes))
        #expect(made.format == ImageFormat.sniff(bytes) && made.contentType == ImageFormat.sniff(bytes)?.mimeType)

        let fromMemory = try await h.manager.loadImage(with: h.url("e.timg"), options: .avoidDecode, context: context)
        #expect(fromMemory.cacheType == .memory && fromMemory.checksum == XXH3.hash(bytes) && fromMemory.entityTag == made.entityTag)

        h.manager.memoryCache?.removeAll()
        let fromDisk = try await h.manager.loadImage(with: h.url("e.timg"), options: .avoidDecode, context: context)
        #expect(fromDisk.cacheType == .disk && fromDisk.data == bytes)
        #expect(fromDisk.checksum == XXH3.hash(bytes), "the file store verified the entry and hands its checksum on")
        #expect(fromDisk.entityTag == made.entityTag)

        // Without a known checksum the tag is hashed from the bytes: the same tag.
        let plain = ImageResult(image: nil, data: bytes, cacheType: .none, key: "k", url: h.url("e.timg"))
        #expect(plain.checksum == nil && plain.entityTag == made.entityTag)
        #expect(ImageResult(image: nil, data: nil, cacheType: .none, key: "k", url: h.url("e.timg"), checksum: 1).entityTag == nil)
        for (hash, count) in [(0, 0), (1, 15), (0xF, 16), (0x10, 255), (0xdead_beef, 1 << 20), (.max, Int.max)] as [(UInt64, Int)] {
            #expect(ImageResult.entityTag(hash: hash, count: count) == "\"" + String(hash, radix: 16) + "-" + String(count, radix: 16) + "\"")
        }
    }

    @Test("a bytes-only load of a derived result that is nowhere makes it: bytes and image returned, bytes stored in the background")
    func derivedBytesMiss() async throws {
        let h = Harness()
        h.loader.serve("test://host/b.timg", data: TestCoder.encode(width: 10, height: 10))
        var context = ImageContext()
        context.transformer = HalvingTransformer()
        let result = try await h.manager.loadImage(with: h.url("b.timg"), options: .avoidDecode, context: context)
        #expect(result.cacheType == .none && result.image?.pixelSize == PixelSize(width: 5, height: 5))
        let data = try #require(result.data)
        #expect(try TestCoder().decode(data, options: DecodeOptions()).pixelSize == PixelSize(width: 5, height: 5), "the bytes are the derived result's")
        #expect(try await eventually { try await h.store.data(forKey: result.key) == data })
        #expect(try await h.store.data(forKey: h.manager.cacheKey(for: h.url("b.timg"))) == TestCoder.encode(width: 10, height: 10), "the original is stored too")
    }

    @Test("without waitStoreCache an image load does not wait for the encoding: data is nil, the bytes reach the store")
    func backgroundEncoding() async throws {
        let h = Harness()
        h.loader.serve("test://host/c.timg", data: TestCoder.encode(width: 4, height: 4))
        var context = ImageContext()
        context.transformer = HalvingTransformer()
        let result = try await h.manager.loadImage(with: h.url("c.timg"), context: context)
        #expect(result.image != nil && result.data == nil)
        #expect(try await eventually { try await h.store.data(forKey: result.key) != nil })
    }

    @Test("bytes-only with a serializer that makes no bytes is a typed error")
    func noBytes() async throws {
        let h = Harness { $0.cacheSerializer = CacheSerializer { _, _, _ in nil } }
        h.loader.serve("test://host/d.timg", data: TestCoder.encode(width: 4, height: 4))
        var context = ImageContext()
        context.transformer = HalvingTransformer()
        let error = await #expect(throws: WebImageError.self) {
            try await h.manager.loadImage(with: h.url("d.timg"), options: .avoidDecode, context: context)
        }
        #expect(error?.code == .encodeFailed)
    }

    @Test("the memory tier's cap applies to bytes: bytes over the entry cap are not cached")
    func memoryBytesCap() {
        let cache = MemoryImageCache(limits: .init(costLimit: 1000, entryCostLimit: 100))
        #expect(cache.setData(Data(count: 100), forKey: "a"))
        #expect(!cache.setData(Data(count: 101), forKey: "b"))
        #expect(cache.totalCost == 100 && cache.data(forKey: "a")?.count == 100 && cache.image(forKey: "a") == nil)
        #expect(!cache.contains(key: "b"))
    }
}

@Suite("ImageManager: hits without hops")
struct FastPathTests {
    @Test("a disk hit nobody else is loading is read on the caller's task")
    func hitOnCallersTask() async throws {
        let store = TaskRecordingStore()
        let h = Harness(store: store) { $0.memoryCache = nil }
        try await store.setData(TestCoder.encode(width: 2, height: 2), forKey: "test://host/a.timg")
        let caller = TaskRecordingStore.currentTask()
        let bytes = try await h.manager.loadImage(with: h.url("a.timg"), options: [.avoidDecode, .fromCacheOnly])
        #expect(bytes.cacheType == .disk && bytes.data == TestCoder.encode(width: 2, height: 2))
        let image = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(image.cacheType == .disk && image.image?.pixelSize == PixelSize(width: 2, height: 2))
        #expect(store.readTasks == [caller, caller], "one read per load, both on the caller's task: \(store.readTasks) vs \(caller)")
        #expect(h.loader.requestCount == 0)
    }

    @Test("a miss still coalesces: 20 callers, one request, one result")
    func missCoalesces() async throws {
        let h = Harness()
        h.loader.serve("test://host/m.timg", data: TestCoder.encode(width: 3, height: 3))
        h.loader.close()
        let tasks = (0..<20).map { _ in Task { try await h.manager.loadImage(with: h.url("m.timg"), options: .avoidDecode) } }
        #expect(await eventually { h.loader.requestCount == 1 })
        h.loader.open()
        for task in tasks { #expect(try await task.value.data == TestCoder.encode(width: 3, height: 3)) }
        #expect(h.loader.requestCount == 1)
    }

    @Test("a miss still cancels: one caller cancelled alone, the load stops when the last one cancels")
    func missCancels() async throws {
        let h = Harness()
        h.loader.serve("test://host/n.timg", data: TestCoder.encode(width: 3, height: 3))
        h.loader.close()
        let first = Task { try await h.manager.loadImage(with: h.url("n.timg"), options: .avoidDecode) }
        let second = Task { try await h.manager.loadImage(with: h.url("n.timg"), options: .avoidDecode) }
        #expect(await eventually { h.loader.requestCount == 1 })
        first.cancel()
        let error = await #expect(throws: WebImageError.self) { try await first.value }
        #expect(error?.code == .cancelled)
        #expect(h.loader.cancellations == 0, "the other caller still wants it")
        second.cancel()
        _ = await second.result
        h.loader.open()  // the test loader notices cancellation when its gate opens
        #expect(await eventually { h.loader.cancellations == 1 }, "the shared load saw its last caller go")
    }
}
