import Foundation
import Synchronization
import Testing
import WebImage
import WebImageTestSupport

/// A manager over the test loader and coder, with a memory store as its disk tier
/// unless a test asks for a real one.
struct Harness {
    let loader = TestLoader()
    let manager: ImageManager
    let store: any CacheStore

    init(store: (any CacheStore)? = nil, blocklist: FailedURLBlocklist = FailedURLBlocklist(), configure: (inout ImageManager.Configuration) -> Void = { _ in }) {
        let store = store ?? MemoryCacheStore(limits: .unlimited)
        var configuration = ImageManager.Configuration()
        configuration.store = store
        configuration.coders.register(TestCoder(), name: "test")
        configuration.loaders.register(loader, name: "test", schemes: ["test"])
        configuration.blocklist = blocklist
        configure(&configuration)
        self.store = store
        self.manager = ImageManager(configuration: configuration)
    }

    func url(_ path: String) -> URL { URL(string: "test://host/\(path)")! }
}

@Suite("ImageManager: tiers")
struct ImageManagerTierTests {
    @Test("network, then memory, then disk after clearing memory")
    func tiers() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 8, height: 6))
        let first = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        #expect(first.cacheType == .none && first.image?.pixelSize == PixelSize(width: 8, height: 6))
        let second = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(second.cacheType == .memory)
        h.manager.memoryCache?.removeAll()
        let third = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(third.cacheType == .disk && third.image?.pixelSize == PixelSize(width: 8, height: 6))
        #expect(h.loader.requestCount == 1)
        #expect(h.manager.memoryCache?.contains(key: "test://host/a.timg") == true, "a disk hit fills memory")
    }

    @Test("fromCacheOnly on a miss fails with notCached and never calls the loader")
    func fromCacheOnly() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 2, height: 2))
        let error = await #expect(throws: WebImageError.self) {
            try await h.manager.loadImage(with: h.url("a.timg"), options: .fromCacheOnly)
        }
        #expect(error?.code == .notCached)
        #expect(h.loader.requestCount == 0)
        #expect(h.manager.blocklist.count == 0, "a cache miss is not a failure of the URL")
    }

    @Test("fromLoaderOnly skips the caches but still fills them")
    func fromLoaderOnly() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 2, height: 2))
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        let result = try await h.manager.loadImage(with: h.url("a.timg"), options: .fromLoaderOnly)
        #expect(result.cacheType == .none && h.loader.requestCount == 2)
    }

    @Test("cacheMemoryOnly never writes the disk store; waitStoreCache has written when it returns")
    func storeOptions() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 2, height: 2))
        h.loader.serve("test://host/b.timg", data: TestCoder.encode(width: 2, height: 2))
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: [.cacheMemoryOnly])
        _ = try await h.manager.loadImage(with: h.url("b.timg"), options: [.waitStoreCache])
        #expect(try await h.store.data(forKey: "test://host/b.timg") != nil)
        #expect(h.manager.pendingStoreWrites.count == 0, "cacheMemoryOnly started no background write either")
        #expect(try await h.store.data(forKey: "test://host/a.timg") == nil)
    }

    @Test("bytes that are not an image fail, are not cached, and block the URL")
    func badContent() async throws {
        let h = Harness()
        h.loader.serve("test://host/x.jpg", data: Data("<html>not an image</html>".utf8))
        let error = await #expect(throws: WebImageError.self) {
            try await h.manager.loadImage(with: h.url("x.jpg"), options: .waitStoreCache)
        }
        #expect(error?.code == .unsupportedFormat)
        #expect(try await h.store.count == 0, "a failed decode must not leave a cache entry")
        #expect(h.manager.blocklist.blockingError(for: "test://host/x.jpg") != nil)
    }

    @Test("avoidDecode returns bytes only; queryMemoryData adds bytes to a memory hit")
    func dataOptions() async throws {
        let h = Harness()
        let bytes = TestCoder.encode(width: 3, height: 3)
        h.loader.serve("test://host/a.timg", data: bytes)
        let raw = try await h.manager.loadImage(with: h.url("a.timg"), options: [.avoidDecode, .waitStoreCache])
        #expect(raw.image == nil && raw.data == bytes)
        let decoded = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(decoded.cacheType == .disk && decoded.image != nil)
        // The bytes-only load left the bytes in memory beside the image: at hand, so returned.
        let plainHit = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(plainHit.cacheType == .memory && plainHit.image != nil && plainHit.data == bytes)
        let bytesHit = try await h.manager.loadImage(with: h.url("a.timg"), options: .avoidDecode)
        #expect(bytesHit.cacheType == .memory && bytesHit.image == nil && bytesHit.data == bytes)

        // An image alone in memory: its bytes only with queryMemoryData, read from disk.
        h.loader.serve("test://host/b.timg", data: bytes)
        _ = try await h.manager.loadImage(with: h.url("b.timg"), options: .waitStoreCache)
        let imageOnly = try await h.manager.loadImage(with: h.url("b.timg"))
        #expect(imageOnly.cacheType == .memory && imageOnly.data == nil)
        let withData = try await h.manager.loadImage(with: h.url("b.timg"), options: .queryMemoryData)
        #expect(withData.cacheType == .memory && withData.data == bytes)
    }

    @Test("a URL no loader accepts is invalidURL")
    func noLoader() async throws {
        let h = Harness()
        let error = await #expect(throws: WebImageError.self) {
            try await h.manager.loadImage(with: URL(string: "gopher://x/y.png")!)
        }
        #expect(error?.code == .invalidURL && error?.message.contains("gopher") == true)
        // An http URL with no host is the URL's fault, and says so (not "no loader is registered").
        let hostless = await #expect(throws: WebImageError.self) {
            try await h.manager.loadImage(with: URL(string: "http:///y.png")!)
        }
        #expect(hostless?.code == .invalidURL && hostless?.message.contains("names no host") == true, "\(String(describing: hostless))")
    }

    @Test("HTTP-like statuses: 404 is notFound, 503 is transient")
    func statuses() async throws {
        let h = Harness()
        h.loader.serve("test://host/404", .init(data: Data("no".utf8), status: 404))
        h.loader.serve("test://host/503", .init(data: Data("busy".utf8), status: 503))
        let notFound = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("404")) }
        #expect(notFound?.code == .notFound && notFound?.isTransient == false && notFound?.statusCode == 404)
        let busy = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("503")) }
        #expect(busy?.code == .badStatus && busy?.isTransient == true)
    }
}

