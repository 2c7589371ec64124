public import Foundation
import Logging
import Synchronization
package import Tracing

/// Loads images through the tiers: memory, then disk, then a loader; decodes,
/// transforms and caches what it loads.
///
/// ```swift
/// let manager = ImageManager(configuration: configuration)
/// let result = try await manager.loadImage(
///     with: URL(string: "https://example.com/photo@2x.jpg")!,
///     context: ImageContext(thumbnailPixelSize: PixelSize(256)))
/// print(result.cacheType, result.image!.pixelSize, result.image!.scale)  // none 256x171 2.0
/// ```
///
/// What one load does (docs/architecture.md draws it):
/// 1. The cache key: the URL through the key filter; a thumbnail, transformer or
///    other result-changing parameter derives a key of its own from it.
/// 2. A URL on the failed-URL blocklist fails at once (``WebImageError/Code/blockedURL``)
///    unless `.retryFailed`.
/// 3. The memory cache under the derived key: a hit returns `.memory`.
/// 4. The disk store: the derived result's bytes, else the original's; a hit is
///    decoded off the caller's executor and returned as `.disk`.
/// 5. With a shared blocklist (``FailedURLBlocklist/shared``), whether another
///    host found the URL broken: if so, `.blockedURL` without a download.
/// 6. With an origin circuit breaker (``Configuration/originBreaker``), an origin
///    that failed transiently too often in a row fails at once
///    (``WebImageError/Code/originUnavailable``).
/// 7. The loader. Concurrent loads of one key share one job, and loads of one URL
///    share one download; each caller can cancel alone, and the work stops only
///    when every caller has cancelled. Progress reaches every caller.
/// 8. Decode with the first coder that accepts the bytes (orientation applied,
///    scale from the key), transform, then store: original bytes on disk (unless
///    `.cacheMemoryOnly`), the derived result's bytes on disk, the image in memory.
///
/// Every error thrown is a ``WebImageError``; cancellation is
/// ``WebImageError/Code/cancelled``.
public final class ImageManager: Sendable {
    public let configuration: Configuration
    /// The stages a load goes through (Stages/): lookup, original, render, publish.
    let stages: LoadStages
    /// Jobs in flight, one per job key (``LoadPlan/jobKey``) however many callers wait.
    let images = Coalescer<String, ImageResult>()
    let slots = Lock<[String: ImageTask]>([:])
    /// Loads in flight, counted so that ``shutdown(gracePeriod:)`` can wait for them.
    let loads = InFlightCounter()
    /// The deadlines of loads in flight (``ImageContext/deadline``), one timer for all.
    let deadlines = DeadlineTimer()
    /// The configured store when it reads a warm hit without waiting (LMDB):
    /// asked first for a load of bytes, on the caller's thread.
    let immediateStore: (any ImmediateCacheReading)?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.stages = LoadStages(configuration: configuration)
        self.immediateStore = configuration.store as? any ImmediateCacheReading
    }

    var services: StageServices { stages.services }
    var metrics: PipelineMetrics { stages.services.metrics }
    var jobStages: JobStages { stages.services.jobStages }
    var downloads: Coalescer<String, Downloaded> { stages.original.downloads }
    var writes: BackgroundWork { stages.publish.writes }

    /// The tracer spans go to; nil for the no-op one (then no span is made at all).
    package var activeTracer: (any Tracer)? { stages.services.spans.tracer }

    /// Bytes of downloaded originals reserved now (``Configuration/originalsBudget``),
    /// the most reserved at once so far, and the loads waiting for room.
    public var originalsInFlight: (bytes: Int, peak: Int, waiting: Int) {
        let usage = stages.original.budget.usage
        return (usage.reserved, usage.peak, usage.waiting)
    }

    /// Store writes running in the background now, and the bytes they hold.
    public var pendingStoreWrites: (count: Int, bytes: Int) { writes.pending }

    /// Loads running now (callers of ``loadImage(with:options:context:progress:)`` and the like).
    public var loadsInFlight: Int { loads.count }

    /// Pixels decoded by jobs still running (every frame counted), with the
    /// results they transform into not counted twice: what the pool's jobs hold,
    /// and a decoded image waiting for room in the work budget before the rest
    /// of its job.
    public var decodedPixelsInFlight: Int { stages.render.pixelsInFlight.load(ordering: .relaxed) }

    /// Stops the manager without losing work: new loads fail at once with
    /// ``WebImageError/Code/shutDown``; loads in flight finish, and so do the store
    /// writes they left running in the background; then the configured store is
    /// closed (``CacheStore/close()``: a sweep in progress finishes, batched
    /// access dates are written, timers stop); then it returns. A store passed in
    /// an ``ImageContext`` is the caller's to close.
    ///
    /// At the end of the grace period it stops waiting: loads still in flight are
    /// ended at once with ``WebImageError/Code/shutDown`` (their downloads aborted,
    /// their transform chains stopped at the next step; a server answers them
    /// 503), so a silent origin or a slow decode cannot hold a SIGTERM beyond it.
    /// Start it when the signal arrives, not after the HTTP server has drained:
    /// the server's drain is what waits on those loads.
    ///
    /// ```swift
    /// // On SIGTERM, after the server stopped accepting requests:
    /// let clean = await manager.shutdown(gracePeriod: .seconds(20))
    /// ```
    ///
    /// - Parameter gracePeriod: the longest it waits. Loads still running then end
    ///   with `shutDown`; store writes still running go on in the background, and
    ///   the result is false. Calling it again (say, after the server drained) is harmless.
    /// - Returns: whether every load and write finished within the grace period.
    @discardableResult
    public func shutdown(gracePeriod: Duration = .seconds(30)) async -> Bool {
        loads.stop()
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                // Loads first: a load that finishes may still start a background write.
                await self.loads.idle()
                await self.writes.idle()
                await self.configuration.blocklist.finishSharedWrites()
                if Task.isCancelled { return false }
                await self.store?.close()
                return !Task.isCancelled
            }
            group.addTask {
                try? await Task.sleep(for: gracePeriod)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        writes.stop()
        guard !finished else { return true }
        // Loads still in flight end now: their callers get shutDown, their jobs are cancelled.
        let ended = WebImageError(.shutDown, "the manager shut down: its grace period of \(gracePeriod) ended before this load did")
        let abandoned = images.abandonAll(with: ended) + downloads.abandonAll(with: ended)
        let (count, bytes) = writes.pending
        // Cancelled (a server that failed to start cancels its group) with nothing
        // running: nothing was cut short, so no warning, and it finished.
        if abandoned == 0, count == 0, loads.count == 0 { return true }
        configuration.logger.warning("shutdown: the grace period ended with work still running",
                                     metadata: ["loadsEnded": "\(abandoned)", "writes": "\(count)", "bytes": "\(bytes)"])
        return false
    }

    /// The memory tier, if any.
    public var memoryCache: MemoryImageCache? { configuration.memoryCache }
    /// The disk tier, if any.
    public var store: (any CacheStore)? { configuration.store }
    /// The failed-URL blocklist; `removeAll()` clears it.
    public var blocklist: FailedURLBlocklist { configuration.blocklist }

    /// The key a URL's original bytes are cached under: the key filter's answer
    /// (by default the URL without its fragment), each `#` in it written `#!` so
    /// that no plain key can pass for a derived one (``CacheKeyFilter``).
    public func cacheKey(for url: URL, context: ImageContext = ImageContext()) -> String {
        let filter = context.cacheKeyFilter ?? configuration.cacheKeyFilter
        return filter.dropsFragment ? filter.key(url) : CacheKey.plain(filter.key(url))
    }

    /// The key a load's result is cached under: the plain key, or a derived one
    /// when the context asks for a thumbnail or a transformation.
    public func resultKey(for url: URL, options: ImageOptions = [], context: ImageContext = ImageContext()) -> String {
        CacheKey.derived(from: cacheKey(for: url, context: context), options: options, context: context,
                         encodeOptions: stages.render.encodeOptions(context))
    }

    /// Loads an image. See the type's discussion for the steps.
    /// - Parameters:
    ///   - url: an `http(s)://` or `file://` URL, or a path.
    ///   - options: switches such as ``ImageOptions/retryFailed`` or ``ImageOptions/fromCacheOnly``.
    ///   - context: values such as a thumbnail size or a transformer.
    ///   - progress: called with bytes received as a download proceeds.
    /// - Returns: the image (nil with ``ImageOptions/avoidDecode``), its bytes when at hand, and where it came from.
    /// - Throws: ``WebImageError``.
    public func loadImage(
        with url: URL,
        options: ImageOptions = [],
        context: ImageContext = ImageContext(),
        progress: (@Sendable (LoadProgress) -> Void)? = nil
    ) async throws -> ImageResult {
        guard loads.enter() else {
            throw WebImageError(.shutDown, "the manager is shutting down; \(url.absoluteString) was not loaded")
        }
        defer { loads.leave() }
        // No tracer (the default): no span, none of its attributes worked out, and
        // a memory hit answered without suspending, from the keys alone (no plan:
        // it copied the context).
        guard services.spans.isTracing else {
            try admit(url, options, context)
            let keys = keys(url: url, options: options, context: context)
            switch stages.lookup.memory(key: keys.key, url: url, options: options, context: context) {
            case .hit(let result): return result
            case .needsStoredBytes(let result):
                // The store only here: copying the optional existential on every hit cost a tenth of it.
                return await stages.lookup.completed(.needsStoredBytes(result), key: keys.key, url: url, store: context.store ?? store) ?? result
            case .miss:
                if options.contains(.avoidDecode), let hit = try immediateDiskHit(url, options, context, keys) { return hit }
                return try await loadPastMemory(plan(url: url, options: options, context: context, keys: keys), progress: progress)
            }
        }
        let plan = plan(url: url, options: options, context: context)
        return try await services.spans.traced("webimage.load") { span in
            span.set("server.address", url.host ?? "")
            span.set("url.scheme", url.scheme ?? "")
            let result = try await load(plan, progress: progress)
            span.set("webimage.source", result.cacheType == .none ? "network" : result.cacheType.rawValue)
            span.set("webimage.bytes", result.data?.count ?? 0)
            return result
        }
    }

    /// What ``loadImage(with:options:context:progress:)`` would answer from the
    /// memory tier, found on the calling thread without suspending, or nil.
    ///
    /// For a server that answers warm requests where they arrive (a NIO event loop)
    /// and hands the rest to `loadImage`. It judges the URL as a load does (the
    /// URL policy, the failed-URL blocklist) and counts the hit as a load's. Nil
    /// means "ask `loadImage`": a miss, a load the policy or blocklist refuses
    /// (whose error `loadImage` throws), a result whose bytes the tier does not
    /// hold, a manager that is shutting down, or a manager with a tracer (whose
    /// load is a span).
    public func memoryResult(with url: URL, options: ImageOptions = [], context: ImageContext = ImageContext()) -> ImageResult? {
        guard !services.spans.isTracing, loads.enter() else { return nil }
        defer { loads.leave() }
        guard (try? admit(url, options, context)) != nil else { return nil }
        let keys = keys(url: url, options: options, context: context)
        guard case .hit(let result) = stages.lookup.memory(key: keys.key, url: url, options: options, context: context) else { return nil }
        return result
    }

    private func load(_ plan: LoadPlan, progress: (@Sendable (LoadProgress) -> Void)?) async throws -> ImageResult {
        try admit(plan.url, plan.options, plan.context)
        if let hit = await stages.lookup.memoryHit(plan) {
            return hit
        }
        return try await loadPastMemory(plan, progress: progress)
    }

    /// The URL policy and the blocklist, before any tier.
    private func admit(_ url: URL, _ options: ImageOptions, _ context: ImageContext) throws {
        try judge(url, context)
        if !options.contains(.retryFailed), !blocklist.holdsNone, let failure = blocklist.blockingError(for: url.absoluteString) {
            throw OriginalStage.blocked(url, by: failure, elsewhere: false)
        }
    }

    /// A load of bytes that the store answers on the calling thread
    /// (``ImmediateCacheReading``): the hit ``loadPastMemory(_:progress:)`` would
    /// return, with no plan made (it copies the context) and no async call. Nil
    /// for anything else, which goes on as before.
    private func immediateDiskHit(_ url: URL, _ options: ImageOptions, _ context: ImageContext,
                                  _ keys: (plainKey: String, key: String, derivesBytes: Bool)) throws -> ImageResult? {
        guard immediateStore != nil, context.store == nil, context.queryCacheTiers.contains(.disk),
              options.isDisjoint(with: [.fromLoaderOnly, .refreshCached]) else { return nil }
        // A job of this key may be about to replace the entry: the load joins it.
        if images.hasJobs, images.isRunning(LoadPlan.jobKey(key: keys.key, options: options)) { return nil }
        // Called through the property, not a local copy: a store that sweepers
        // hold weakly counts its references the slow way, so each copy costs.
        guard let entry = immediateStore?.immediateEntry(forKey: keys.derivesBytes ? keys.key : keys.plainKey) else { return nil }
        try services.judge(stored: entry, url: url, context: context)
        return storedBytes(entry, key: keys.key, url: url, context: context)
    }

    /// A disk hit returned as bytes: counted, remembered in the memory tier.
    private func storedBytes(_ entry: CacheEntry, key: String, url: URL, context: ImageContext) -> ImageResult {
        metrics.hit(entry.cacheType)
        stages.publish.rememberData(entry.data, key: key, context: context, checksum: entry.checksum, madeAt: entry.metadata.storedAt)
        return ImageResult(image: nil, data: entry.data, cacheType: entry.cacheType, key: key, url: url,
                           checksum: entry.checksum, lastModified: entry.metadata.storedAt)
    }

    /// A load the memory tier did not answer: the disk tier on the caller's task,
    /// else the coalesced job.
    private func loadPastMemory(_ plan: LoadPlan, progress: (@Sendable (LoadProgress) -> Void)?) async throws -> ImageResult {
        let url = plan.url
        // The fast path: a disk hit that no job is loading is read on the caller's
        // task (an LMDB read is a memory lookup; a file store hops to its I/O pool
        // once), with no coalesced job. Bytes are returned as they are; a hit to
        // decode goes on into the job with its bytes, so that concurrent decodes
        // of one key still happen once.
        var firstRead: LookupStage.DiskRead?
        // The job key only when a job may be running: a warm hit with none needs no key.
        if plan.readsDisk, let store = plan.store, !(images.hasJobs && images.isRunning(plan.jobKey)) {
            let entry = await stages.lookup.read(store, plan.diskKey)
            if let entry { try services.judge(stored: entry, plan) }
            if let entry, plan.bytesOnly { return storedBytes(entry, key: plan.key, url: url, context: plan.context) }
            firstRead = LookupStage.DiskRead(key: plan.diskKey, entry: entry)
        }
        let jobKey = plan.jobKey
        let (read, stages, jobStages) = (firstRead, stages, jobStages)
        // Past the deadline, the error of the stage the job is in then.
        let metrics = metrics
        let deadline = plan.context.deadline.map { instant in
            Coalescer<String, ImageResult>.Deadline(instant: instant, timer: deadlines) {
                let error = (jobStages.stage(of: jobKey) ?? .lookup).deadlineError(url.absoluteString)
                metrics.failed(error.code)  // webimage_errors_total{code="timedOut"|"workTimedOut"}
                return error
            }
        }
        do {
            return try await images.value(for: jobKey, priority: OriginalStage.priority(plan.options), progress: progress,
                                          deadline: deadline) { progress in
                try await LoadJob(plan, stages: stages, firstRead: read, progress: progress).run()
            }
        } catch {
            throw WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)")
        }
    }

    /// The URL policy's judgement of the URL asked for, before any tier: a URL it
    /// refuses is refused whether or not a tier holds it (a host taken off an
    /// allow-list is not served from the cache either). This is the one place
    /// the manager asks; the loader asks about every other URL it requests
    /// (redirect hops), and is told this one was judged (``OriginalStage``).
    func judge(_ url: URL, _ context: ImageContext) throws { try services.judge(url, context) }

    /// Removes an image from both tiers under its result key.
    public func removeImage(forKey key: String) async throws {
        memoryCache?.removeImage(forKey: key)
        try await store?.removeData(forKey: key)
    }

    /// Runs `body`, or fails at `deadline` with the error of the stage the call is
    /// in then (``LoadStage/deadlineError(_:)``: `timedOut` in a download,
    /// `workTimedOut` elsewhere): the body is cancelled then. For ``info(for:context:)``,
    /// which is no coalesced job (a load's deadline is its coalescer wait's, kept
    /// by ``deadlines``, with no task group).
    static func within<T: Sendable>(_ deadline: ContinuousClock.Instant?, url: URL,
                                           stage: @escaping @Sendable () -> LoadStage?,
                                           _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let deadline else { return try await body() }
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                throw (stage() ?? .lookup).deadlineError(url.absoluteString)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw WebImageError(.cancelled, "cancelled") }
            return first
        }
    }
}
