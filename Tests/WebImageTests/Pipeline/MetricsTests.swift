import CoreMetrics
import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage

/// Records counters and timers by label and dimensions.
final class RecordingMetrics: MetricsFactory, Sendable {
    static let shared: RecordingMetrics = {
        let factory = RecordingMetrics()
        MetricsSystem.bootstrap(factory)
        return factory
    }()

    private let values = Lock<[String: Int64]>([:])

    static func name(_ label: String, _ dimensions: [(String, String)]) -> String {
        label + dimensions.sorted { $0.0 < $1.0 }.map { "|\($0.0)=\($0.1)" }.joined()
    }

    func value(_ label: String, _ dimensions: [(String, String)]) -> Int64 { values.withLock { $0[Self.name(label, dimensions)] ?? 0 } }
    func add(_ name: String, _ amount: Int64) { values.withLock { $0[name, default: 0] += amount } }

    final class Handler: CounterHandler, RecorderHandler, TimerHandler, Sendable {
        let name: String
        let factory: RecordingMetrics
        init(_ name: String, _ factory: RecordingMetrics) { (self.name, self.factory) = (name, factory) }
        func increment(by amount: Int64) { factory.add(name, amount) }
        func reset() {}
        func record(_ value: Int64) { factory.add(name, 1) }
        func record(_ value: Double) { factory.add(name, 1) }
        func recordNanoseconds(_ duration: Int64) { factory.add(name, 1) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Handler(Self.name(label, dimensions), self) }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Handler(Self.name(label, dimensions), self) }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Handler(Self.name(label, dimensions), self) }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

@Suite("ImageManager: metrics")
struct MetricsTests {
    @Test("hits per tier, misses, bytes loaded, durations and errors are counted")
    func counted() async throws {
        let metrics = RecordingMetrics.shared
        let tag = [("test", UUID().uuidString)]
        let h = Harness { $0.metricsDimensions = tag }
        let bytes = TestCoder.encode(width: 4, height: 4)
        h.loader.serve("test://host/a.timg", data: bytes)
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        _ = try await h.manager.loadImage(with: h.url("a.timg"))
        h.manager.memoryCache?.removeAll()
        _ = try await h.manager.loadImage(with: h.url("a.timg"))
        _ = try? await h.manager.loadImage(with: h.url("missing.timg"))

        #expect(metrics.value("webimage_cache_misses_total", tag) == 2)
        #expect(metrics.value("webimage_cache_hits_total", [("tier", "memory")] + tag) == 1)
        #expect(metrics.value("webimage_cache_hits_total", [("tier", "disk")] + tag) == 1)
        #expect(metrics.value("webimage_loaded_bytes_total", tag) == Int64(bytes.count))
        #expect(metrics.value("webimage_load_duration_seconds", tag) == 1)
        #expect(metrics.value("webimage_decode_duration_seconds", tag) == 2)
        #expect(metrics.value("webimage_errors_total", [("code", "notFound")] + tag) == 1)
    }
}

@Suite("ImageManager: a store's system-call failures")
struct StoreSystemCallTests {
    @Test("an entry file that exists and cannot be opened (ELOOP) is a store error, counted in webimage_store_errors_total, and the load goes to the origin; a missing one is a plain miss")
    func unreadableEntry() async throws {
        let metrics = RecordingMetrics.shared
        let tag = [("test", UUID().uuidString)]
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("syscall-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try FileCacheStore(directory: root, limits: .unlimited)
        let h = Harness(store: store) { $0.metricsDimensions = tag }
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 4, height: 4))
        let key = h.manager.cacheKey(for: h.url("a.timg"))

        // Missing: a miss, no store error.
        #expect(try await store.entry(forKey: key) == nil)
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: [.waitStoreCache, .cacheMemoryOnly])
        #expect(metrics.value("webimage_store_errors_total", tag) == 0)

        // There, and unreadable: a symbolic link to itself.
        try await store.setData(Data([1, 2, 3]), forKey: key)
        let path = try #require(try await store.fileURL(forKey: key)).path
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: path)
        do {
            _ = try await store.entry(forKey: key)
            Issue.record("an entry that cannot be opened throws")
        } catch let error as WebImageError {
            #expect(error.code == .storeFailed && error.message.contains("open") && error.message.contains(path), "\(error)")
        }
        h.manager.memoryCache?.removeAll()
        let result = try await h.manager.loadImage(with: h.url("a.timg"), options: .cacheMemoryOnly)
        #expect(result.cacheType == .none, "the store's failure is a miss for the load: the origin answers")
        #expect(metrics.value("webimage_store_errors_total", tag) >= 1)

        // A directory in the entry's place: there, and no entry: a store error too.
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let before = metrics.value("webimage_store_errors_total", tag)
        let directory = await #expect(throws: WebImageError.self) { try await store.entry(forKey: key) }
        #expect(directory?.code == .storeFailed && directory?.message.contains("Is a directory") == true, "\(String(describing: directory))")
        h.manager.memoryCache?.removeAll()
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: .cacheMemoryOnly)
        #expect(metrics.value("webimage_store_errors_total", tag) > before)
    }
}
