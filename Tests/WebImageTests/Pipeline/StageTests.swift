import Foundation
import Synchronization
import Testing
import WebImageTestSupport
@testable import WebImage

/// The stages of a load, each on its own: what it reads, what it holds, what it
/// gives back. The manager's tests drive them together.
struct StageFixture {
    let loader = TestLoader()
    let store: any CacheStore
    let manager: ImageManager
    var stages: LoadStages { manager.stages }

    init(store: any CacheStore = MemoryCacheStore(limits: .unlimited), configure: (inout ImageManager.Configuration) -> Void = { _ in }) {
        var configuration = ImageManager.Configuration()
        configuration.store = store
        configuration.coders.register(TestCoder(), name: "test")
        configuration.loaders.register(loader, name: "test", schemes: ["test"])
        configure(&configuration)
        self.store = store
        self.manager = ImageManager(configuration: configuration)
    }

    func plan(_ path: String, options: ImageOptions = [], context: ImageContext = ImageContext()) -> LoadPlan {
        manager.plan(url: URL(string: "test://host/\(path)")!, options: options, context: context)
    }
}

@Suite("LookupStage")
struct LookupStageTests {
    @Test("the memory tier answers under the result key, unless the context or options skip it")
    func memory() async throws {
        let f = StageFixture()
        let plan = f.plan("a.timg")
        let image = try TestCoder().decode(TestCoder.encode(width: 2, height: 2), options: DecodeOptions())
        #expect(await f.stages.lookup.memoryHit(plan) == nil)
        f.manager.memoryCache?.setImage(image, forKey: plan.key)
        #expect(await f.stages.lookup.memoryHit(plan)?.cacheType == .memory)
        var diskOnly = ImageContext()
        diskOnly.queryCacheTiers = [.disk]
        #expect(await f.stages.lookup.memoryHit(f.plan("a.timg", context: diskOnly)) == nil)
        #expect(await f.stages.lookup.memoryHit(f.plan("a.timg", options: .refreshCached)) == nil)
    }

    @Test("a job's disk lookup takes the caller's read first, then entries on their way to the store, then the store")
    func disk() async throws {
        let f = StageFixture()
        let plan = f.plan("b.timg")
        try await f.store.setData(Data([1]), forKey: plan.plainKey)
        let stored = await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil)
        #expect(stored?.entry.data == Data([1]) && stored?.held == false)
        let held = f.stages.lookup.pending.hold(Data([2]), key: plan.plainKey, metadata: CacheMetadata())
        let pending = await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil)
        #expect(pending?.entry.data == Data([2]) && pending?.held == true, "held bytes before the store, marked as held")
        let read = LookupStage.DiskRead(key: plan.plainKey, entry: CacheEntry(data: Data([3]), metadata: CacheMetadata()))
        let first = await f.stages.lookup.entry(plan.plainKey, plan, firstRead: read)
        #expect(first?.entry.data == Data([3]) && first?.held == false, "the caller's read first")
        f.stages.lookup.pending.release(plan.plainKey, id: held)
        #expect(f.stages.lookup.pending.count == 0)
    }

    @Test("an original read from the store is shared with the jobs that look while one holds it: one copy, not one read each; it leaves with the last, and a failed decode of it is still the store's")
    func sharedStoredOriginal() async throws {
        let f = StageFixture()
        let plan = f.plan("s.timg")
        // Large enough to live outside the Data value (small ones are stored inline, copied with it).
        let bytes = Data((0..<4096).map { UInt8($0 % 251) })
        try await f.store.setData(bytes, forKey: plan.plainKey)
        let a = try #require(await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil, sharing: true))
        let aID = try #require(a.holdID, "the job holds what it read")
        #expect(a.entry.data == bytes && a.held == false)
        // The store changes: a second job still gets the bytes the first holds.
        try await f.store.setData(Data([9]), forKey: plan.plainKey)
        let b = try #require(await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil, sharing: true))
        #expect(b.entry.data == bytes && b.holdID == aID, "the bytes the first job read, not a second read")
        #expect(b.held == false, "read from the store: a failed decode is damage on disk, not the URL's")
        a.entry.data.withUnsafeBytes { first in
            b.entry.data.withUnsafeBytes { second in #expect(first.baseAddress == second.baseAddress, "one copy") }
        }
        f.stages.lookup.pending.release(plan.plainKey, id: aID)
        #expect(f.stages.lookup.pending.count == 1, "the second job still holds it")
        f.stages.lookup.pending.release(plan.plainKey, id: aID)
        #expect(f.stages.lookup.pending.count == 0, "gone with the last job")
        let c = await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil, sharing: true)
        #expect(c?.entry.data == Data([9]), "a job after them reads the store again")
        if let id = c?.holdID { f.stages.lookup.pending.release(plan.plainKey, id: id) }
        // Without sharing (a derived key), nothing is held.
        #expect(await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil)?.holdID == nil && f.stages.lookup.pending.count == 0)
    }

    @Test("a store that fails to read is a miss, counted as a store error")
    func unreadable() async throws {
        let metrics = RecordingMetrics.shared
        let tag = [("test", UUID().uuidString)]
        let f = StageFixture(store: FullDiskStore(failsReads: true)) { $0.metricsDimensions = tag }
        let plan = f.plan("c.timg")
        #expect(await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil) == nil)
        #expect(metrics.value("webimage_store_errors_total", tag) == 1)
    }
}