@Suite("ImageManager: keys, scale, thumbnails, transformers")
struct ImageManagerKeyTests {
    @Test("scale comes from the key unless the context overrides it")
    func scale() async throws {
        let h = Harness()
        h.loader.serve("test://host/icon@2x.timg", data: TestCoder.encode(width: 40, height: 20))
        let image = try #require(try await h.manager.loadImage(with: h.url("icon@2x.timg")).image)
        #expect(image.scale == 2 && image.width == 20 && image.height == 10)
        let overridden = try #require(try await h.manager.loadImage(with: h.url("icon@2x.timg"), context: ImageContext(scaleFactor: 4)).image)
        #expect(overridden.scale == 4 && overridden.width == 10)
    }

    @Test("a thumbnail has a derived key and never downloads the original twice")
    func derivedKeys() async throws {
        let h = Harness()
        h.loader.serve("test://host/big.timg", data: TestCoder.encode(width: 400, height: 200))
        let thumbnail = ImageContext(thumbnailPixelSize: PixelSize(100))
        let thumb = try await h.manager.loadImage(with: h.url("big.timg"), options: .waitStoreCache, context: thumbnail)
        #expect(thumb.image?.pixelSize == PixelSize(width: 100, height: 50))
        #expect(thumb.key != "test://host/big.timg" && thumb.key.hasPrefix("test://host/big.timg"))
        let original = try await h.manager.loadImage(with: h.url("big.timg"))
        #expect(original.image?.pixelSize == PixelSize(width: 400, height: 200))
        #expect(original.cacheType == .disk)
        let transformed = try await h.manager.loadImage(with: h.url("big.timg"), options: .waitStoreCache,
                                                        context: ImageContext(transformer: HalvingTransformer()))
        #expect(transformed.image?.pixelSize == PixelSize(width: 200, height: 100))
        #expect(h.loader.requestCount == 1)

        // The derived result is on disk under its own key, encoded by the coder.
        h.manager.memoryCache?.removeAll()
        let fromDisk = try await h.manager.loadImage(with: h.url("big.timg"), context: thumbnail)
        #expect(fromDisk.cacheType == .disk && fromDisk.image?.pixelSize == PixelSize(width: 100, height: 50))
        #expect(try await h.store.data(forKey: thumb.key) != nil)
    }

