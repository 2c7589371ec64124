import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage

@Suite("ImageManager: background writes and shutdown")
struct ShutdownTests {
    @Test("a burst of loads leaves at most maxPendingWrites writes running; the rest are dropped, the images served")
    func boundedWrites() async throws {
        let store = GatedStore()
        let h = Harness(store: store) { $0.maxPendingWrites = 10 }
        for index in 0..<50 { h.loader.serve("test://host/\(index).timg", data: TestCoder.encode(width: 4, height: 4, seed: UInt8(index))) }
        for index in 0..<50 {
            let result = try await h.manager.loadImage(with: h.url("\(index).timg"))
            #expect(result.image != nil)
            #expect(h.manager.pendingStoreWrites.count <= 10)
        }
        #expect(h.manager.pendingStoreWrites.count == 10)
        store.open()
        #expect(await h.manager.shutdown(gracePeriod: .seconds(600)))
        #expect(h.manager.pendingStoreWrites.count == 0)
        #expect(try await store.count == 10, "the first ten were written, the forty past the bound dropped")
    }

    @Test("shutdown refuses new loads, waits for pending writes, then closes the store")
    func waitsForWrites() async throws {
        let store = GatedStore()
        let h = Harness(store: store)
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 4, height: 4))
        h.loader.serve("test://host/b.timg", data: TestCoder.encode(width: 4, height: 4))
        _ = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(h.manager.pendingStoreWrites.count == 1)

        let returned = Lock(false)
        let shutdown = Task {
            let clean = await h.manager.shutdown(gracePeriod: .seconds(600))
            returned.withLock { $0 = true }
            return clean
        }
        // New loads are refused as soon as shutdown has begun.
        var refused: WebImageError?
        while refused == nil {
            do { _ = try await h.manager.loadImage(with: h.url("b.timg"), options: .fromLoaderOnly); try await Task.sleep(for: .milliseconds(5)) }
            catch let error as WebImageError where error.code == .shutDown { refused = error }
        }
        // The write is held by the store's gate: shutdown cannot have returned.
        #expect(!returned.withLock { $0 })
        #expect(try await store.count == 0)
        store.open()
        #expect(await shutdown.value)
        #expect(try await store.data(forKey: "test://host/a.timg") != nil, "the pending write finished before shutdown returned")
        let count = try await store.count
        #expect(count >= 1 && store.countAtClose == count, "the store was closed after every write, not before")
    }

    @Test("the grace period bounds the wait: false when writes are still running")
    func gracePeriod() async throws {
        let store = GatedStore()
        let h = Harness(store: store)
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 4, height: 4))
        _ = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(await h.manager.shutdown(gracePeriod: .milliseconds(100)) == false)
        #expect(store.countAtClose == nil, "a store with writes still running is not closed")
        store.open()
    }
}
