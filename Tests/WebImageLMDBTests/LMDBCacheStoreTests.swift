import Foundation
import Testing
import WebImage
import WebImageLMDB
import WebImageTesting
import WebImageTestSupport

/// The content the helper process writes for a key (kept in step with LMDBHelper/main.swift).
func helperValue(for index: Int, prefix: String) -> Data {
    var data = Data("\(prefix)-\(index)|".utf8)
    data.append(Data(repeating: UInt8(truncatingIfNeeded: index &* 31 &+ prefix.utf8.count), count: 500 + (index &* 7919) % 40_000))
    return data
}

func temporaryDirectory() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-lmdb-\(UUID().uuidString.prefix(8))")
    try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

final class TestClock: Sendable {
    private let offset = Mutex2(0.0)
    func advance(by seconds: TimeInterval) { offset.add(seconds) }
    var source: @Sendable () -> Date { { Date().addingTimeInterval(self.offset.value) } }
}

/// A tiny lock-protected Double (the test target keeps its own helpers).
final class Mutex2: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var stored: Double
    init(_ value: Double) { stored = value }
    func add(_ delta: Double) { lock.withLock { stored += delta } }
    var value: Double { lock.withLock { stored } }
}

@Suite("LMDBCacheStore")
struct LMDBCacheStoreTests {
    @Test("passes CacheStoreConformance")
    func conformance() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try await CacheStoreConformance(
            makeStore: { try LMDBCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: .unlimited) },
            makeLimitedStore: { limits, clock in
                try LMDBCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: limits, clock: clock)
            }
        ).run()
    }

    @Test("passes CacheStoreConformance with reads on the I/O pool (readsOnCallingThread off)")
    func conformancePooled() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try await CacheStoreConformance {
            try LMDBCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: .unlimited,
                               options: .init(readsOnCallingThread: false))
        }.run()
    }

    @Test("values of 0 bytes to 32 MiB and 10 kB keys")
    func sizes() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        for size in [0, 1, 4095, 32 << 10, 32 << 20] {
            let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ size) })
            let key = String(repeating: "k", count: 10_000) + "\(size)"
            try await store.setData(data, forKey: key)
            #expect(try await store.data(forKey: key) == data, "\(size) bytes")
        }
        #expect(try await store.totalSize == 0 + 1 + 4095 + (32 << 10) + (32 << 20))
    }

    @Test("filling past the initial map size grows it and loses nothing")
    func growth() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited, options: .init(mapSize: 1 << 20, maxMapSize: 1 << 30))
        for index in 0..<80 { try await store.setData(helperValue(for: index, prefix: "g"), forKey: "g-\(index)") }
        #expect(store.mapSize > 1 << 20)
        for index in 0..<80 { #expect(try await store.data(forKey: "g-\(index)") == helperValue(for: index, prefix: "g")) }
        #expect(try await store.count == 80)
    }

    @Test("at the hard map maximum, writes evict the oldest entries instead of failing")
    func hardMaximum() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited, options: .init(mapSize: 1 << 20, maxMapSize: 4 << 20))
        for index in 0..<100 { try await store.setData(Data(count: 100_000), forKey: "m-\(index)") }
        #expect(store.mapSize == 4 << 20)
        #expect(try await store.data(forKey: "m-99")?.count == 100_000)
        #expect(try await store.data(forKey: "m-0") == nil)
        #expect(try await store.totalSize <= 4 << 20)

        let tooBig = await #expect(throws: WebImageError.self) { try await store.setData(Data(count: 8 << 20), forKey: "huge") }
        #expect(tooBig?.code == .storeFailed && tooBig?.message.contains("lmdb.maxMapSize") == true)
        #expect(try await store.metadata(forKey: "huge") == nil, "no half-written entry")
    }

    @Test("concurrent writes share commits and all land")
    func groupCommit() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<300 {
                group.addTask { try await store.setData(Data(repeating: UInt8(index % 251), count: 1000 + index), forKey: "g-\(index % 250)") }
            }
            try await group.waitForAll()
        }
        #expect(try await store.count == 250, "keys written twice in one batch count once")
        for index in 0..<250 {
            let data = try await store.data(forKey: "g-\(index)")
            // g-0..g-49 were written twice (by index and index + 250): either write may be last.
            let expected = index < 50 ? [1000 + index, 1250 + index] : [1000 + index]
            #expect(data.map { expected.contains($0.count) } == true, "g-\(index): \(data?.count ?? -1) bytes")
        }
        let sizes = try await (0..<250).asyncMap { try await store.data(forKey: "g-\($0)")?.count ?? 0 }.reduce(0, +)
        #expect(try await store.totalSize == sizes, "the size total matches the entries")
    }

    @Test("a burst of large writes keeps the store within maxSize, judged by the pages it occupies: data.mdb ends near the limit, not twice it")
    func staysWithinMaxSize() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let maxSize = 4 << 20
        let store = try LMDBCacheStore(directory: directory, limits: CacheLimits(maxAge: nil, maxSize: maxSize, sweepInterval: nil))
        // Values just over a 4 KiB page take two pages each: counting the data alone
        // let the file grow to twice the limit. (A thumbnail of 20 KB takes five or
        // six pages: a tenth or more over its data.)
        var generator = SplitMix(seed: 7)
        let values = (0..<8).map { _ in Data((0..<4_200).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
        var peakFile = 0
        for round in 0..<20 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<100 {
                    group.addTask { try await store.setData(values[index % 8], forKey: "burst-\(round)-\(index)") }
                }
                try await group.waitForAll()
            }
            let file = (try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("data.mdb").path)[.size] as? Int) ?? 0
            peakFile = max(peakFile, file)
        }
        let size = try await store.totalSize, count = try await store.count
        #expect(size <= maxSize && count >= 20, "data \(size) bytes in \(count) entries")
        // The file holds the pages in use, at most one burst (100 writes of two
        // pages) past the limit before its sweep, and pages freed by the last trim
        // that LMDB reuses two transactions later.
        #expect(peakFile <= maxSize + 100 * (8 << 10) + (1 << 20), "data.mdb reached \(peakFile) bytes, with maxSize \(maxSize)")
        await store.close()
    }

    @Test("in a batch, a value that cannot fit fails alone; the writes beside it succeed")
    func groupCommitFailure() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LMDBCacheStore(directory: directory, limits: .unlimited, options: .init(mapSize: 1 << 20, maxMapSize: 8 << 20))
        let failures = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                do { try await store.setData(Data(count: 16 << 20), forKey: "huge"); return nil } catch { return "huge" }
            }
            for index in 0..<50 {
                group.addTask {
                    do { try await store.setData(Data(repeating: 7, count: 10_000), forKey: "s-\(index)"); return nil } catch { return "s-\(index): \(error)" }
                }
            }
            return try await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
        }
        #expect(failures == ["huge"], "only the value too large for the map failed: \(failures)")
        #expect(try await store.metadata(forKey: "huge") == nil)
        try await store.setData(Data(count: 10), forKey: "after")
        #expect(try await store.data(forKey: "after")?.count == 10, "the store still works")
    }

    @Test("the timer sweeps without any call")
    func timer() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try LMDBCacheStore(directory: directory, limits: CacheLimits(maxAge: .seconds(60), maxSize: nil, sweepInterval: .milliseconds(50)), clock: clock.source)
        try await store.setData(Data([1]), forKey: "old")
        clock.advance(by: 120)
        var emptied = false
        for _ in 0..<200 where !emptied {
            emptied = try await store.count == 0
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(emptied)
    }

    @Test("batched access dates for keys of every form (one byte, 400 bytes, hashed past 400, multibyte) reach the file at close; a removed key's date is dropped")
    func accessDatesByKeyForm() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let keys = ["k", String(repeating: "a", count: 400), String(repeating: "b", count: 401), "é/日本/\u{1F600}", String(repeating: "é", count: 250)]
        do {
            let store = try LMDBCacheStore(directory: directory, limits: .unlimited, options: .init(accessFlushInterval: .seconds(3600)), clock: clock.source)
            for (index, key) in keys.enumerated() { try await store.setData(Data([UInt8(index)]), forKey: key) }
            try await store.setData(Data([9]), forKey: "gone")
            var written: [String: Date] = [:]
            for key in keys { written[key] = try #require(try await store.metadata(forKey: key)).accessedAt }
            clock.advance(by: 600)
            for (index, key) in keys.enumerated() {
                #expect(try await store.entry(forKey: key)?.data == Data([UInt8(index)]), "\(key.utf8.count) bytes")
            }
            _ = try await store.entry(forKey: "gone")
            try await store.removeData(forKey: "gone")
            for key in keys { #expect(try #require(try await store.metadata(forKey: key)).accessedAt == written[key], "still in memory") }
            await store.close()
        }
        let reopened = try LMDBCacheStore(directory: directory, limits: .unlimited, clock: clock.source)
        for key in keys {
            let stamp = try #require(try await reopened.metadata(forKey: key), "\(key.utf8.count) bytes").accessedAt
            #expect(stamp.timeIntervalSince(clock.source()) > -60, "the hit's date, 600 s after the write, is in the file")
        }
        #expect(try await reopened.metadata(forKey: "gone") == nil)
        #expect(try await reopened.count == keys.count)
        await reopened.close()
    }

    @Test("close writes the access dates still in memory and stops the timers")
    func close() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try LMDBCacheStore(directory: directory, limits: CacheLimits(maxAge: .seconds(3600), maxSize: nil, sweepInterval: .milliseconds(20)),
                                       options: .init(accessFlushInterval: .seconds(3600)), clock: clock.source)
        try await store.setData(Data([1]), forKey: "k")
        let written = try #require(try await store.metadata(forKey: "k")).accessedAt
        clock.advance(by: 600)
        _ = try await store.entry(forKey: "k")  // its access date waits in memory (flush interval 1 h)
        #expect(try #require(try await store.metadata(forKey: "k")).accessedAt == written)
        await store.close()
        #expect(try #require(try await store.metadata(forKey: "k")).accessedAt > written, "close wrote the pending access date")
        // The sweep timer is stopped: an expired entry stays until someone sweeps.
        clock.advance(by: 7200)
        // Ten sweep intervals for a timer that was not stopped to show itself (a busy machine can only hide it).
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await store.count == 1)
        await store.close()  // twice is harmless
    }

    @Test("bad directories and data files are typed errors")
    func badInput() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("file")
        try Data([1]).write(to: file)
        let notDirectory = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: file) }
        #expect(notDirectory?.code == .storeFailed && notDirectory?.message.contains("not a directory") == true)

        // A directory that can be made but whose files' paths are too long for LMDB:
        // the open fails, and the directories made for it are removed again.
        let deep = pathOfLength(4096 - 5, under: root)
        let tooLong = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: deep) }
        #expect(tooLong?.code == .storeFailed && tooLong?.message.contains("mdb_env_open") == true, "\(String(describing: tooLong))")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("made").path), "the directories made for it are left behind")

        // A map the system refuses (200 TiB, more than x86-64's 128 TiB of user
        // address space): LMDB has made its files by then, and they go with the directory.
        var huge = LMDBCacheStore.Options()
        huge.mapSize = 200 << 40
        huge.maxMapSize = 200 << 40
        let unmappable = root.appendingPathComponent("huge/store")
        let refused = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: unmappable, options: huge) }
        #expect(refused?.code == .storeFailed && refused?.message.contains("mdb_env_open") == true, "\(String(describing: refused))")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("huge").path), "nothing is left behind")

        // A FIFO for the data file: refused, not an open that waits for a writer.
        let fifo = root.appendingPathComponent("fifo")
        try FileManager.default.createDirectory(at: fifo, withIntermediateDirectories: true)
        #expect(mkfifo(fifo.appendingPathComponent("data.mdb").path, 0o600) == 0)
        let notFile = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: fifo) }
        #expect(notFile?.code == .storeFailed && notFile?.message.contains("not a regular file") == true, "\(String(describing: notFile))")

        let corrupt = root.appendingPathComponent("corrupt")
        try FileManager.default.createDirectory(at: corrupt, withIntermediateDirectories: true)
        try Data((0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: corrupt.appendingPathComponent("data.mdb"))
        // A data file that is not LMDB at all is set aside (renamed, never deleted) and the store starts empty.
        let reopened = try LMDBCacheStore(directory: corrupt)
        #expect(try await reopened.count == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: corrupt.path)
        #expect(names.contains { $0.hasPrefix("data.mdb.damaged-") }, "\(names)")

        let readOnly = root.appendingPathComponent("ro")
        try FileManager.default.createDirectory(at: readOnly, withIntermediateDirectories: true)
        try setImmutable(readOnly, true)
        defer { try? setImmutable(readOnly, false) }
        let denied = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: readOnly) }
        // Found before LMDB is opened, in the system's words.
        #expect(denied?.code == .storeFailed && denied?.message.contains("cannot be written") == true, "\(String(describing: denied))")
    }

    @Test("the registry makes it under 'lmdb' and rejects bad settings")
    func registry() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let registry = CacheStoreRegistry.standard
        registry.registerLMDB()
        #expect(try registry.makeStore(named: "lmdb", settings: CacheStoreSettings(directory: directory)) is LMDBCacheStore)
        #expect(registry.configurationKeys(forStoreNamed: "lmdb").sorted()
                == ["store.lmdb.mapSize", "store.lmdb.maxMapSize", "store.lmdb.readsOnCallingThread"])
        for (key, value) in [("store.lmdb.mapSize", "-5"), ("store.lmdb.mapSize", "0"), ("store.lmdb.maxMapSize", "lots"),
                             ("store.lmdb.readsOnCallingThread", "perhaps")] {
            let error = #expect(throws: WebImageError.self) {
                try registry.makeStore(named: "lmdb", settings: CacheStoreSettings(directory: directory, values: ConfigValues([key: value])))
            }
            #expect(error?.code == .invalidArgument && error?.message.hasPrefix("\(key): '\(value)'") == true, "\(error?.message ?? "")")
        }
        let pooled = try registry.makeStore(named: "lmdb", settings: CacheStoreSettings(
            directory: directory, values: ConfigValues(["store.lmdb.readsOnCallingThread": "false", "store.lmdb.mapSize": "64MiB"])))
        #expect((pooled as? LMDBCacheStore)?.readsOnCallingThread == false, "store.lmdb.* reaches the store through its scope")
    }
}

/// Unwritable even for root (CI runs as root): mode 0500 plus the immutable attribute.
func setImmutable(_ directory: URL, _ on: Bool) throws {
    try FileManager.default.setAttributes([.posixPermissions: on ? 0o500 : 0o700], ofItemAtPath: directory.path)
    guard getuid() == 0 else { return }
    try run("/usr/bin/chattr", [on ? "+i" : "-i", directory.path])
}

extension Sequence where Element: Sendable {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
