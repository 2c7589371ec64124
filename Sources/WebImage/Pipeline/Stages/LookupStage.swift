import Foundation
import Logging
import Tracing

/// The first stage of a load: the tiers that may already hold its result. The
/// memory tier, then bytes the manager holds that its store does not have yet
/// (``PendingEntries``), then the disk store (whose entries may come from a
/// shared tier behind it, reported as `.shared`).
///
/// A store that fails to read is a miss, not a failed load: the disk tier is a
/// cache. Its failure is counted and logged (``StageServices/logStoreError(_:key:)``).
struct LookupStage: Sendable {
    let services: StageServices
    /// Originals just downloaded and background writes not yet stored, asked before the store.
    let pending: PendingEntries

    /// A disk lookup already made on the caller's task, handed to the job.
    struct DiskRead: Sendable {
        var key: String
        var entry: CacheEntry?
    }

    // MARK: Memory

    /// The memory tier's result for this load, unless its options or context skip the tier.
    func memoryHit(_ plan: LoadPlan) async -> ImageResult? {
        let (options, context) = (plan.options, plan.context)
        guard let cache = services.configuration.memoryCache, context.queryCacheTiers.contains(.memory),
              options.isDisjoint(with: [.fromLoaderOnly, .refreshCached])
        else { return nil }
        return try? await services.spans.traced("webimage.memory") { span in
            let hit = await memoryLookup(plan, cache)
            span.set("webimage.hit", hit != nil)
            return hit
        }
    }

    private func memoryLookup(_ plan: LoadPlan, _ cache: MemoryImageCache) async -> ImageResult? {
        let (url, key, options) = (plan.url, plan.key, plan.options)
        if options.contains(.avoidDecode) {
            guard let (data, checksum, madeAt) = cache.dataEntry(forKey: key) else { return nil }
            services.metrics.hit(.memory)
            return ImageResult(image: nil, data: data, cacheType: .memory, key: key, url: url, checksum: checksum, lastModified: madeAt)
        }
        guard let (image, cachedData) = cache.entry(forKey: key), let image else { return nil }
        services.metrics.hit(.memory)
        var data = cachedData
        if data == nil, options.contains(.queryMemoryData), let store = plan.store {
            data = try? await store.data(forKey: key)
        }
        return ImageResult(image: image, data: data, cacheType: .memory, key: key, url: url)
    }

    // MARK: Disk

    /// One disk lookup inside a job: the read the caller's task already made for
    /// this key, else an entry held in memory on its way to the store, else the store.
    func entry(_ key: String, _ plan: LoadPlan, firstRead: DiskRead?) async -> CacheEntry? {
        if let firstRead, firstRead.key == key { return firstRead.entry ?? pending.entry(forKey: key) }
        guard plan.readsDisk else { return nil }
        if let entry = pending.entry(forKey: key) { return entry }
        guard let store = plan.store else { return nil }
        return await read(store, key)
    }

    /// Reads `key` from `store`, in a span; a failure is a miss, counted and logged.
    func read(_ store: any CacheStore, _ key: String) async -> CacheEntry? {
        do {
            return try await services.spans.traced("webimage.disk") { span in
                let entry = try await store.entry(forKey: key)
                span.set("webimage.hit", entry != nil)
                if let entry {
                    span.set("webimage.bytes", entry.data.count)
                    if entry.source == .shared { span.operationName = "webimage.shared" }
                }
                return entry
            }
        } catch {
            services.logStoreError(error, key: key)
            return nil
        }
    }

    /// Removes a stored entry whose bytes no coder reads (damaged on disk or in
    /// the shared tier), counted as a store error and logged; never blocks the URL.
    func discard(_ key: String, from store: (any CacheStore)?, _ error: WebImageError) async {
        services.metrics.storeError()
        services.logger.warning("cache entry does not decode; removed and loaded again",
                                metadata: ["key": "\(key)", "error": "\(error)"])
        do { try await store?.removeData(forKey: key) } catch { services.logStoreError(error, key: key) }
    }
}

extension CacheEntry {
    /// How the manager reports a hit on this entry.
    var cacheType: CacheType { source == .shared ? .shared : .disk }
}