    @Test("a URL's fragment cannot pose as a derived key: a fragment is not part of the key, and a filter's '#' is escaped")
    func fragmentsCannotForgeDerivedKeys() async throws {
        let h = Harness()
        h.loader.serve("test://host/big.timg", data: TestCoder.encode(width: 400, height: 200))
        let thumbnail = ImageContext(thumbnailPixelSize: PixelSize(100))
        let thumbKey = h.manager.resultKey(for: h.url("big.timg"), context: thumbnail)
        // A load whose URL's fragment spells the thumbnail's key stores the original.
        let forged = try #require(URL(string: thumbKey))
        // (A real loader drops the fragment; this one serves what it is told.)
        h.loader.serve(thumbKey, data: TestCoder.encode(width: 400, height: 200))
        #expect(h.manager.cacheKey(for: forged) == "test://host/big.timg")
        let original = try await h.manager.loadImage(with: forged, options: .waitStoreCache)
        #expect(original.image?.pixelSize == PixelSize(width: 400, height: 200) && original.key == "test://host/big.timg")
        h.manager.memoryCache?.removeAll()
        // The thumbnail is still a thumbnail, made from the stored original.
        let thumb = try await h.manager.loadImage(with: h.url("big.timg"), context: thumbnail)
        #expect(thumb.image?.pixelSize == PixelSize(width: 100, height: 50) && thumb.key == thumbKey)
        #expect(h.loader.requestCount == 1, "the thumbnail came from the stored original")

        // A filter that keeps the fragment: its '#' is escaped, so the key is not the thumbnail's.
        let keeping = Harness { $0.cacheKeyFilter = CacheKeyFilter { $0.absoluteString } }
        #expect(keeping.manager.cacheKey(for: forged) == "test://host/big.timg#!webimage(thumb=100x100)")
        #expect(keeping.manager.cacheKey(for: forged) != thumbKey)
        #expect(keeping.manager.cacheKey(for: h.url("big.timg")) == "test://host/big.timg", "keys without '#' are unchanged")
        #expect(CacheKeyFilter.removingQueryItems(["sig"]).key(URL(string: "test://h/a?sig=1&w=2#x")!) == "test://h/a?w=2")
    }

    @Test("a cache-key filter makes signed URLs share one entry")
    func keyFilter() async throws {
        let h = Harness { $0.cacheKeyFilter = .removingQueryItems(["sig"]) }
        h.loader.serve("test://host/a.timg?sig=1&w=2", data: TestCoder.encode(width: 2, height: 2))
        h.loader.serve("test://host/a.timg?sig=2&w=2", data: TestCoder.encode(width: 2, height: 2))
        let first = try await h.manager.loadImage(with: URL(string: "test://host/a.timg?sig=1&w=2")!)
        let second = try await h.manager.loadImage(with: URL(string: "test://host/a.timg?sig=2&w=2")!)
        #expect(first.key == "test://host/a.timg?w=2" && second.cacheType == .memory)
    }

