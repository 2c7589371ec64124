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

    /// What the memory tier holds for a load, found without suspending.
    enum MemoryAnswer {
        /// Nothing (or the tier is skipped): the load goes on to the disk tier.
        case miss
        /// The whole result.
        case hit(ImageResult)
        /// An image whose bytes the caller asked for too (``ImageOptions/queryMemoryData``),
        /// which the memory tier does not hold: they are read from the store, if any.
        case needsStoredBytes(ImageResult)
    }

    /// The memory tier's result for this load, unless its options or context skip
    /// the tier, in a `webimage.memory` span: the manager's traced path. Without a
    /// tracer it asks ``memory(key:url:options:context:)`` itself.
    func memoryHit(_ plan: LoadPlan) async -> ImageResult? {
        try? await services.spans.traced("webimage.memory") { span in
            let answer = memory(key: plan.key, url: plan.url, options: plan.options, context: plan.context)
            let hit = await completed(answer, key: plan.key, url: plan.url, store: plan.store)
            span.set("webimage.hit", hit != nil)
            return hit
        }
    }

    /// The memory tier's answer, synchronously: a memory hit is a lookup, and an
    /// async call per step of it cost a task-allocator frame each. No span of its
    /// own (``memoryHit(_:)`` is the one with a span).
    func memory(key: String, url: URL, options: ImageOptions, context: ImageContext) -> MemoryAnswer {
        guard let cache = services.configuration.memoryCache, context.queryCacheTiers.contains(.memory),
              options.isDisjoint(with: [.fromLoaderOnly, .refreshCached])
        else { return .miss }
        // The node itself, not a tuple of its fields: each field is copied once,
        // into the result (an `Image` holds an existential, copied by witness).
        guard let node = cache.touch(key) else { return .miss }
        if options.contains(.avoidDecode) {
            guard let data = node.data else { return .miss }
            services.metrics.hit(.memory)
            return .hit(ImageResult(image: nil, data: data, cacheType: .memory, key: key, url: url,
                                    checksum: node.checksum, lastModified: node.madeAt))
        }
        guard node.hasImage else { return .miss }
        services.metrics.hit(.memory)
        let result = ImageResult(image: node.image, data: node.data, cacheType: .memory, key: key, url: url)
        return node.data == nil && options.contains(.queryMemoryData) ? .needsStoredBytes(result) : .hit(result)
    }

    /// The result of an answer: a hit as it is, a hit that needs its bytes with them
    /// read from the store (without them if the store has none or fails).
    func completed(_ answer: MemoryAnswer, key: String, url: URL, store: (any CacheStore)?) async -> ImageResult? {
        switch answer {
        case .miss: return nil
        case .hit(let result): return result
        case .needsStoredBytes(let result):
            guard let store else { return result }
            let data = try? await store.data(forKey: key)
            return ImageResult(image: result.image, data: data, cacheType: .memory, key: key, url: url)
        }
    }

    // MARK: Disk

    /// An entry a job found, and whether it is held in memory on its way to the
    /// store (``PendingEntries``) rather than read from the store.
    struct Found {
        var entry: CacheEntry
        /// Bytes this process just downloaded or made: a failed decode of them is
        /// no damage on disk.
        var held: Bool
        /// The job's hold on the entry in ``PendingEntries`` (a lookup that shares),
        /// released when the job ends.
        var holdID: UInt64?
    }

    /// One disk lookup inside a job: the read the caller's task already made for
    /// this key, else an entry held in memory on its way to the store, else the store.
    /// `sharing` (an original): the entry is held in ``PendingEntries`` for the
    /// job, which releases ``Found/holdID`` as it ends, so that the jobs of other
    /// sizes running meanwhile share its bytes rather than read a copy each.
    func entry(_ key: String, _ plan: LoadPlan, firstRead: DiskRead?, sharing: Bool = false) async -> Found? {
        func held() -> Found? {
            if sharing {
                return pending.share(key).map { Found(entry: $0.entry, held: !$0.stored, holdID: $0.id) }
            }
            return pending.entry(forKey: key).map { Found(entry: $0.entry, held: !$0.stored) }
        }
        func found(_ entry: CacheEntry) -> Found {
            Found(entry: entry, held: false, holdID: sharing ? pending.hold(entry, key: key, stored: true) : nil)
        }
        if let firstRead, firstRead.key == key {
            if let entry = firstRead.entry { return found(entry) }
            return held()
        }
        guard plan.readsDisk else { return nil }
        if let entry = held() { return entry }
        guard let store = plan.store else { return nil }
        return await read(store, key).map(found)
    }

    /// Reads `key` from `store`, in a span; a failure is a miss, counted and logged.
    func read(_ store: any CacheStore, _ key: String) async -> CacheEntry? {
        do {
            // No tracer: no span closure around a read that is often a memory lookup.
            guard services.spans.isTracing else { return try await store.entry(forKey: key) }
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
