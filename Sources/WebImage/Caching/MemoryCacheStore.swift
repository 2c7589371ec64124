public import Foundation
import Synchronization

/// A ``CacheStore`` that keeps bytes in memory: for tests, for a process that
/// wants no disk at all (`store.kind = memory`), and as the reference
/// implementation of the contract.
///
/// It honours ``CacheLimits`` like a disk store (max age by last access, trim to
/// half the size limit by access order), so code tested against it behaves the
/// same on disk.
public final class MemoryCacheStore: CacheStore {
    private struct State {
        var entries: [String: CacheEntry] = [:]
        var totalSize = 0
    }

    private let state = Lock(State())
    private let limits: CacheLimits
    private let clock: @Sendable () -> Date
    private let sweeper = Lock<CacheSweeper?>(nil)

    /// - Parameters:
    ///   - limits: expiry and size limits; by default those of ``CacheLimits``.
    ///   - clock: the time source, replaceable in tests of expiry.
    public init(limits: CacheLimits = CacheLimits(), clock: @escaping @Sendable () -> Date = { Date() }) {
        self.limits = limits
        self.clock = clock
        sweeper.withLock { $0 = .removingExpired(from: self, every: limits.sweepInterval) }
    }

    public func entry(forKey key: String) async throws -> CacheEntry? {
        let now = clock()
        return state.withLock { state in
            state.entries[key]?.metadata.accessedAt = now
            return state.entries[key]
        }
    }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        state.withLock { $0.entries[key]?.metadata }
    }

    public func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        // Larger than a quarter of the limit: not kept, or it would flush the store.
        guard limits.admits(data.count) else { return try await removeData(forKey: key) }
        var metadata = metadata
        let now = clock()
        metadata.storedAt = now
        metadata.accessedAt = now
        metadata.size = data.count
        let overLimit = state.withLock { state in
            if let old = state.entries[key] { state.totalSize -= old.data.count }
            state.entries[key] = CacheEntry(data: data, metadata: metadata)
            state.totalSize += data.count
            return limits.maxSize.map { state.totalSize > $0 } ?? false
        }
        if overLimit { try await removeExpired() }
    }

    public func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {
        let now = clock()
        state.withLock { state in
            guard let old = state.entries[key]?.metadata else { return }
            var metadata = metadata
            metadata.storedAt = old.storedAt
            metadata.size = old.size
            metadata.accessedAt = now
            state.entries[key]?.metadata = metadata
        }
    }

    public func removeData(forKey key: String) async throws {
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.totalSize -= old.data.count }
        }
    }

    public func removeAll() async throws {
        state.withLock { $0 = State() }
    }

    public func removeExpired() async throws {
        let cutoff = limits.expiryCutoff(now: clock())
        state.withLock { state in
            if let cutoff {
                for (key, entry) in state.entries where entry.metadata.accessedAt < cutoff {
                    state.entries[key] = nil
                    state.totalSize -= entry.data.count
                }
            }
            guard let maxSize = limits.maxSize, state.totalSize > maxSize else { return }
            let oldestFirst = state.entries.sorted { $0.value.metadata.accessedAt < $1.value.metadata.accessedAt }
            for (key, entry) in oldestFirst where state.totalSize > maxSize / 2 {
                state.entries[key] = nil
                state.totalSize -= entry.data.count
            }
        }
    }

    public var totalSize: Int { get async throws { state.withLock { $0.totalSize } } }
    public var count: Int { get async throws { state.withLock { $0.entries.count } } }
}