@Suite("OriginalStage")
struct OriginalStageTests {
    @Test("a download is charged to the originals' budget by its bytes, once however many jobs share it, until the last lets go; a failed one holds nothing")
    func budget() async throws {
        let f = StageFixture()
        let bytes = TestCoder.encode(width: 8, height: 8)
        f.loader.serve("test://host/d.timg", data: bytes)
        var original: Original? = try await f.stages.original.download(f.plan("d.timg")) { _ in }
        #expect(original?.data == bytes && original?.cacheType == CacheType.none && original?.response != nil)
        #expect(f.manager.originalsInFlight.bytes == bytes.count, "held while the job renders it")
        original = nil
        #expect(f.manager.originalsInFlight.bytes == 0, "released with the job's last reference")
        let missing = await #expect(throws: WebImageError.self) { try await f.stages.original.download(f.plan("none.timg")) { _ in } }
        #expect(missing?.code == .notFound)
        #expect(f.manager.originalsInFlight.bytes == 0, "a failed download holds nothing")
    }

    @Test("downloads of one URL are shared: two jobs, one request, one charge")
    func shared() async throws {
        let f = StageFixture()
        let bytes = TestCoder.encode(width: 2, height: 2)
        f.loader.serve("test://host/e.timg", data: bytes)
        f.loader.close()
        // In a group, whose results are the test's only references (an async let keeps its own).
        var both = try await withThrowingTaskGroup(of: Original.self) { group in
            group.addTask { try await f.stages.original.download(f.plan("e.timg")) { _ in } }
            group.addTask { try await f.stages.original.download(f.plan("e.timg", context: ImageContext(thumbnailPixelSize: PixelSize(1)))) { _ in } }
            #expect(await eventually { f.stages.original.downloads.waiterCount == 2 })
            f.loader.open()
            var originals: [Original] = []
            for try await original in group { originals.append(original) }
            return originals
        }
        do {
            let (a, b) = (both[0], both[1])
            #expect(a.data == b.data && f.loader.requestCount == 1)
            #expect(f.manager.originalsInFlight.bytes == bytes.count, "charged once for both jobs")
            // The bytes were held for other loads of the URL before the download let the URL
            // go, with one hold for each job that got them: the entry leaves at the second release.
            let id = try #require(a.holdID)
            #expect(b.holdID == id)
            let plain = f.plan("e.timg").plainKey
            #expect(f.stages.lookup.pending.entry(forKey: plain)?.entry.data == a.data)
            f.stages.lookup.pending.release(plain, id: id)
            #expect(f.stages.lookup.pending.entry(forKey: plain) != nil, "the second job still holds it")
            f.stages.lookup.pending.release(plain, id: id)
            #expect(f.stages.lookup.pending.count == 0)
        }
        both.removeLast()
        #expect(f.manager.originalsInFlight.bytes == bytes.count, "the first job still holds the bytes")
        both.removeAll()
        #expect(f.manager.originalsInFlight.bytes == 0)
    }

