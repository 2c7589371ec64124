public import Foundation
public import Logging
import Metrics
import Synchronization

/// A local store (LMDB or files) in front of a shared one (Redis), for a fleet of
/// hosts that should not each download and decode every image again.
///
/// ```swift
/// let local = try LMDBCacheStore(directory: cacheDirectory)
/// let shared = try RedisCacheStore(configuration: .init(urls: ["redis://cache.internal:6379"]))
/// configuration.store = TieredCacheStore(local: local, shared: shared)
/// ```
///
/// - A read tries the local store, then the shared one; a shared hit is copied
///   into the local store (in the background) and comes back with
///   ``CacheEntry/source`` `.shared`, which the manager reports as
///   ``CacheType/shared``.
/// - A write goes to the local store (awaited: its failure is the caller's), and
///   to the shared store in the background, bounded (``Limits``): past the bound a
///   shared write is dropped and counted, never queued without end.
/// - A remove, `removeAll` and `removeExpired` reach both.
/// - The shared tier is a cache of a cache: when it fails (down, slow past its
///   timeout) the failure is logged and counted and the read is a miss, so a load
///   goes on from the local tier and the origin, degraded, never failed by it.
/// - ``totalSize`` and ``count`` are the local store's; the shared store has its
///   own (`RedisCacheStore.totalSize`).
///
/// Metrics: `webimage_tier_hits_total{tier=local|shared}`,
/// `webimage_tier_misses_total`, `webimage_tier_errors_total{tier=shared}`,
/// `webimage_tier_writes_dropped_total`.
public final class TieredCacheStore: CacheStore, ImmediateCacheReading {
    /// Bounds on the background work of the shared tier.
    public struct Limits: Sendable, Hashable {
        /// Shared writes (and local copies of shared hits) in flight at once. Default 256.
        public var maxPendingWrites: Int
        /// The bytes they may hold. Default 128 MiB.
        public var maxPendingBytes: Int
        public init(maxPendingWrites: Int = 256, maxPendingBytes: Int = 128 << 20) {
            self.maxPendingWrites = maxPendingWrites
            self.maxPendingBytes = maxPendingBytes
        }
    }

    /// This host's store; nil for a shared tier alone.
    public let local: (any CacheStore)?
    /// ``local`` when it reads without waiting (``ImmediateCacheReading``).
    private let immediateLocal: (any ImmediateCacheReading)?
    /// The store the fleet shares.
    public let shared: any CacheStore
    private let logger: Logger
    private let work: BackgroundWork
    /// Background writes in flight per key, so that a remove waits for the write
    /// before it: a write that landed in the shared tier after the remove would
    /// bring the removed entry back.
    private let writing = Lock<[String: (count: Int, waiters: [CheckedContinuation<Void, Never>])]>([:])
    private let localHits = Counter(label: "webimage_tier_hits_total", dimensions: [("tier", "local")])
    private let sharedHits = Counter(label: "webimage_tier_hits_total", dimensions: [("tier", "shared")])
    private let misses = Counter(label: "webimage_tier_misses_total")
    private let sharedErrors = Counter(label: "webimage_tier_errors_total", dimensions: [("tier", "shared")])
    private let dropped = Counter(label: "webimage_tier_writes_dropped_total")

    public init(local: (any CacheStore)?, shared: any CacheStore, limits: Limits = Limits(),
                logger: Logger = Logger(label: "webimage.tiers")) {
        self.local = local
        self.immediateLocal = local as? any ImmediateCacheReading
        self.shared = shared
        self.logger = logger
        self.work = BackgroundWork(maxPending: limits.maxPendingWrites, maxPendingBytes: limits.maxPendingBytes)
    }

    /// Shared writes and local copies running in the background now.
    public var pendingWrites: (count: Int, bytes: Int) { work.pending }

