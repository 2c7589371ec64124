import Foundation
import Synchronization
import Testing
import WebImage
@testable import WebImageHTTP

/// A store whose size reads are counted and may hang: a pure unit of the
/// sampler's logic (the real stores' gauges are read through `webimage serve`).
private final class SizeCountingStore: CacheStore {
    let reads = Atomic<Int>(0)
    let hang = Atomic<Bool>(false)
    let size = Atomic<Int>(100)
    func entry(forKey key: String) async throws -> CacheEntry? { nil }
    func metadata(forKey key: String) async throws -> CacheMetadata? { nil }
    func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {}
    func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {}
    func removeData(forKey key: String) async throws {}
    func removeAll() async throws {}
    func removeExpired() async throws {}
    var totalSize: Int {
        get async throws {
            reads.add(1, ordering: .relaxed)
            if hang.load(ordering: .relaxed) { try await Task.sleep(for: .seconds(3600)) }
            return size.load(ordering: .relaxed)
        }
    }
    var count: Int { get async throws { 7 } }
}

@Suite("The store gauges' sampler")
struct StoreSampleTests {
    @Test("the store is read at most once per interval; a read past the timeout is cancelled and the last value stands")
    func sampled() async throws {
        let store = SizeCountingStore()
        let sample = StoreSample(interval: .seconds(3600), timeout: .milliseconds(200))
        let first = await sample.value(of: store)
        #expect(first?.bytes == 100 && first?.entries == 7)
        store.size.store(500, ordering: .relaxed)
        for _ in 0..<10 { #expect(await sample.value(of: store)?.bytes == 100, "within the interval: the value read before") }
        #expect(store.reads.load(ordering: .relaxed) == 1)

        let due = StoreSample(interval: .zero, timeout: .milliseconds(200))
        #expect(await due.value(of: store)?.bytes == 500)
        store.hang.store(true, ordering: .relaxed)
        // The read hangs for an hour: the timeout cancels it and the last value is given.
        #expect(await due.value(of: store)?.bytes == 500)
        #expect(store.reads.load(ordering: .relaxed) == 3)
    }
}
