import Foundation
import Logging
import Tracing

/// The last stage of a load: what it made goes to the memory tier and the disk
/// store, now or in the background within a bound, and back to its callers.
///
/// A store write never fails the load that filled it (a full disk must not break
/// serving): a write the caller waits for returns its failure for the result's
/// ``ImageResult/storeFailure``; a background one is counted and logged. Until a
/// background write lands, lookups find its bytes in ``PendingEntries``.
struct PublishStage: Sendable {
    let services: StageServices
    let pending: PendingEntries
    /// Store writes running in the background, bounded.
    let writes: BackgroundWork
    /// Encodes derived results that are stored in the background.
    let render: RenderStage

    // MARK: Memory

    func remember(_ image: Image, key: String, context: ImageContext) {
        guard context.storeCacheTiers.contains(.memory) else { return }
        services.configuration.memoryCache?.setImage(image, forKey: key)
    }

    func rememberData(_ data: Data, key: String, context: ImageContext, checksum: UInt64?, madeAt: Date?) {
        guard context.storeCacheTiers.contains(.memory) else { return }
        services.configuration.memoryCache?.setData(data, forKey: key, checksum: checksum, madeAt: madeAt)
    }

    // MARK: Disk

    /// The store this load writes to, unless its options or context keep it off disk.
    private func writableStore(_ plan: LoadPlan) -> (any CacheStore)? {
        guard let store = plan.store, plan.context.storeCacheTiers.contains(.disk), !plan.options.contains(.cacheMemoryOnly) else { return nil }
        return store
    }

    /// Stores the original bytes; returns the failure of a write it waited for.
    func storeOriginal(_ data: Data, response: LoadResponse?, _ plan: LoadPlan) async -> WebImageError? {
        guard let store = writableStore(plan) else { return nil }
        let metadata = CacheMetadata(
            contentType: response?.contentType ?? ImageFormat.sniff(data)?.mimeType,
            etag: response?.etag,
            lastModified: response?.lastModified,
            originalURL: response?.url.absoluteString
        )
        return await write(data, key: plan.plainKey, metadata: metadata, store: store, wait: plan.options.contains(.waitStoreCache))
    }

    /// Stores a derived result's bytes made in the load's own job.
    /// - Parameter originalURL: where the original came from (``Original/finalURL``),
    ///   kept so that a hit on the derived bytes is judged by the URL policy as the original's is.
    func storeDerived(_ encoded: Data, _ plan: LoadPlan, originalURL: String?) async -> WebImageError? {
        guard let store = writableStore(plan) else { return nil }
        let metadata = CacheMetadata(contentType: ImageFormat.sniff(encoded)?.mimeType, originalURL: originalURL)
        return await write(encoded, key: plan.key, metadata: metadata, store: store, wait: plan.options.contains(.waitStoreCache))
    }

    /// Encodes and stores a derived result in the background, within the bound.
    func storeDerivedInBackground(_ image: Image, _ plan: LoadPlan, originalURL: String?) {
        guard let store = writableStore(plan) else { return }
        let (key, context) = (plan.key, plan.context)
        let (render, services) = (render, services)
        background(bytes: image.cost, key: key) {
            let encoded: Data?
            do { encoded = try await render.encodeDerived(image, key: key, context: context) } catch {
                services.logStoreError(error, key: key)
                return
            }
            guard let data = encoded else { return }
            let metadata = CacheMetadata(contentType: ImageFormat.sniff(data)?.mimeType, originalURL: originalURL)
            _ = await self.write(data, key: key, metadata: metadata, store: store, wait: true)
        }
    }

    /// Writes now (`wait`: a failure is logged, counted and returned) or in the
    /// background (a failure is logged and counted). Never throws.
    func write(_ data: Data, key: String, metadata: CacheMetadata, store: any CacheStore, wait: Bool) async -> WebImageError? {
        guard wait else {
            writeInBackground(data, key: key, metadata: metadata, store: store)
            return nil
        }
        do {
            try await services.spans.traced("webimage.store") { span in
                span.set("webimage.bytes", data.count)
                try await store.setData(data, forKey: key, metadata: metadata)
            }
            return nil
        } catch {
            services.logStoreError(error, key: key)
            return WebImageError.wrap(error, as: .storeFailed, "storing \(key)")
        }
    }

    /// The write outlives the load: its span is the load's child all the same.
    /// Until it lands, lookups find its bytes in ``PendingEntries``.
    private func writeInBackground(_ data: Data, key: String, metadata: CacheMetadata, store: any CacheStore) {
        let parent = ServiceContext.current ?? .topLevel
        let held = pending.hold(data, key: key, metadata: metadata)
        let (services, pending) = (services, pending)
        let started = background(bytes: data.count, key: key) {
            let span = services.spans.start("webimage.store", context: parent)
            span.set("webimage.bytes", data.count)
            defer {
                span.end()
                pending.release(key, id: held)
            }
            do { try await store.setData(data, forKey: key, metadata: metadata) } catch {
                span.recordError(error)
                services.logStoreError(error, key: key)
            }
        }
        if !started { pending.release(key, id: held) }
    }

    /// Runs a store write in the background within the bound, or drops it (counted,
    /// logged). Returns whether it started.
    @discardableResult
    func background(bytes: Int, key: String, _ job: @escaping @Sendable () async -> Void) -> Bool {
        guard !writes.start(bytes: bytes, job) else { return true }
        services.metrics.droppedWrite()
        // Refused because the manager shuts down (its grace has ended), or because
        // the bound is reached: the log says which.
        let pending = writes.pending
        services.logger.warning(writes.isStopped ? "cache write dropped: the manager is shutting down" : "cache write dropped: too many pending writes",
                                metadata: ["key": "\(key)", "pending": "\(pending.count)", "pendingBytes": "\(pending.bytes)"])
        return false
    }
}
