import Foundation
import Testing
import WebImage
import WebImageTesting

@Suite("MemoryImageCache")
struct MemoryImageCacheTests {
    func image(bytes: Int) -> Image {
        Image(pixelSize: PixelSize(width: bytes, height: 1), storage: PixelBuffer(size: PixelSize(width: bytes, height: 1), channels: 1, bytes: [UInt8](repeating: 0, count: bytes)))
    }

    @Test("charges exact bytes and evicts least recently used first")
    func lru() {
        let cache = MemoryImageCache(limits: .init(costLimit: 300, entryCostLimit: 300))
        cache.setImage(image(bytes: 100), forKey: "a")
        cache.setImage(image(bytes: 100), forKey: "b")
        cache.setImage(image(bytes: 100), forKey: "c")
        #expect(cache.totalCost == 300)
        _ = cache.image(forKey: "a")  // a is now the most recent
        cache.setImage(image(bytes: 100), forKey: "d")
        #expect(cache.image(forKey: "b") == nil)
        #expect(cache.keys == ["d", "a", "c"])
        #expect(cache.totalCost == 300)
    }

    @Test("count limit, per-entry cap, replacement")
    func limits() {
        let cache = MemoryImageCache(limits: .init(costLimit: 1000, countLimit: 2))
        #expect(cache.limits.entryCostLimit == 100)
        #expect(cache.setImage(image(bytes: 50), forKey: "a"))
        #expect(cache.setImage(image(bytes: 50), forKey: "b"))
        #expect(cache.setImage(image(bytes: 50), forKey: "c"))
        #expect(cache.count == 2 && cache.image(forKey: "a") == nil)
        #expect(!cache.setImage(image(bytes: 101), forKey: "c"), "over the per-entry cap")
        #expect(cache.image(forKey: "c") == nil, "a refused replacement must not leave the stale image")
        cache.setImage(image(bytes: 10), forKey: "b")
        #expect(cache.totalCost == 10)
    }

    @Test("trim and purge")
    func trim() {
        let cache = MemoryImageCache(limits: .init(costLimit: 10_000, entryCostLimit: 10_000))
        for index in 0..<10 { cache.setImage(image(bytes: 100), forKey: "k\(index)") }
        cache.trim(toCost: 450)
        #expect(cache.totalCost == 400 && cache.count == 4)
        #expect(Set(cache.keys) == ["k6", "k7", "k8", "k9"])
        cache.trim(toCount: 1)
        #expect(cache.keys == ["k9"])
        cache.limits = .init(costLimit: 0)
        #expect(cache.count == 0)
        cache.limits = .init(costLimit: 10_000, entryCostLimit: 10_000)
        for index in 0..<100_000 { cache.setImage(image(bytes: 0), forKey: "z\(index)") }
        cache.removeAll()  // must not overflow the stack freeing a long list
        #expect(cache.count == 0 && cache.totalCost == 0)
    }

    @Test("keeps the order of a reference LRU through random sets, hits, removals, trims and purges")
    func matchesReferenceLRU() {
        // The list's links are unmanaged (the index owns the nodes): a link left
        // to a freed node would show here as a wrong order, a wrong count, or a crash.
        let cache = MemoryImageCache(limits: .init(costLimit: 2_000, countLimit: 12, entryCostLimit: 400))
        var model: [(key: String, cost: Int)] = []  // most recent first
        var generator = SplitMix(seed: 7)
        func trimModel(cost: Int, count: Int) {
            while !model.isEmpty, model.reduce(0, { $0 + $1.cost }) > cost || model.count > count { model.removeLast() }
        }
        for step in 0..<20_000 {
            let key = "k\(generator.next() % 30)"
            switch generator.next() % 10 {
            case 0...3:
                let cost = Int(generator.next() % 5) * 100 + 1
                model.removeAll { $0.key == key }
                if cache.setImage(image(bytes: cost), forKey: key) {
                    model.insert((key, cost), at: 0)
                    trimModel(cost: 2_000, count: 12)
                }
            case 4...7:
                let hit = cache.image(forKey: key) != nil
                if let index = model.firstIndex(where: { $0.key == key }) {
                    #expect(hit, "step \(step): \(key) should be cached")
                    model.insert(model.remove(at: index), at: 0)
                } else {
                    #expect(!hit, "step \(step): \(key) should not be cached")
                }
            case 8:
                cache.removeImage(forKey: key)
                model.removeAll { $0.key == key }
            default:
                if step % 7 == 0 {
                    cache.removeAll()
                    model.removeAll()
                } else {
                    cache.trim(toCount: 6)
                    trimModel(cost: .max, count: 6)
                }
            }
            guard cache.keys == model.map(\.key) else {
                Issue.record("step \(step): order \(cache.keys) against \(model.map(\.key))")
                return
            }
        }
        #expect(cache.totalCost == model.reduce(0) { $0 + $1.cost })
    }

    @Test("stays within limits under heavy concurrency")
    func concurrency() async {
        let cache = MemoryImageCache(limits: .init(costLimit: 5_000, countLimit: 40, entryCostLimit: 500))
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in 0..<2_000 {
                        let key = "k\((index * 7 + worker) % 97)"
                        switch index % 4 {
                        case 0, 1: cache.setImage(self.image(bytes: (index % 5) * 100), forKey: key)
                        case 2: _ = cache.image(forKey: key)
                        default: cache.removeImage(forKey: key)
                        }
                    }
                }
            }
        }
        #expect(cache.totalCost <= 5_000)
        #expect(cache.count <= 40)
        #expect(cache.keys.count == cache.count)
    }
}
