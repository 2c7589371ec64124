import Foundation
import Logging
import Tracing

extension ImageManager {
    func remember(_ image: Image, key: String, context: ImageContext) {
        guard context.storeCacheTiers.contains(.memory) else { return }
        memoryCache?.setImage(image, forKey: key)
    }

    func rememberData(_ data: Data, key: String, context: ImageContext, checksum: UInt64?, madeAt: Date?) {
        guard context.storeCacheTiers.contains(.memory) else { return }
        memoryCache?.setData(data, forKey: key, checksum: checksum, madeAt: madeAt)
    }

    /// Stores the original bytes; returns the failure of a write it waited for.
    func storeOriginal(_ data: Data, response: LoadResponse?, _ plan: LoadPlan) async -> WebImageError? {
        let (key, store, options, context) = (plan.plainKey, plan.store, plan.options, plan.context)
        guard let store, context.storeCacheTiers.contains(.disk), !options.contains(.cacheMemoryOnly) else { return nil }
        let metadata = CacheMetadata(
            contentType: response?.contentType ?? ImageFormat.sniff(data)?.mimeType,
            etag: response?.etag,
            lastModified: response?.lastModified,
            originalURL: response?.url.absoluteString
        )
        return await write(data, key: key, metadata: metadata, store: store, wait: options.contains(.waitStoreCache))
    }

    /// Encodes and stores a derived result in the background, within the bound.
    func storeDerivedInBackground(_ image: Image, _ plan: LoadPlan) {
        let (key, store, options, context) = (plan.key, plan.store, plan.options, plan.context)
        guard let store, context.storeCacheTiers.contains(.disk), !options.contains(.cacheMemoryOnly) else { return }
        background(bytes: image.cost, key: key) {
            let encoded: Data?
            do { encoded = try await self.encodeDerived(image, key: key, context: context) } catch {
                self.logStoreError(error, key: key)
                return
            }
            guard let data = encoded else { return }
            _ = await self.write(data, key: key, metadata: CacheMetadata(contentType: ImageFormat.sniff(data)?.mimeType), store: store, wait: true)
        }
    }

    /// Writes now (`wait`: a failure is logged, counted and returned) or in the
    /// background (a failure is logged and counted). Never throws: a cache that
    /// cannot write (a full disk) must not fail the load that filled it.
    func write(_ data: Data, key: String, metadata: CacheMetadata, store: any CacheStore, wait: Bool) async -> WebImageError? {
        if wait {
            do {
                try await traced("webimage.store") { span in
                    span.set("webimage.bytes", data.count)
                    try await store.setData(data, forKey: key, metadata: metadata)
                }
            } catch {
                logStoreError(error, key: key)
                return WebImageError.wrap(error, as: .storeFailed, "storing \(key)")
            }
        } else {
            // The write outlives the load: its span is the load's child all the same.
            // Until it lands, lookups find its bytes here (PendingEntries).
            let parent = ServiceContext.current ?? .topLevel
            let held = pending.hold(data, key: key, metadata: metadata)
            let started = background(bytes: data.count, key: key) {
                let span = self.startSpan("webimage.store", context: parent)
                span.set("webimage.bytes", data.count)
                defer {
                    span.end()
                    self.pending.release(key, id: held)
                }
                do { try await store.setData(data, forKey: key, metadata: metadata) } catch {
                    span.recordError(error)
                    self.logStoreError(error, key: key)
                }
            }
            if !started { pending.release(key, id: held) }
        }
        return nil
    }

    /// Runs a store write in the background within the bound, or drops it (counted,
    /// logged). Returns whether it started.
    @discardableResult
    func background(bytes: Int, key: String, _ job: @escaping @Sendable () async -> Void) -> Bool {
        guard !writes.start(bytes: bytes, job) else { return true }
        metrics.droppedWrite()
        configuration.logger.warning("cache write dropped: too many pending writes",
                                     metadata: ["key": "\(key)", "pending": "\(writes.pending.count)"])
        return false
    }

    /// A store that fails to read is a miss, not a failed load: the disk tier is a cache.
    func read(_ store: any CacheStore, _ key: String) async -> CacheEntry? {
        do {
            return try await traced("webimage.disk") { span in
                let entry = try await store.entry(forKey: key)
                span.set("webimage.hit", entry != nil)
                if let entry {
                    span.set("webimage.bytes", entry.data.count)
                    if entry.source == .shared { span.operationName = "webimage.shared" }
                }
                return entry
            }
        } catch {
            logStoreError(error, key: key)
            return nil
        }
    }

    /// Removes a stored entry whose bytes no coder reads (damaged on disk or in
    /// the shared tier), counted as a store error and logged; never blocks the URL.
    func discard(_ key: String, from store: (any CacheStore)?, _ error: WebImageError) async {
        metrics.storeError()
        configuration.logger.warning("cache entry does not decode; removed and loaded again",
                                     metadata: ["key": "\(key)", "error": "\(error)"])
        do { try await store?.removeData(forKey: key) } catch { logStoreError(error, key: key) }
    }

    func logStoreError(_ error: any Error, key: String) {
        metrics.storeError()
        configuration.logger.warning("cache store failed", metadata: ["key": "\(key)", "error": "\(error)"])
    }
}

extension CacheEntry {
    /// How the manager reports a hit on this entry.
    var cacheType: CacheType { source == .shared ? .shared : .disk }
}