    @Test("request modifier adds headers; defaults carry Accept")
    func requestModifier() async throws {
        let h = Harness()
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 2, height: 2))
        var context = ImageContext()
        context.requestModifier = { $0.headers["Authorization"] = "Bearer t" }
        _ = try await h.manager.loadImage(with: h.url("a.timg"), context: context)
        let request = try #require(h.loader.requests.first)
        #expect(request.headers["Authorization"] == "Bearer t")
        #expect(request.headers["Accept"]?.contains("image/webp") == true)
        #expect(request.timeout == .seconds(15) && request.maxResponseSize == 64 << 20)
    }

    @Test("decodeFirstFrameOnly and the pixel limit reach the coder")
    func decodeOptions() async throws {
        let h = Harness { $0.decodeOptions.pixelLimit = 1000 }
        h.loader.serve("test://host/anim.timg", data: TestCoder.encode(width: 10, height: 10, frames: 3))
        h.loader.serve("test://host/huge.timg", data: TestCoder.encode(width: 100, height: 100))
        let still = try await h.manager.loadImage(with: h.url("anim.timg"), options: .decodeFirstFrameOnly)
        #expect(still.image?.frameCount == 1)
        let animated = try await h.manager.loadImage(with: h.url("anim.timg"))
        #expect(animated.image?.frameCount == 3, "first-frame results are cached apart from full ones")
        let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("huge.timg")) }
        #expect(error?.code == .pixelLimitExceeded)
    }

    @Test("an original over a request's pixel limit is stored all the same: the next request, another size, fails from the store without downloading it again; bytes no coder reads are not stored")
    func overLimitOriginalStored() async throws {
        let h = Harness { $0.decodeOptions.pixelLimit = 1000 }
        let huge = TestCoder.encode(width: 100, height: 100)
        h.loader.serve("test://host/huge.timg", data: huge)
        h.loader.serve("test://host/junk.timg", data: Data("not an image".utf8))
        for side in [10, 20, 30] {
            let refused = await #expect(throws: WebImageError.self) {
                try await h.manager.loadImage(with: h.url("huge.timg"), options: .waitStoreCache, context: ImageContext(thumbnailPixelSize: PixelSize(side)))
            }
            #expect(refused?.code == .pixelLimitExceeded, "\(String(describing: refused))")
        }
        #expect(h.loader.requestCount == 1, "downloaded once")
        #expect(try await h.store.data(forKey: "test://host/huge.timg") == huge)
        _ = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("junk.timg"), options: .waitStoreCache) }
        #expect(try await h.store.data(forKey: "test://host/junk.timg") == nil)
    }
}

@Suite("ImageManager: revalidation")
struct ImageManagerRevalidationTests {
    @Test("refreshCached sends the stored ETag; 304 keeps the bytes and serves from disk")
    func notModified() async throws {
        let h = Harness()
        let bytes = TestCoder.encode(width: 4, height: 4)
        h.loader.serve("test://host/a.timg", data: bytes, etag: "\"v1\"")
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        #expect(try await h.store.metadata(forKey: "test://host/a.timg")?.etag == "\"v1\"")
        let refreshed = try await h.manager.loadImage(with: h.url("a.timg"), options: .refreshCached)
        #expect(h.loader.requests.last?.ifNoneMatch == "\"v1\"")
        #expect(refreshed.cacheType == .disk && refreshed.image != nil)

        let updated = TestCoder.encode(width: 6, height: 6)
        h.loader.serve("test://host/a.timg", data: updated, etag: "\"v2\"")
        let changed = try await h.manager.loadImage(with: h.url("a.timg"), options: [.refreshCached, .waitStoreCache])
        #expect(changed.cacheType == .none && changed.image?.pixelSize == PixelSize(6))
        #expect(try await h.store.metadata(forKey: "test://host/a.timg")?.etag == "\"v2\"")
        #expect(try await h.manager.loadImage(with: h.url("a.timg")).image?.pixelSize == PixelSize(6), "memory holds the new image")
    }
}