    @Test("a new download asks the blocklist first, so a load that checked before another's failure was recorded does not fetch again")
    func downloadAsksBlocklist() async throws {
        let f = StageFixture()
        f.loader.serve("test://host/h.timg", data: TestCoder.encode(width: 2, height: 2))
        _ = f.manager.blocklist.record(WebImageError(.decodeFailed, "not an image"), for: "test://host/h.timg")
        let refused = await #expect(throws: WebImageError.self) { try await f.stages.original.download(f.plan("h.timg")) { _ in } }
        #expect(refused?.code == .blockedURL && f.loader.requestCount == 0)
        _ = try await f.stages.original.download(f.plan("h.timg", options: .retryFailed)) { _ in }
        #expect(f.loader.requestCount == 1, ".retryFailed passes")
    }

    @Test("a shared job's end is told how many callers get its result, before they do: none when every caller left first")
    func finishedCallers() async throws {
        let coalescer = Coalescer<String, Int>()
        let gate = Gate(open: false)
        // Polled, not awaited: a wait for a call that never comes would hold the whole run.
        final class Told: Sendable { let counts = Mutex<[Int]>([]) }
        let told = Told()
        @Sendable func join() async throws -> Int {
            try await coalescer.value(for: "k", operation: { _ in
                await gate.wait()  // finishes whether or not its callers went
                return 7
            }, finished: { _, callers in
                told.counts.withLock { $0.append(callers) }
            })
        }
        // Two callers get the result: the end is told 2.
        async let first = join()
        async let second = join()
        try #require(await eventually { coalescer.waiterCount == 2 })
        gate.open()
        #expect(try await first + second == 14)
        #expect(await eventually { told.counts.withLock { $0 } == [2] })
        // Its only caller left: the job still ends, and is told 0.
        gate.close()
        let left = Task { try await join() }
        try #require(await eventually { coalescer.waiterCount == 1 })
        left.cancel()
        _ = await left.result
        gate.open()
        #expect(await eventually { told.counts.withLock { $0 } == [2, 0] })
        // What the download stage does with it: the bytes' hold leaves with a count of 0.
        let pending = PendingEntries()
        let id = pending.hold(Data([1]), key: "k", metadata: CacheMetadata())
        pending.setHolders("k", id: id, 0)
        #expect(pending.count == 0)
    }

    @Test("the origin key is scheme, host and port, in lower case")
    func originKey() {
        #expect(OriginalStage.originKey(URL(string: "HTTPS://Images.Example.com:8443/a.jpg")!) == "https://images.example.com:8443")
        #expect(OriginalStage.originKey(URL(string: "http://x/a.jpg")!) == "http://x")
    }
}

@Suite("RenderStage")
struct RenderStageTests {
    @Test("decodes with the first coder that accepts the bytes, transforms, encodes when asked; no pixels stay counted")
    func render() async throws {
        let f = StageFixture()
        var context = ImageContext(thumbnailPixelSize: PixelSize(4))
        context.encodeFormat = .timg
        let plan = f.plan("f.timg", context: context)
        let rendered = try await f.stages.render.render(TestCoder.encode(width: 16, height: 8), plan, derived: false, encoding: false)
        #expect(rendered.image.pixelSize == PixelSize(width: 4, height: 2))
        #expect(rendered.encoded == nil, "no encode unless asked")
        #expect(f.manager.decodedPixelsInFlight == 0)
        let derived = try await f.stages.render.render(TestCoder.encode(width: 16, height: 8), plan, derived: true)
        #expect(derived.image.pixelSize == PixelSize(width: 16, height: 8), "derived bytes are the finished image: no thumbnail again")
    }

    @Test("bytes no coder recognises are unsupportedFormat, naming the coders")
    func unsupported() async throws {
        let f = StageFixture()
        let error = await #expect(throws: WebImageError.self) {
            try await f.stages.render.render(Data("not an image".utf8), f.plan("g.timg"), derived: false)
        }
        #expect(error?.code == .unsupportedFormat && error?.message.contains("test") == true, "\(String(describing: error))")
    }
}

