import Foundation
import Testing
import WebImage
import WebImageLMDB
import WebImageTestSupport
#if canImport(Glibc)
import Glibc
#endif

func randomData(_ count: Int, seed: UInt64) -> Data {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return Data((0..<count).map { _ in
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    })
}

@Suite("LMDBCacheStore on a full disk", .serialized, .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct LMDBDiskFullTests {
    @Test("writes past the disk's size succeed by evicting the oldest entries; the store stays within the disk")
    func evictsToFit() async throws {
        let disk = try SmallFileSystem(size: "4m")
        defer { disk.unmount() }
        let store = try LMDBCacheStore(directory: disk.path.appendingPathComponent("cache"))
        for index in 0..<40 {
            try await store.setData(randomData(200_000, seed: UInt64(index)), forKey: "k\(index)", metadata: CacheMetadata())
        }
        let size = try await store.totalSize, count = try await store.count
        #expect(count > 0 && count < 40 && size < 4 << 20, "\(count) entries, \(size) bytes")
        #expect(try await store.data(forKey: "k39") == randomData(200_000, seed: 39), "the newest entry is whole")
        #expect(try await store.data(forKey: "k0") == nil, "the oldest went first")
    }

    @Test("a new store on a full disk: storeFailed saying so, no SIGBUS from LMDB's lock file, nothing left behind; it opens once there is room")
    func newStoreOnFullDisk() async throws {
        let disk = try SmallFileSystem(size: "1m")
        defer { disk.unmount() }
        let filler = disk.fill()
        let directory = disk.path.appendingPathComponent("cache")
        for _ in 0..<2 {
            let error = #expect(throws: WebImageError.self) { _ = try LMDBCacheStore(directory: directory) }
            #expect(error?.code == .storeFailed && error?.message.contains("full") == true, "\(String(describing: error))")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("lock.mdb").path), "no sparse lock file for the next try to map")
        }
        // A sparse lock file such a crash left behind: its holes cannot be filled either.
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let sparse = directory.appendingPathComponent("lock.mdb").path
        let fd = open(sparse, O_RDWR | O_CREAT, 0o600)
        #expect(ftruncate(fd, 32_896) == 0)  // the size LMDB gives it
        close(fd)
        #expect(throws: WebImageError.self) { _ = try LMDBCacheStore(directory: directory) }
        try FileManager.default.removeItem(at: filler)
        let store = try LMDBCacheStore(directory: directory)
        try await store.setData(Data("after".utf8), forKey: "k", metadata: CacheMetadata())
        #expect(try await store.data(forKey: "k") == Data("after".utf8))
    }

    @Test("a value larger than the disk fails with a typed error, and the store keeps working")
    func tooLargeForTheDisk() async throws {
        let disk = try SmallFileSystem(size: "4m")
        defer { disk.unmount() }
        let store = try LMDBCacheStore(directory: disk.path.appendingPathComponent("cache"))
        try await store.setData(randomData(100_000, seed: 1), forKey: "small", metadata: CacheMetadata())
        let error = await #expect(throws: WebImageError.self) {
            try await store.setData(randomData(5 << 20, seed: 2), forKey: "huge", metadata: CacheMetadata())
        }
        #expect(error?.code == .storeFailed && error?.message.contains("full") == true, "\(String(describing: error))")
        #expect(try await store.data(forKey: "huge") == nil, "no half-written entry")
        try await store.setData(randomData(100_000, seed: 3), forKey: "after", metadata: CacheMetadata())
        #expect(try await store.data(forKey: "after") == randomData(100_000, seed: 3))
    }

    /// The defect: after the disk filled, `cache clear` succeeded but every later
    /// write still failed, because LMDB reuses pages freed by transaction T only from
    /// T+2 on and a failed commit never advances T. The store now commits once more
    /// after it frees pages (settle), so the space it freed is usable at once.
    @Test("another file fills the disk: after removeAll, writes reuse the freed pages; a value larger than that fails typed until space is back")
    func recovers() async throws {
        let disk = try SmallFileSystem(size: "4m")
        defer { disk.unmount() }
        let store = try LMDBCacheStore(directory: disk.path.appendingPathComponent("cache"))
        for index in 0..<8 {
            try await store.setData(randomData(150_000, seed: UInt64(index)), forKey: "k\(index)", metadata: CacheMetadata())
        }
        let filler = disk.fill()
        try await store.removeAll()
        // Not one byte is free on the disk: this write must fit in the pages removeAll freed.
        try await store.setData(randomData(150_000, seed: 100), forKey: "after-clear", metadata: CacheMetadata())
        #expect(try await store.data(forKey: "after-clear") == randomData(150_000, seed: 100))

        let failure = await #expect(throws: WebImageError.self) {
            try await store.setData(randomData(2 << 20, seed: 101), forKey: "large", metadata: CacheMetadata())
        }
        #expect(failure?.code == .storeFailed && failure?.message.contains("full") == true, "\(String(describing: failure))")
        try FileManager.default.removeItem(at: filler)
        try await store.setData(randomData(2 << 20, seed: 101), forKey: "large", metadata: CacheMetadata())
        #expect(try await store.data(forKey: "large") == randomData(2 << 20, seed: 101))
    }
}
