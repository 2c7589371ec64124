public import Foundation
import Synchronization
@_spi(WebImageInternal) public import WebImage

/// Checks the requirements of ``CacheStore`` against a real store.
///
/// Each check gets a fresh, empty store from `makeStore`. Give it unlimited or
/// generous ``CacheLimits`` (the suite writes a few MiB and expects them kept).
public struct CacheStoreConformance: Sendable {
    /// Makes a fresh, empty store with the given limits and time source (no sweep timer needed).
    public typealias LimitedStoreFactory = @Sendable (_ limits: CacheLimits, _ clock: @escaping @Sendable () -> Date) async throws -> any CacheStore

    public let makeStore: @Sendable () async throws -> any CacheStore
    public let makeLimitedStore: LimitedStoreFactory?

    /// - Parameters:
    ///   - makeStore: a fresh, empty store with generous limits.
    ///   - makeLimitedStore: a fresh store honouring the given limits and clock; when
    ///     given, expiry by last access and trimming to half by access order are checked too.
    public init(makeStore: @escaping @Sendable () async throws -> any CacheStore, makeLimitedStore: LimitedStoreFactory? = nil) {
        self.makeStore = makeStore
        self.makeLimitedStore = makeLimitedStore
    }

    /// Keys every store must keep apart and find again.
    public static let hostileKeys: [String] = [
        "", "../../etc/passwd", "/absolute/path", "a/b/c.jpg", "..", ".", "con", "NUL",
        "key\u{0}with\u{0}nul", String(repeating: "k", count: 10_000),
        String(decoding: [0xFF, 0xFE, 0x41, 0xC3], as: UTF8.self), "%FF%FE", "Émoji 🖼️.png", "KEY", "key",
        "https://example.com/a.jpg?x=1&y=2", "https://example.com/a.jpg?x=1&y=3",
    ]

    /// Runs every check.
    /// - Throws: ``ConformanceFailure`` listing each broken requirement.
    public func run() async throws {
        var checker = Checker(suite: "CacheStoreConformance")
        await roundTrips(&checker)
        await keysAndChanges(&checker)
        await concurrency(&checker)
        if let makeLimitedStore { await limits(&checker, makeLimitedStore) }
        try checker.finish()
    }