@Suite("PublishStage")
struct PublishStageTests {
    @Test("an original is stored unless the options or the context keep it off disk")
    func storeOriginal() async throws {
        let f = StageFixture()
        let bytes = TestCoder.encode(width: 2, height: 2)
        #expect(await f.stages.publish.storeOriginal(bytes, response: nil, f.plan("h.timg", options: [.waitStoreCache, .cacheMemoryOnly])) == nil)
        #expect(try await f.store.data(forKey: f.plan("h.timg").plainKey) == nil)
        var memoryOnly = ImageContext()
        memoryOnly.storeCacheTiers = [.memory]
        _ = await f.stages.publish.storeOriginal(bytes, response: nil, f.plan("h.timg", options: .waitStoreCache, context: memoryOnly))
        #expect(try await f.store.data(forKey: f.plan("h.timg").plainKey) == nil)
        _ = await f.stages.publish.storeOriginal(bytes, response: nil, f.plan("h.timg", options: .waitStoreCache))
        #expect(try await f.store.data(forKey: f.plan("h.timg").plainKey) == bytes)
    }

    @Test("a background write is found before it lands, and a write the caller waits for returns its failure")
    func writes() async throws {
        let gated = GatedStore()
        let f = StageFixture(store: gated)
        let plan = f.plan("i.timg")
        _ = await f.stages.publish.write(Data([7]), key: plan.plainKey, metadata: CacheMetadata(), store: gated, wait: false)
        #expect(await f.stages.lookup.entry(plan.plainKey, plan, firstRead: nil)?.entry.data == Data([7]), "pending, found before the store has it")
        gated.open()
        #expect(await eventually { f.manager.pendingStoreWrites.count == 0 })
        #expect(try await gated.data(forKey: plan.plainKey) == Data([7]))
        let failure = await f.stages.publish.write(Data([8]), key: "k", metadata: CacheMetadata(), store: FullDiskStore(), wait: true)
        #expect(failure?.code == .storeFailed)
    }
}

@Suite("The URL policy and stored entries")
struct StoredPolicyTests {
    /// A loader whose every answer came, by a redirect, from test://elsewhere/.
    struct RedirectedLoader: Loader {
        func canLoad(_ url: URL) -> Bool { url.scheme == "test" }
        func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
            LoadResponse(data: TestCoder.encode(width: 8, height: 8), url: URL(string: "test://elsewhere/final.timg")!)
        }
    }

    @Test("an entry whose bytes a redirect brought from a host the policy now refuses is not served from the disk tier: original, derived result or bytes")
    func redirectTargetRefusedLater() async throws {
        let store = MemoryCacheStore(limits: .unlimited)
        var configuration = ImageManager.Configuration()
        configuration.store = store
        configuration.memoryCache = nil
        configuration.coders.register(TestCoder(), name: "test")
        configuration.loaders.register(RedirectedLoader(), name: "test", schemes: ["test"])
        let manager = ImageManager(configuration: configuration)
        let url = URL(string: "test://host/a.timg")!
        let thumbnail = ImageContext(thumbnailPixelSize: PixelSize(4))
        _ = try await manager.loadImage(with: url, options: .waitStoreCache, context: thumbnail)
        #expect(try await store.metadata(forKey: manager.cacheKey(for: url))?.originalURL == "test://elsewhere/final.timg")
        #expect(try await store.metadata(forKey: manager.resultKey(for: url, context: thumbnail))?.originalURL == "test://elsewhere/final.timg",
                "the derived result remembers where its original came from")
        #expect(try await manager.loadImage(with: url, context: thumbnail).cacheType == .disk, "allowed: a disk hit")

        var refusing = thumbnail
        refusing.urlPolicy = { $0.host == "elsewhere" ? "is not on the allow-list" : nil }
        let derived = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: url, context: refusing) }
        #expect(derived?.code == .forbidden && derived?.message.contains("redirected to test://elsewhere/final.timg") == true,
                "\(String(describing: derived))")
        var plain = ImageContext()
        plain.urlPolicy = refusing.urlPolicy
        let original = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: url, context: plain) }
        #expect(original?.code == .forbidden)
        let bytes = await #expect(throws: WebImageError.self) { try await manager.loadImage(with: url, options: .avoidDecode, context: refusing) }
        #expect(bytes?.code == .forbidden, "the bytes-only fast path judges too")
    }
}