    public func entry(forKey key: String) async throws -> CacheEntry? {
        if let local, let entry = try await local.entry(forKey: key) {
            localHits.increment()
            return entry
        }
        guard var entry = await sharedRead({ try await $0.entry(forKey: key) }, key: key) else {
            misses.increment()
            return nil
        }
        sharedHits.increment()
        entry.source = .shared
        if let local {
            let data = entry.data, metadata = entry.metadata
            background(bytes: data.count, key: key, what: "local copy") {
                try await local.setData(data, forKey: key, metadata: metadata)
            }
        }
        return entry
    }

    /// A hit of the local tier when it reads without waiting; nil otherwise (the
    /// shared tier is a request).
    package func immediateEntry(forKey key: String) -> CacheEntry? {
        guard let entry = immediateLocal?.immediateEntry(forKey: key) else { return nil }
        localHits.increment()
        return entry
    }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        if let local, let metadata = try await local.metadata(forKey: key) { return metadata }
        return await sharedRead({ try await $0.metadata(forKey: key) }, key: key)
    }

    public func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        if let local { try await local.setData(data, forKey: key, metadata: metadata) }
        let shared = shared
        background(bytes: data.count, key: key, what: "shared write") {
            try await shared.setData(data, forKey: key, metadata: metadata)
        }
    }

    public func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {
        if let local { try await local.updateMetadata(metadata, forKey: key) }
        await sharedWrite("update", key: key) { try await $0.updateMetadata(metadata, forKey: key) }
    }

    public func removeData(forKey key: String) async throws {
        await writesFinished(forKey: key)
        if let local { try await local.removeData(forKey: key) }
        await sharedWrite("remove", key: key) { try await $0.removeData(forKey: key) }
    }

    public func removeAll() async throws {
        await work.idle()
        if let local { try await local.removeAll() }
        await sharedWrite("removeAll", key: "*") { try await $0.removeAll() }
    }

    public func removeExpired() async throws {
        if let local { try await local.removeExpired() }
        await sharedWrite("removeExpired", key: "*") { try await $0.removeExpired() }
    }

    public var totalSize: Int { get async throws { try await local?.totalSize ?? 0 } }
    public var count: Int { get async throws { try await local?.count ?? 0 } }

    /// Waits for the background writes, then closes both tiers.
    public func close() async {
        work.stop()
        await work.idle()
        await local?.close()
        await shared.close()
    }

    // MARK: Ordering a remove after the writes before it

    private func wrote(_ key: String) {
        let waiters = writing.withLock { writing -> [CheckedContinuation<Void, Never>] in
            guard var state = writing[key] else { return [] }
            state.count -= 1
            guard state.count == 0 else {
                writing[key] = state
                return []
            }
            writing[key] = nil
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func writesFinished(forKey key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = writing.withLock { writing -> Bool in
                guard writing[key] != nil else { return true }
                writing[key]!.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    // MARK: The shared tier's failures

    private func sharedRead<T: Sendable>(_ body: (any CacheStore) async throws -> T?, key: String) async -> T? {
        do { return try await body(shared) } catch {
            noteSharedFailure(error, key: key, operation: "read")
            return nil
        }
    }

    private func sharedWrite(_ operation: String, key: String, _ body: (any CacheStore) async throws -> Void) async {
        do { try await body(shared) } catch { noteSharedFailure(error, key: key, operation: operation) }
    }

    private func noteSharedFailure(_ error: any Error, key: String, operation: String) {
        sharedErrors.increment()
        logger.warning("shared cache tier failed; going on without it",
                       metadata: ["operation": "\(operation)", "key": "\(key)", "error": "\(error)"])
    }

    private func background(bytes: Int, key: String, what: String, _ job: @escaping @Sendable () async throws -> Void) {
        writing.withLock { $0[key, default: (0, [])].count += 1 }
        let started = work.start(bytes: bytes) {
            do { try await job() } catch { self.noteSharedFailure(error, key: key, operation: what) }
            self.wrote(key)
        }
        guard !started else { return }
        wrote(key)
        dropped.increment()
        logger.debug("tier write dropped: too many pending", metadata: ["key": "\(key)", "what": "\(what)"])
    }
}
