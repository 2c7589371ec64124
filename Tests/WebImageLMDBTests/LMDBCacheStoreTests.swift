import Foundation
import Testing
import WebImage
import WebImageLMDB
import WebImageTesting

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

    @Test("passes CacheStoreConformance with reads on the calling thread")
    func conformanceInline() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try await CacheStoreConformance {
            try LMDBCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: .unlimited,
                               options: .init(readsOnCallingThread: true))
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

    @Test("bad directories and data files are typed errors")
    func badInput() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("file")
        try Data([1]).write(to: file)
        let notDirectory = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: file) }
        #expect(notDirectory?.code == .storeFailed && notDirectory?.message.contains("not a directory") == true)

        let corrupt = root.appendingPathComponent("corrupt")
        try FileManager.default.createDirectory(at: corrupt, withIntermediateDirectories: true)
        try Data((0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: corrupt.appendingPathComponent("data.mdb"))
        let invalid = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: corrupt) }
        #expect(invalid?.code == .storeFailed)
        #expect(invalid?.message.contains("MDB_INVALID") == true || invalid?.message.contains("not an LMDB") == true, "\(String(describing: invalid))")

        let readOnly = root.appendingPathComponent("ro")
        try FileManager.default.createDirectory(at: readOnly, withIntermediateDirectories: true)
        try setImmutable(readOnly, true)
        defer { try? setImmutable(readOnly, false) }
        let denied = #expect(throws: WebImageError.self) { try LMDBCacheStore(directory: readOnly) }
        #expect(denied?.code == .storeFailed && denied?.message.contains("mdb_env_open") == true)
    }

    @Test("the registry makes it under 'lmdb' and rejects bad settings")
    func registry() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let registry = CacheStoreRegistry.standard
        registry.registerLMDB()
        #expect(try registry.makeStore(named: "lmdb", settings: CacheStoreSettings(directory: directory)) is LMDBCacheStore)
        let error = #expect(throws: WebImageError.self) {
            try registry.makeStore(named: "lmdb", settings: CacheStoreSettings(directory: directory, extra: ["lmdb.mapSize": "-5"]))
        }
        #expect(error?.message.contains("lmdb.mapSize") == true)
    }
}

/// Unwritable even for root (CI runs as root): mode 0500 plus the immutable attribute.
func setImmutable(_ directory: URL, _ on: Bool) throws {
    try FileManager.default.setAttributes([.posixPermissions: on ? 0o500 : 0o700], ofItemAtPath: directory.path)
    guard getuid() == 0 else { return }
    try run("/usr/bin/chattr", [on ? "+i" : "-i", directory.path])
}
