import Foundation
import Testing
import WebImage
@testable import WebImageLMDB

@Suite("LMDBCacheStore: damaged files and entries")
struct LMDBIntegrityTests {
    /// A payload whose every 16-byte window is unique to its entry, so the test can find it in the file.
    static func payload(_ index: Int, count: Int = 40_000) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 131) ^ ($0 >> 8) &+ index &* 17) }) + Data("END-\(index)".utf8)
    }

    /// Fills a store in `directory` and closes it (its environment goes with the last reference).
    static func fill(_ directory: URL, entries: Int) async throws {
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        for index in 0..<entries { try await store.setData(payload(index), forKey: "k\(index)") }
        await store.close()
    }

    @Test("a data file cut to half is set aside at open: no SIGBUS, every read a miss, writes work")
    func truncated() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.fill(directory, entries: 200)
        let data = directory.appendingPathComponent("data.mdb")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: data.path)[.size] as? Int)
        #expect(size > 4 << 20)
        let handle = try FileHandle(forWritingTo: data)
        try handle.truncate(atOffset: UInt64(size / 2))
        try handle.close()

        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        for index in stride(from: 0, to: 200, by: 7) {
            #expect(try await store.entry(forKey: "k\(index)") == nil)
        }
        #expect(try await store.count == 0)
        try await store.setData(Self.payload(1), forKey: "k1")
        #expect(try await store.entry(forKey: "k1")?.data == Self.payload(1))
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(names.contains { $0.hasPrefix("data.mdb.damaged-") } && names.contains { $0.hasPrefix("lock.mdb.damaged-") }, "\(names)")
        // A sound file is left alone.
        await store.close()
        let again = try LMDBCacheStore(directory: directory, limits: .unlimited)
        #expect(try await again.entry(forKey: "k1")?.data == Self.payload(1))
    }

    @Test("an environment this process has open is in use: not walked, and its lock is not taken from it")
    func inUseHere() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        try await store.setData(Self.payload(1), forKey: "k1")
        #expect(LMDBFileCheck.check(directory: directory) == .inUse)
        #expect(LMDBFileCheck.check(directory: directory) == .inUse)
        #expect(try await store.entry(forKey: "k1")?.data == Self.payload(1))
        // LMDB's own lock on lock.mdb is still held: the check never opened the file.
        let lockFile = directory.appendingPathComponent("lock.mdb").path
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: lockFile)[.systemFileNumber] as? Int)
        let locks = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        #expect(locks.split(separator: "\n").contains { $0.contains("POSIX") && $0.contains(":\(inode) ") && $0.contains(" \(getpid()) ") },
                "LMDB's lock of this process on lock.mdb")
    }

    @Test("a flipped payload byte inside the map is a miss, never wrong bytes, and the entry is removed")
    func flipped() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.fill(directory, entries: 3)
        let data = directory.appendingPathComponent("data.mdb")
        var file = try Data(contentsOf: data)
        let needle = Self.payload(1).subdata(in: 20_000..<20_032)
        let found = try #require(file.range(of: needle))
        file[found.lowerBound + 5] ^= 0x01
        try file.write(to: data)

        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        #expect(try await store.entry(forKey: "k1") == nil)
        #expect(try await store.count == 2, "the damaged entry is removed")
        #expect(try await store.entry(forKey: "k0")?.data == Self.payload(0))
        #expect(try await store.entry(forKey: "k2")?.data == Self.payload(2))
    }

    @Test("an entry of format 2 (an XXH64 checksum, the format before) still reads, checked with XXH64, and a flipped byte in it is a miss")
    func formatTwo() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.fill(directory, entries: 2)
        // Rewrite both records as format 2 wrote them: version byte 2, the payload's XXH64.
        let data = directory.appendingPathComponent("data.mdb")
        var file = try Data(contentsOf: data)
        for index in 0..<2 {
            let checksum = try #require(file.range(of: Data(LMDBRecord.bigEndian(XXH3.hash(Self.payload(index)))))).lowerBound
            #expect(file[checksum - 9] == LMDBRecord.version)
            file[checksum - 9] = 2
            file.replaceSubrange(checksum..<checksum + 8, with: LMDBRecord.bigEndian(XXH64.hash(Self.payload(index))))
        }
        let needle = Self.payload(1).subdata(in: 20_000..<20_032)
        let found = try #require(file.range(of: needle))
        file[found.lowerBound + 5] ^= 0x01
        try file.write(to: data)

        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        let entry = try await store.entry(forKey: "k0")
        #expect(entry?.data == Self.payload(0) && entry?.checksum == nil, "read, and no XXH64 handed on as if it were the XXH3 of an ETag")
        #expect(try await store.entry(forKey: "k1") == nil, "the flipped format-2 entry is damaged")
    }
}