@Suite("ImageManager: a store that cannot write")
struct ImageManagerStoreFailureTests {
    @Test("a failed cache write never fails the load: the result says so, memory still holds the image, the URL is not blocked")
    func writeFailure() async throws {
        let h = Harness(store: FullDiskStore())
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 8, height: 6))
        let result = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        #expect(result.image?.pixelSize == PixelSize(width: 8, height: 6) && result.cacheType == .none)
        #expect(result.storeFailure?.code == .storeFailed && result.storeFailure?.message.contains("No space left") == true)
        #expect(try await h.manager.loadImage(with: h.url("a.timg")).cacheType == .memory)
        #expect(h.manager.blocklist.count == 0)

        let derived = try await h.manager.loadImage(with: h.url("a.timg"), options: [.waitStoreCache, .fromLoaderOnly],
                                                    context: ImageContext(transformer: HalvingTransformer()))
        #expect(derived.image?.pixelSize == PixelSize(width: 4, height: 3) && derived.storeFailure != nil)
        let bytes = try await h.manager.loadImage(with: h.url("a.timg"), options: [.waitStoreCache, .avoidDecode, .fromLoaderOnly])
        #expect(bytes.data != nil && bytes.storeFailure != nil)
        // Without waiting, the write happens later: the load returns at once with no failure to report.
        let background = try await h.manager.loadImage(with: h.url("a.timg"), options: [.fromLoaderOnly])
        #expect(background.storeFailure == nil)
    }
}