    /// Missing keys, bytes and metadata, sizes from 0 bytes to 4 MiB.
    private func roundTrips(_ checker: inout Checker) async {
        let makeStore = makeStore
        await checker.check("missing keys are nil, not errors") {
            let store = try await makeStore()
            try expect(try await store.entry(forKey: "missing") == nil, "entry(forKey:) returned an entry")
            try expect(try await store.metadata(forKey: "missing") == nil, "metadata(forKey:) returned metadata")
            try await store.removeData(forKey: "missing")
            try expect(try await store.count == 0, "an empty store counts entries")
        }

        await checker.check("bytes and metadata round-trip") {
            let store = try await makeStore()
            let data = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let before = Date().addingTimeInterval(-1)
            let metadata = CacheMetadata(contentType: "image/png", etag: "\"abc\"", lastModified: "Tue, 15 Nov 1994 12:45:26 GMT",
                                         originalURL: "https://example.com/a.png", size: 12345)
            try await store.setData(data, forKey: "a", metadata: metadata)
            guard let entry = try await store.entry(forKey: "a") else { throw Expectation(message: "entry not found after setData") }
            try expect(entry.data == data, "data differs")
            try expect(entry.metadata.contentType == "image/png", "contentType lost: \(entry.metadata.contentType ?? "nil")")
            try expect(entry.metadata.etag == "\"abc\"", "etag lost")
            try expect(entry.metadata.lastModified == metadata.lastModified, "lastModified lost")
            try expect(entry.metadata.originalURL == metadata.originalURL, "originalURL lost")
            try expect(entry.metadata.size == data.count, "size is \(entry.metadata.size), not the data's \(data.count)")
            try expect(entry.metadata.storedAt >= before && entry.metadata.accessedAt >= before, "storedAt/accessedAt not set by the store")
            try expect(try await store.metadata(forKey: "a")?.etag == "\"abc\"", "metadata(forKey:) differs from entry's")
        }

        await checker.check("values from 0 bytes to 4 MiB") {
            let store = try await makeStore()
            var generator = SplitMix(seed: 42)
            for size in [0, 1, 511, 4096, 4 << 20] {
                let data = Data((0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
                try await store.setData(data, forKey: "size-\(size)")
                let read = try await store.data(forKey: "size-\(size)")
                try expect(read == data, "a \(size)-byte value came back as \(read.map { "\($0.count) bytes" } ?? "nil")")
            }
        }
    }

    /// Hostile keys, overwrites, metadata updates, removal.
    private func keysAndChanges(_ checker: inout Checker) async {
        let makeStore = makeStore
        await checker.check("hostile keys are kept apart") {
            let store = try await makeStore()
            for (index, key) in Self.hostileKeys.enumerated() {
                try await store.setData(Data("value \(index)".utf8), forKey: key)
            }
            for (index, key) in Self.hostileKeys.enumerated() {
                let read = try await store.data(forKey: key)
                try expect(read == Data("value \(index)".utf8), "key #\(index) (\(key.prefix(40).debugDescription)) read \(read.map { String(decoding: $0, as: UTF8.self) } ?? "nil")")
            }
            try expect(try await store.count == Self.hostileKeys.count, "count is not \(Self.hostileKeys.count)")
        }

        await checker.check("overwrite replaces; size and count follow") {
            let store = try await makeStore()
            try await store.setData(Data(count: 100), forKey: "k")
            try await store.setData(Data(count: 30), forKey: "k")
            try await store.setData(Data(count: 50), forKey: "other")
            try expect(try await store.data(forKey: "k")?.count == 30, "old value survived an overwrite")
            let count = try await store.count, size = try await store.totalSize
            try expect(count == 2, "count is \(count), expected 2")
            try expect(size == 80, "totalSize is \(size), expected 80")
        }

        await checker.check("updateMetadata keeps the bytes") {
            let store = try await makeStore()
            try await store.setData(Data([1, 2, 3]), forKey: "k", metadata: CacheMetadata(etag: "v1"))
            try await store.updateMetadata(CacheMetadata(etag: "v2", lastModified: "later"), forKey: "k")
            let entry = try await store.entry(forKey: "k")
            try expect(entry?.data == Data([1, 2, 3]), "bytes changed")
            try expect(entry?.metadata.etag == "v2" && entry?.metadata.lastModified == "later", "metadata not updated")
            try expect(entry?.metadata.size == 3, "size lost on update")
            try await store.updateMetadata(CacheMetadata(etag: "x"), forKey: "absent")
            try expect(try await store.entry(forKey: "absent") == nil, "updateMetadata created an entry")
        }

        await checker.check("remove and removeAll") {
            let store = try await makeStore()
            for index in 0..<10 { try await store.setData(Data([UInt8(index)]), forKey: "k\(index)") }
            try await store.removeData(forKey: "k3")
            try expect(try await store.data(forKey: "k3") == nil, "a removed key is still there")
            try expect(try await store.count == 9, "count after remove is not 9")
            try await store.removeAll()
            try expect(try await store.count == 0, "count after removeAll is not 0")
            try expect(try await store.totalSize == 0, "totalSize after removeAll is not 0")
            try expect(try await store.data(forKey: "k1") == nil, "an entry survived removeAll")
        }
    }

    /// Concurrent writers and readers.
    private func concurrency(_ checker: inout Checker) async {
        let makeStore = makeStore
        await checker.check("concurrent writers and readers") {
            let store = try await makeStore()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<64 {
                    group.addTask {
                        let data = Data(repeating: UInt8(index), count: 1000 + index)
                        try await store.setData(data, forKey: "c\(index)")
                        let read = try await store.data(forKey: "c\(index)")
                        try expect(read == data, "concurrent write \(index) read back wrong")
                    }
                }
                try await group.waitForAll()
            }
            let count = try await store.count
            try expect(count == 64, "count after 64 concurrent writes is \(count)")
        }
    }

    /// Expiry by last access, trimming by access order, the largest entry kept.
    private func limits(_ checker: inout Checker, _ makeLimitedStore: LimitedStoreFactory) async {
        await checker.check("entries expire by last access, not by write date") {
            let clock = ManualClock()
            let store = try await makeLimitedStore(CacheLimits(maxAge: .seconds(3600), maxSize: nil, sweepInterval: nil), clock.now)
            try await store.setData(Data([1]), forKey: "read")
            try await store.setData(Data([2]), forKey: "unread")
            clock.advance(by: 3000)
            _ = try await store.entry(forKey: "read")
            clock.advance(by: 1000)
            try await store.removeExpired()
            try expect(try await store.data(forKey: "read") == Data([1]), "an entry read 1000 s ago expired with a 1 h maximum age")
            try expect(try await store.data(forKey: "unread") == nil, "an entry unread for 4000 s survived a 1 h maximum age")
            let count = try await store.count
            try expect(count == 1, "count after expiry is \(count)")
        }

        await checker.check("over the size limit, trims to half, least recently accessed first") {
            let clock = ManualClock()
            let store = try await makeLimitedStore(CacheLimits(maxAge: nil, maxSize: 1000, sweepInterval: nil), clock.now)
            for index in 0..<9 {
                try await store.setData(Data(count: 100), forKey: "k\(index)")
                clock.advance(by: 10)
            }
            _ = try await store.entry(forKey: "k0")  // k0 becomes the most recent
            clock.advance(by: 10)
            try await store.setData(Data(count: 200), forKey: "big")  // 1100 > 1000: trim to 500
            try await store.removeExpired()
            var remaining: Set<String> = []
            for key in ["big"] + (0..<9).map({ "k\($0)" }) where try await store.metadata(forKey: key) != nil { remaining.insert(key) }
            try expect(remaining == ["big", "k0", "k8", "k7"], "kept \(remaining.sorted()), expected big, k0, k7, k8")
            let size = try await store.totalSize
            try expect(size <= 500, "totalSize after trimming is \(size), over half the limit")
        }

        await checker.check("an entry over a quarter of the size limit (CacheLimits.maxEntrySize) is not kept, and flushes nothing") {
            let clock = ManualClock()
            let store = try await makeLimitedStore(CacheLimits(maxAge: nil, maxSize: 1000, sweepInterval: nil), clock.now)
            for index in 0..<4 { try await store.setData(Data(count: 100), forKey: "s\(index)") }
            try await store.setData(Data(count: 50), forKey: "large")
            try await store.setData(Data(count: 300), forKey: "large")  // 300 > 1000 / 4
            try await store.removeExpired()
            try expect(try await store.data(forKey: "large") == nil, "an entry over maxEntrySize was kept, or its older value was left")
            for index in 0..<4 {
                try expect(try await store.data(forKey: "s\(index)") != nil, "s\(index) was evicted by an entry the store does not keep")
            }
            try await store.setData(Data(count: 250), forKey: "fits")
            try expect(try await store.data(forKey: "fits")?.count == 250, "an entry of exactly maxEntrySize was not kept")
        }
    }
}

/// A clock the suite moves by hand.
final class ManualClock: Sendable {
    private let offset = Lock<TimeInterval>(0)
    private let start = Date()
    func advance(by seconds: TimeInterval) { offset.withLock { $0 += seconds } }
    var now: @Sendable () -> Date { { [self] in start.addingTimeInterval(offset.withLock { $0 }) } }
}

/// A small deterministic generator, so failures reproduce.
package struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
