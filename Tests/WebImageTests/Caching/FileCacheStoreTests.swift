import Foundation
import Testing
import WebImage
import WebImageTesting

@Suite("FileCacheStore")
struct FileCacheStoreTests {
    @Test("passes CacheStoreConformance")
    func conformance() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try await CacheStoreConformance(
            makeStore: { try FileCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: .unlimited) },
            makeLimitedStore: { limits, clock in try FileCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: limits, clock: clock) }
        ).run()
    }

    @Test("MemoryCacheStore passes CacheStoreConformance")
    func memoryConformance() async throws {
        try await CacheStoreConformance(
            makeStore: { MemoryCacheStore(limits: .unlimited) },
            makeLimitedStore: { limits, clock in MemoryCacheStore(limits: limits, clock: clock) }
        ).run()
    }

    @Test("directory is 0700; files are named by hash and cannot escape")
    func layout() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("cache")
        let store = try FileCacheStore(directory: directory, limits: .unlimited)
        try await store.setData(Data([1]), forKey: "../../escape.png")
        try await store.setData(Data([2]), forKey: "https://x.com/photo.JPG?size=2")
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "tmp" }
        #expect(names.count == 4)
        #expect(names.allSatisfy { $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." } })
        #expect(names.contains { $0.hasSuffix(".png") } && names.contains { $0.hasSuffix(".jpg") })
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("escape.png").path))
        let url = try await store.fileURL(forKey: "../../escape.png")
        #expect(url?.deletingLastPathComponent().standardizedFileURL.path == directory.standardizedFileURL.path)
    }

    @Test("the timer sweeps without any call")
    func timer() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: CacheLimits(maxAge: .seconds(60), maxSize: nil, sweepInterval: .milliseconds(50)), clock: clock.source)
        try await store.setData(Data([1]), forKey: "old")
        clock.advance(by: 120)
        #expect(try await eventually { try await store.count == 0 })
    }

    @Test("a crash before the commit leaves nothing readable, and sweeps clean up")
    func crashBeforeCommit() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: .unlimited, clock: clock.source)
        try await store.setData(Data("old".utf8), forKey: "k")

        // What a writer leaves if killed after writing its temp file, and after
        // renaming the data but before renaming the meta file (the commit point).
        let hash = SHA256Digest.hex("k")
        try Data("partial".utf8).write(to: directory.appendingPathComponent("tmp/\(UUID().uuidString)"))
        try Data("new but uncommitted".utf8).write(to: directory.appendingPathComponent("\(hash)-deadbeef"))
        try Data("orphan".utf8).write(to: directory.appendingPathComponent("\(SHA256Digest.hex("other"))-cafebabe"))

        let reopened = try FileCacheStore(directory: directory, limits: .unlimited, clock: clock.source)
        #expect(try await reopened.data(forKey: "k") == Data("old".utf8))
        #expect(try await reopened.data(forKey: "other") == nil)

        clock.advance(by: 120)  // past the grace period for writes in flight
        try await reopened.removeExpired()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "tmp" }
        #expect(names.count == 2, "only the committed entry's two files remain: \(names)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path).isEmpty)
        #expect(try await reopened.data(forKey: "k") == Data("old".utf8))
    }

    @Test("a corrupt meta file is a miss, not a crash")
    func corruptMeta() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCacheStore(directory: directory, limits: .unlimited)
        try await store.setData(Data([1, 2, 3]), forKey: "k")
        try Data("{not json".utf8).write(to: directory.appendingPathComponent(SHA256Digest.hex("k") + ".meta"))
        #expect(try await store.entry(forKey: "k") == nil)
        try await store.setData(Data([4]), forKey: "k")
        #expect(try await store.data(forKey: "k") == Data([4]))
    }

    @Test("a path that is a file, or an unwritable directory, is a typed error")
    func badDirectories() throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("file")
        try Data([0]).write(to: file)
        let error = #expect(throws: WebImageError.self) { try FileCacheStore(directory: file) }
        #expect(error?.code == .storeFailed && error?.message.contains("not a directory") == true)

        #expect(throws: WebImageError.self) { try FileCacheStore(directory: file.appendingPathComponent("below-a-file")) }

        let readOnly = root.appendingPathComponent("ro")
        try FileManager.default.createDirectory(at: readOnly, withIntermediateDirectories: true)
        try makeUnwritable(readOnly)
        defer { makeWritable(readOnly) }
        let readOnlyError = #expect(throws: WebImageError.self) { try FileCacheStore(directory: readOnly) }
        #expect(readOnlyError?.code == .storeFailed)
    }
}

extension Sequence {
    func asyncFilter(_ isIncluded: (Element) async throws -> Bool) async rethrows -> [Element] {
        var result: [Element] = []
        for element in self where try await isIncluded(element) { result.append(element) }
        return result
    }
}