@Suite("ImageManager: blocklist")
struct ImageManagerBlocklistTests {
    @Test("a permanent failure blocks; retryFailed bypasses; the block expires")
    func permanent() async throws {
        let clock = TestClock()
        let h = Harness(blocklist: FailedURLBlocklist(ttl: .seconds(60), clock: clock.source))
        let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("missing.timg")) }
        #expect(error?.code == .notFound)
        let blocked = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("missing.timg")) }
        #expect(blocked?.code == .blockedURL && blocked?.isTransient == false)
        #expect(h.loader.requestCount == 1)

        h.loader.serve("test://host/missing.timg", data: TestCoder.encode(width: 1, height: 1))
        _ = try await h.manager.loadImage(with: h.url("missing.timg"), options: [.retryFailed, .fromLoaderOnly])
        #expect(h.loader.requestCount == 2)

        h.loader.serve("test://host/gone.timg", .init(data: Data(), status: 410))
        _ = try? await h.manager.loadImage(with: h.url("gone.timg"))
        #expect(h.manager.blocklist.blockingError(for: "test://host/gone.timg") != nil)
        clock.advance(by: 61)
        #expect(h.manager.blocklist.blockingError(for: "test://host/gone.timg") == nil)
    }

    @Test("timeouts and other transient failures never block")
    func transient() async throws {
        let h = Harness()
        h.loader.serve("test://host/slow", .init(data: Data(), error: WebImageError(.timedOut, "timed out")))
        h.loader.serve("test://host/reset", .init(data: Data(), error: WebImageError(.loadFailed, "connection reset")))
        for path in ["slow", "reset", "slow"] {
            _ = try? await h.manager.loadImage(with: h.url(path))
        }
        #expect(h.loader.requestCount == 3)
        #expect(h.manager.blocklist.count == 0)
    }

    @Test("a failed transform does not block the URL; bytes no coder reads do")
    func requestSpecificFailures() async throws {
        let h = Harness()
        h.loader.serve("test://host/x.timg", data: TestCoder.encode(width: 8, height: 8))
        let failed = await #expect(throws: WebImageError.self) {
            try await h.manager.loadImage(with: h.url("x.timg"), context: ImageContext(transformer: FailingTransformer()))
        }
        #expect(failed?.code == .transformFailed)
        #expect(h.manager.blocklist.blockingError(for: "test://host/x.timg") == nil)
        let plain = try await h.manager.loadImage(with: h.url("x.timg"))
        #expect(plain.image?.pixelSize == PixelSize(8), "a plain load after a failed transform succeeds without .retryFailed")

        h.loader.serve("test://host/junk.timg", data: Data("not an image at all".utf8))
        let junk = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("junk.timg")) }
        #expect(junk?.code == .unsupportedFormat)
        let again = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("junk.timg")) }
        #expect(again?.code == .blockedURL, "bytes that no coder reads are the URL's fault")
    }

    /// Recognises "BAD!" bytes and never decodes them. The first decode waits for
    /// `release` after signalling `started`; later ones fail at once.
    final class GatedFailingCoder: ImageCoder, @unchecked Sendable {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        private let calls = Atomic<Int>(0)

        func canDecode(_ data: Data) -> Bool { data.starts(with: Data("BAD!".utf8)) }

        func decode(_ data: Data, options: DecodeOptions) throws -> Image {
            if calls.add(1, ordering: .relaxed).oldValue == 0 {
                started.signal()
                release.wait()
            }
            throw WebImageError(.decodeFailed, "BAD! bytes never decode")
        }

        func canEncode(_ format: ImageFormat) -> Bool { false }
        func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
            throw WebImageError(.encodeFailed, "decodes only")
        }
    }

    @Test("bytes another size's job just downloaded that do not decode are the URL's fault, not a damaged entry: no second download")
    func heldDownloadDoesNotDecode() async throws {
        let coder = GatedFailingCoder()
        // A pool of its own, so that the waiting decode cannot hold the other's thread.
        let h = Harness {
            $0.coders.register(coder, name: "gated")
            $0.pool = BlockingThreadPool(threadCount: 2, name: "gated")
        }
        h.loader.serve("test://host/bad.img", data: Data("BAD! and then nothing an image needs".utf8))
        let first = Task { try await h.manager.loadImage(with: h.url("bad.img"), context: ImageContext(thumbnailPixelSize: PixelSize(100))) }
        // The first size's job downloaded the original and holds it while its decode waits.
        // Bounded: a first load that never reached its decode must fail the test, not hold the run.
        // On a thread of its own: on Linux a `DispatchQueue.global()` thread is one of
        // the few the cooperative pool runs on, and a wait there starves the load it waits for.
        let reached = (try? await onThread { coder.started.wait(timeout: .now() + 120) == .success }) ?? false
        guard reached else {
            coder.release.signal()
            Issue.record("the first size's decode never started")
            return
        }
        let second = await #expect(throws: WebImageError.self) {
            try await h.manager.loadImage(with: h.url("bad.img"), context: ImageContext(thumbnailPixelSize: PixelSize(200)))
        }
        #expect(second?.code == .decodeFailed)
        #expect(h.loader.requestCount == 1, "the second size did not take the held original for a damaged entry and fetch it again")
        coder.release.signal()
        let firstError = await #expect(throws: WebImageError.self) { try await first.value }
        #expect(firstError?.code == .decodeFailed)
        #expect(h.manager.blocklist.blockingError(for: "test://host/bad.img") != nil)
        #expect(h.loader.requestCount == 1)
    }

    @Test("the list is bounded and can be cleared")
    func bounded() {
        let list = FailedURLBlocklist(capacity: 3)
        for index in 0..<10 { list.record(WebImageError(.notFound, "x"), for: "u\(index)") }
        #expect(list.count == 3)
        #expect(list.blockingError(for: "u9") != nil)
        list.remove("u9")
        #expect(list.blockingError(for: "u9") == nil)
        list.removeAll()
        #expect(list.count == 0)
        #expect(!list.record(WebImageError(.cancelled, "x"), for: "c"))
    }
}
