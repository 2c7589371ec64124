public import Foundation
import Logging
import Synchronization

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
    private let images = Coalescer<String, ImageResult>()
    private let downloads = Coalescer<String, LoadResponse>()
    let slots = Mutex<[String: ImageTask]>([:])
    private let metrics: PipelineMetrics
    /// Loads in flight, counted so that ``shutdown(gracePeriod:)`` can wait for them.
    private let loads = InFlightCounter()
    /// Store writes running in the background, bounded.
    private let writes: BackgroundWork
    /// Downloaded originals waiting for, or in, their decode (``Configuration/originalsBudget``).
    private let originals: ByteBudget

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.metrics = PipelineMetrics(dimensions: configuration.metricsDimensions)
        self.writes = BackgroundWork(maxPending: configuration.maxPendingWrites, maxPendingBytes: configuration.maxPendingWriteBytes)
        self.originals = ByteBudget(limit: configuration.originalsBudget)
    }

    /// Bytes of downloaded originals reserved now (``Configuration/originalsBudget``),
    /// the most reserved at once so far, and the loads waiting for room.
    public var originalsInFlight: (bytes: Int, peak: Int, waiting: Int) {
        let usage = originals.usage
        return (usage.reserved, usage.peak, usage.waiting)
    }

    /// Store writes running in the background now, and the bytes they hold.
    public var pendingStoreWrites: (count: Int, bytes: Int) { writes.pending }

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
        if !finished {
            // Loads still in flight end now: their callers get shutDown, their jobs are cancelled.
            let ended = WebImageError(.shutDown, "the manager shut down: its grace period of \(gracePeriod) ended before this load did")
            let abandoned = images.abandonAll(with: ended) + downloads.abandonAll(with: ended)
            let (count, bytes) = writes.pending
            configuration.logger.warning("shutdown: the grace period ended with work still running",
                                         metadata: ["loadsEnded": "\(abandoned)", "writes": "\(count)", "bytes": "\(bytes)"])
        }
        return finished
    }

    /// The memory tier, if any.
    public var memoryCache: MemoryImageCache? { configuration.memoryCache }
    /// The disk tier, if any.
    public var store: (any CacheStore)? { configuration.store }
    /// The failed-URL blocklist; `removeAll()` clears it.
    public var blocklist: FailedURLBlocklist { configuration.blocklist }

    /// The key a URL's original bytes are cached under.
    public func cacheKey(for url: URL, context: ImageContext = ImageContext()) -> String {
        (context.cacheKeyFilter ?? configuration.cacheKeyFilter).key(url)
    }

    /// The key a load's result is cached under: the plain key, or a derived one
    /// when the context asks for a thumbnail or a transformation.
    public func resultKey(for url: URL, options: ImageOptions = [], context: ImageContext = ImageContext()) -> String {
        CacheKey.derived(from: cacheKey(for: url, context: context), options: options, context: context, encodeOptions: encodeOptions(context))
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
        let plainKey = cacheKey(for: url, context: context)
        let derivesBytes = CacheKey.storesDerivedBytes(options: options, context: context)
        // Bytes of an original live under the plain key; a thumbnail's or a
        // transform's under the derived key, bytes-only or not.
        let key = options.contains(.avoidDecode) && !derivesBytes ? plainKey : CacheKey.derived(from: plainKey, options: options, context: context, encodeOptions: encodeOptions(context))

        if !options.contains(.retryFailed), let failure = blocklist.blockingError(for: url.absoluteString) {
            throw Self.blocked(url, by: failure, elsewhere: false)
        }
        if let hit = await memoryHit(url: url, key: key, options: options, context: context) {
            return hit
        }
        let flags: ImageOptions = [.refreshCached, .fromCacheOnly, .fromLoaderOnly, .cacheMemoryOnly, .avoidDecode, .waitStoreCache]
        let jobKey = key + "|" + String(options.intersection(flags).rawValue)
        let store = context.store ?? self.store
        let readDisk = store != nil && context.queryCacheTiers.contains(.disk)
            && options.isDisjoint(with: [.fromLoaderOnly, .refreshCached])

        // The fast path: a disk hit that no job is loading is read on the caller's
        // task (an LMDB read is a memory lookup; a file store hops to its I/O pool
        // once), with no coalescer task or continuation. Bytes are returned as they
        // are; a hit to decode goes on into the coalesced job with its bytes, so
        // that concurrent decodes of one key still happen once.
        var firstRead: DiskRead?
        if readDisk, let store, !images.isRunning(jobKey) {
            let diskKey = derivesBytes ? key : plainKey
            let entry = await read(store, diskKey)
            if let entry, options.contains(.avoidDecode) {
                metrics.hit(entry.cacheType)
                rememberData(entry.data, key: key, context: context)
                return ImageResult(image: nil, data: entry.data, cacheType: entry.cacheType, key: key, url: url)
            }
            firstRead = DiskRead(key: diskKey, entry: entry)
        }
        let read = firstRead
        do {
            return try await Self.within(context.deadline, url: url) {
                try await self.images.value(for: jobKey, priority: Self.priority(options), progress: progress) { progress in
                    try await self.fetch(url: url, plainKey: plainKey, key: key, options: options, context: context,
                                         firstRead: read, progress: progress)
                }
            }
        } catch {
            throw WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)")
        }
    }

    /// Runs `body`, or fails with `timedOut` at `deadline`: the body is cancelled
    /// then (the coalesced job with it, when no other caller waits for it).
    private static func within<T: Sendable>(_ deadline: ContinuousClock.Instant?, url: URL,
                                           _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let deadline else { return try await body() }
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                throw WebImageError(.timedOut, "\(url.absoluteString) was not loaded by its deadline")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw WebImageError(.cancelled, "cancelled") }
            return first
        }
    }

    /// Removes an image from both tiers under its result key.
    public func removeImage(forKey key: String) async throws {
        memoryCache?.removeImage(forKey: key)
        try await store?.removeData(forKey: key)
    }

    // MARK: Steps

    /// A disk lookup already made on the caller's task, handed to the job.
    struct DiskRead: Sendable {
        var key: String
        var entry: CacheEntry?
    }

    private func memoryHit(url: URL, key: String, options: ImageOptions, context: ImageContext) async -> ImageResult? {
        guard let cache = memoryCache, context.queryCacheTiers.contains(.memory),
              options.isDisjoint(with: [.fromLoaderOnly, .refreshCached])
        else { return nil }
        if options.contains(.avoidDecode) {
            guard let data = cache.data(forKey: key) else { return nil }
            metrics.hit(.memory)
            return ImageResult(image: nil, data: data, cacheType: .memory, key: key, url: url)
        }
        guard let (image, cachedData) = cache.entry(forKey: key), let image else { return nil }
        metrics.hit(.memory)
        var data = cachedData
        if data == nil, options.contains(.queryMemoryData), let store = context.store ?? store {
            data = try? await store.data(forKey: key)
        }
        return ImageResult(image: image, data: data, cacheType: .memory, key: key, url: url)
    }

    private func fetch(url: URL, plainKey: String, key: String, options: ImageOptions, context: ImageContext,
                       firstRead: DiskRead?, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> ImageResult {
        let store = context.store ?? self.store
        let readDisk = store != nil && context.queryCacheTiers.contains(.disk)
            && options.isDisjoint(with: [.fromLoaderOnly, .refreshCached])
        let derivesBytes = key != plainKey && CacheKey.storesDerivedBytes(options: options, context: context)
        let bytesOnly = options.contains(.avoidDecode)
        /// One disk lookup, unless the caller's task already made it.
        func lookup(_ lookupKey: String) async -> CacheEntry? {
            if let firstRead, firstRead.key == lookupKey { return firstRead.entry }
            guard readDisk, let store else { return nil }
            return await read(store, lookupKey)
        }

        // A derived result already on disk: its bytes are the finished image.
        if derivesBytes, let entry = await lookup(key) {
            metrics.hit(entry.cacheType)
            if bytesOnly {
                rememberData(entry.data, key: key, context: context)
                return ImageResult(image: nil, data: entry.data, cacheType: entry.cacheType, key: key, url: url)
            }
            do {
                let image = try await decode(entry.data, key: plainKey, options: options, context: context, derived: true)
                remember(image, key: key, context: context)
                return ImageResult(image: image, data: entry.data, cacheType: entry.cacheType, key: key, url: url)
            } catch let error as WebImageError where Self.blamesURL(error) {
                // Stored bytes no coder reads: a damaged entry. Removed; the result is made again below.
                await discard(key, from: store, error)
            }
        }

        /// The original from the loader, one download per URL. Its bytes are
        /// reserved in the originals' budget before it starts (the largest response,
        /// then its Content-Length, then its size) and held until this job ends.
        var original: ByteBudget.Reservation?
        defer { original?.release() }
        func downloadSource() async throws -> (data: Data, cacheType: CacheType, response: LoadResponse?) {
            original?.release()
            let reservation: ByteBudget.Reservation
            do { reservation = try await originals.reserve(Int(clamping: configuration.maxResponseSize)) } catch {
                throw WebImageError.wrap(error, as: .cancelled, "waiting for room in the originals' budget")
            }
            original = reservation
            let reporting: @Sendable (LoadProgress) -> Void = { value in
                if let expected = value.expected, expected > 0 { reservation.shrink(to: Int(clamping: expected)) }
                progress(value)
            }
            do {
                let source = try await download(url: url, plainKey: plainKey, store: store, options: options, context: context, progress: reporting)
                reservation.shrink(to: source.data.count)
                return source
            } catch {
                throw recordFailure(error, url: url)
            }
        }
        var source: (data: Data, cacheType: CacheType, response: LoadResponse?)
        if let entry = await lookup(plainKey) {
            metrics.hit(entry.cacheType)
            source = (entry.data, entry.cacheType, nil)
        } else if options.contains(.fromCacheOnly) {
            metrics.miss()
            throw WebImageError(.notCached, "\(url.absoluteString) is not in the cache and .fromCacheOnly forbids loading it")
        } else {
            metrics.miss()
            source = try await downloadSource()
        }

        if bytesOnly && !derivesBytes {
            var failure: WebImageError?
            if source.cacheType == .none {
                // Bytes only, but still images: some coder must recognise them before
                // they are cached (a pipeline with no coders at all stores anything).
                let recognised = context.coder.map { $0.canDecode(source.data) } ?? (configuration.coders.decoder(for: source.data) != nil)
                guard recognised || configuration.coders.coders.isEmpty else {
                    throw recordFailure(WebImageError(.unsupportedFormat, "\(url.absoluteString) is not an image any coder recognises"), url: url)
                }
                failure = await storeOriginal(source.data, response: source.response, key: plainKey, store: store, options: options, context: context)
            }
            rememberData(source.data, key: plainKey, context: context)
            return ImageResult(image: nil, data: source.data, cacheType: source.cacheType, key: plainKey, url: url, storeFailure: failure)
        }

        var image: Image?
        var reloaded = false
        while image == nil {
            do {
                image = try await decode(source.data, key: plainKey, options: options, context: context, derived: false)
            } catch {
                // Only a failure of the URL itself blocks it: bytes no coder can read. A
                // failure that belongs to this request (a transform, a pixel limit the
                // options could lift) says nothing about the next load of the URL.
                let failure = WebImageError.wrap(error, as: .decodeFailed, "decoding \(url.absoluteString)")
                guard Self.blamesURL(failure) else {
                    metrics.failed(failure.code)
                    throw failure
                }
                guard source.cacheType != .none else { throw recordFailure(failure, url: url) }
                guard !reloaded else { throw failure }
                // Cached bytes that no coder reads are a damaged entry, not the URL's
                // fault: removed, and the original loaded again (once: a fresh
                // download that fails to decode is the URL's).
                await discard(plainKey, from: store, failure)
                guard !options.contains(.fromCacheOnly) else { throw failure }
                source = try await downloadSource()
                reloaded = true
            }
        }
        guard let image else { throw WebImageError(.decodeFailed, "decoding \(url.absoluteString) made no image") }
        var storeFailure: WebImageError?
        if source.cacheType == .none {
            storeFailure = await storeOriginal(source.data, response: source.response, key: plainKey, store: store, options: options, context: context)
        }
        guard derivesBytes else {
            remember(image, key: key, context: context)
            return ImageResult(image: image, data: source.data, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure)
        }
        // The derived result's bytes: made now when the caller wants them (bytes
        // only) or waits for the store anyway, else made and stored in the background.
        guard bytesOnly || options.contains(.waitStoreCache) else {
            remember(image, key: key, context: context)
            storeDerivedInBackground(image, key: key, store: store, options: options, context: context)
            return ImageResult(image: image, data: nil, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure)
        }
        let encoded: Data?
        do { encoded = try await encodeDerived(image, key: key, context: context) } catch {
            guard bytesOnly else {
                logStoreError(error, key: key)
                remember(image, key: key, context: context)
                return ImageResult(image: image, data: nil, cacheType: source.cacheType, key: key, url: url,
                                   storeFailure: storeFailure ?? WebImageError.wrap(error, as: .storeFailed, "encoding \(key)"))
            }
            throw error
        }
        if bytesOnly {
            guard let encoded else {
                throw WebImageError(.encodeFailed, "the cache serializer made no bytes for \(key), which .avoidDecode asked for")
            }
            rememberData(encoded, key: key, context: context)
        } else {
            remember(image, key: key, context: context)
        }
        if let encoded, let store, context.storeCacheTiers.contains(.disk), !options.contains(.cacheMemoryOnly) {
            let metadata = CacheMetadata(contentType: ImageFormat.sniff(encoded)?.mimeType)
            if let failure = await write(encoded, key: key, metadata: metadata, store: store, wait: options.contains(.waitStoreCache)) {
                storeFailure = storeFailure ?? failure
            }
        }
        return ImageResult(image: image, data: encoded, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure)
    }

    /// The bytes from the loader, one download per URL however many jobs want it.
    private func download(url: URL, plainKey: String, store: (any CacheStore)?, options: ImageOptions, context: ImageContext,
                          progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> (data: Data, cacheType: CacheType, response: LoadResponse?) {
        var cached: CacheEntry?
        if options.contains(.refreshCached), let store, context.queryCacheTiers.contains(.disk) {
            cached = await read(store, plainKey)
        }
        // Every tier missed: before the origin, ask whether another host of the fleet found this URL broken.
        if cached == nil, !options.contains(.retryFailed), blocklist.shared != nil,
           let failure = await blocklist.sharedBlockingError(for: url.absoluteString) {
            throw Self.blocked(url, by: failure, elsewhere: true)
        }
        let validators = cached.map { [$0.metadata.etag ?? "", $0.metadata.lastModified ?? ""].joined(separator: "|") }
        let jobKey = plainKey + (validators.map { "|revalidate|" + $0 } ?? "")
        let validatorMetadata = cached?.metadata
        let response = try await downloads.value(for: jobKey, priority: Self.priority(options), progress: progress) { progress in
            try await self.performLoad(url: url, options: options, context: context, validators: validatorMetadata, progress: progress)
        }
        if response.isNotModified {
            guard let cached, let store else {
                throw WebImageError(.badStatus, "\(url.absoluteString) answered 304 to a request that was not conditional", statusCode: 304)
            }
            var metadata = cached.metadata
            metadata.etag = response.etag ?? metadata.etag
            metadata.lastModified = response.lastModified ?? metadata.lastModified
            do { try await store.updateMetadata(metadata, forKey: plainKey) } catch { logStoreError(error, key: plainKey) }
            configuration.logger.debug("revalidated, not modified", metadata: ["url": "\(url.absoluteString)"])
            return (cached.data, .disk, nil)
        }
        return (response.data, .none, response)
    }

    func performLoad(url: URL, options: ImageOptions, context: ImageContext, validators: CacheMetadata?,
                             progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        guard let loader = context.loader ?? configuration.loaders.loader(for: url) else {
            throw WebImageError(.invalidURL, "no loader is registered for \(url.scheme.map { "'\($0)' URLs" } ?? "paths") (\(url.absoluteString))")
        }
        var request = LoadRequest(
            url: url,
            headers: configuration.requestHeaders,
            priority: options.contains(.highPriority) ? .high : options.contains(.lowPriority) ? .low : .normal,
            timeout: configuration.timeout,
            maxResponseSize: configuration.maxResponseSize,
            ifNoneMatch: validators?.etag,
            ifModifiedSince: validators?.lastModified
        )
        request.urlPolicy = context.urlPolicy ?? configuration.urlPolicy
        context.requestModifier?(&request)
        if let policy = request.urlPolicy, let reason = policy(request.url) {
            throw WebImageError(.forbidden, "\(request.url.absoluteString) \(reason)", isTransient: false)
        }
        let breaker = configuration.originBreaker
        let admission = try breaker?.admit(request.url)
        if let breaker, request.stillAdmitted == nil {
            let queued = request.url
            request.stillAdmitted = { breaker.refusal(for: queued) }
        }
        let started = ContinuousClock.now
        let response: LoadResponse
        do {
            response = try await loader.load(request, progress: progress)
        } catch {
            let failure = WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)")
            if let admission { breaker?.report(admission, outcome: OriginCircuitBreaker.outcome(of: failure)) }
            throw failure
        }
        // One error for a status outside 2xx and 304: its outcome for the breaker,
        // then thrown (the Retry-After is parsed once).
        let failure = response.isNotModified || (200..<300).contains(response.statusCode) ? nil
            : WebImageError.httpStatus(response.statusCode, url: url.absoluteString, retryAfter: response.headers["retry-after"])
        if let admission { breaker?.report(admission, outcome: failure.map(OriginCircuitBreaker.outcome(of:)) ?? .answered) }
        metrics.loaded(bytes: response.data.count, duration: ContinuousClock.now - started)
        if let failure { throw failure }
        if response.isNotModified { return response }
        guard !response.data.isEmpty else {
            throw WebImageError(.unsupportedFormat, "\(url.absoluteString) answered with an empty body")
        }
        return response
    }

    /// Decodes (and for originals, transforms) on the blocking pool.
    private func decode(_ data: Data, key: String, options: ImageOptions, context: ImageContext, derived: Bool) async throws -> Image {
        guard let coder = context.coder ?? configuration.coders.decoder(for: data) else {
            let what = ImageFormat.sniff(data).map { "\($0) data, which no registered coder decodes" } ?? "data no registered coder recognises"
            throw WebImageError(.unsupportedFormat, "\(key) is \(what) (coders: \(configuration.coders.names.joined(separator: ", ")))")
        }
        var decodeOptions = configuration.decodeOptions
        decodeOptions.scale = context.scaleFactor ?? ImageScale.scale(forKey: key)
        decodeOptions.firstFrameOnly = decodeOptions.firstFrameOnly || options.contains(.decodeFirstFrameOnly)
        decodeOptions.scaleDownLargeImages = decodeOptions.scaleDownLargeImages || options.contains(.scaleDownLargeImages)
        decodeOptions.keepOrientation = decodeOptions.keepOrientation || context.keepOrientation
        decodeOptions.allowTruncated = decodeOptions.allowTruncated || context.allowTruncated
        decodeOptions.keepColorProfile = decodeOptions.keepColorProfile || encodeOptions(context).keepColorProfile
        decodeOptions.preserveAspectRatio = context.preserveAspectRatio
        decodeOptions.cropFocus = context.cropFocus
        // Derived bytes already are the thumbnail, transformed and upright.
        decodeOptions.thumbnailPixelSize = derived ? nil : context.thumbnailPixelSize
        if derived { decodeOptions.keepOrientation = true }
        let transformer = derived ? nil : context.transformer
        let metrics = metrics
        let finalOptions = decodeOptions
        let pool = configuration.pool
        return try await CancellationFlag.run { flag in
            // Each step of the chain is checked against the decode's limits before it
            // runs, and a cancelled load (its callers gone, its deadline passed) stops between steps.
            let budget = TransformBudget(pixelLimit: finalOptions.pixelLimit, memoryLimit: finalOptions.memoryLimit,
                                         isCancelled: { flag.isCancelled })
            return try await pool.run {
                let started = ContinuousClock.now
                var image: Image
                do { image = try coder.decode(data, options: finalOptions) } catch {
                    throw WebImageError.wrap(error, as: .decodeFailed, "decoding \(key)")
                }
                metrics.decoded(duration: ContinuousClock.now - started)
                if let transformer {
                    do { image = try budget.apply(transformer, to: image) } catch {
                        throw WebImageError.wrap(error, as: .transformFailed, "transforming \(key) with \(transformer.key)")
                    }
                }
                return image
            }
        }
    }

    private func remember(_ image: Image, key: String, context: ImageContext) {
        guard context.storeCacheTiers.contains(.memory) else { return }
        memoryCache?.setImage(image, forKey: key)
    }

    private func rememberData(_ data: Data, key: String, context: ImageContext) {
        guard context.storeCacheTiers.contains(.memory) else { return }
        memoryCache?.setData(data, forKey: key)
    }

    /// Stores the original bytes; returns the failure of a write it waited for.
    private func storeOriginal(_ data: Data, response: LoadResponse?, key: String, store: (any CacheStore)?, options: ImageOptions,
                               context: ImageContext) async -> WebImageError? {
        guard let store, context.storeCacheTiers.contains(.disk), !options.contains(.cacheMemoryOnly) else { return nil }
        let metadata = CacheMetadata(
            contentType: response?.contentType ?? ImageFormat.sniff(data)?.mimeType,
            etag: response?.etag,
            lastModified: response?.lastModified,
            originalURL: response?.url.absoluteString
        )
        return await write(data, key: key, metadata: metadata, store: store, wait: options.contains(.waitStoreCache))
    }

    /// A derived result's bytes, by the cache serializer, on the decode pool; nil
    /// when the serializer makes none.
    private func encodeDerived(_ image: Image, key: String, context: ImageContext) async throws -> Data? {
        let serializer = context.cacheSerializer ?? configuration.cacheSerializer
            ?? context.acceptedFormats.map { .negotiating($0, options: encodeOptions(context)) }
            ?? .encoding(as: context.encodeFormat, options: encodeOptions(context))
        let coders = configuration.coders
        do { return try await configuration.pool.run({ serializer.serialize(image, key, coders) }) } catch {
            throw WebImageError.wrap(error, as: .encodeFailed, "encoding \(key)")
        }
    }

    /// The options derived results are encoded with: the load's, else the manager's.
    private func encodeOptions(_ context: ImageContext) -> EncodeOptions { context.encodeOptions ?? configuration.encodeOptions }

    /// Encodes and stores a derived result in the background, within the bound.
    private func storeDerivedInBackground(_ image: Image, key: String, store: (any CacheStore)?, options: ImageOptions, context: ImageContext) {
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
    private func write(_ data: Data, key: String, metadata: CacheMetadata, store: any CacheStore, wait: Bool) async -> WebImageError? {
        if wait {
            do { try await store.setData(data, forKey: key, metadata: metadata) } catch {
                logStoreError(error, key: key)
                return WebImageError.wrap(error, as: .storeFailed, "storing \(key)")
            }
        } else {
            background(bytes: data.count, key: key) {
                do { try await store.setData(data, forKey: key, metadata: metadata) } catch { self.logStoreError(error, key: key) }
            }
        }
        return nil
    }

    /// Runs a store write in the background within the bound, or drops it (counted, logged).
    private func background(bytes: Int, key: String, _ job: @escaping @Sendable () async -> Void) {
        guard !writes.start(bytes: bytes, job) else { return }
        metrics.droppedWrite()
        configuration.logger.warning("cache write dropped: too many pending writes",
                                     metadata: ["key": "\(key)", "pending": "\(writes.pending.count)"])
    }

    /// A store that fails to read is a miss, not a failed load: the disk tier is a cache.
    private func read(_ store: any CacheStore, _ key: String) async -> CacheEntry? {
        do { return try await store.entry(forKey: key) } catch {
            logStoreError(error, key: key)
            return nil
        }
    }

    /// Removes a stored entry whose bytes no coder reads (damaged on disk or in
    /// the shared tier), counted as a store error and logged; never blocks the URL.
    private func discard(_ key: String, from store: (any CacheStore)?, _ error: WebImageError) async {
        metrics.storeError()
        configuration.logger.warning("cache entry does not decode; removed and loaded again",
                                     metadata: ["key": "\(key)", "error": "\(error)"])
        do { try await store?.removeData(forKey: key) } catch { logStoreError(error, key: key) }
    }

    private func logStoreError(_ error: any Error, key: String) {
        metrics.storeError()
        configuration.logger.warning("cache store failed", metadata: ["key": "\(key)", "error": "\(error)"])
    }

    private static func blocked(_ url: URL, by failure: WebImageError, elsewhere: Bool) -> WebImageError {
        WebImageError(.blockedURL, "\(url.absoluteString) failed recently\(elsewhere ? " on another host" : "") (\(failure)); pass .retryFailed to try again",
                      isTransient: false, statusCode: failure.statusCode, underlying: failure)
    }

    private func recordFailure(_ error: any Error, url: URL) -> WebImageError {
        let error = WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)")
        metrics.failed(error.code)
        if blocklist.record(error, for: url.absoluteString) {
            configuration.logger.info("blocked a failing URL", metadata: ["url": "\(url.absoluteString)", "error": "\(error)"])
        }
        return error
    }

    /// Whether a decode failure is the URL's fault (its bytes are no image any
    /// coder reads), rather than this request's (transform, pixel limit, options).
    static func blamesURL(_ error: WebImageError) -> Bool {
        error.code == .unsupportedFormat || error.code == .decodeFailed
    }

    static func priority(_ options: ImageOptions) -> TaskPriority? {
        if options.contains(.highPriority) { return .high }
        if options.contains(.lowPriority) { return .low }
        return nil
    }
}

extension CacheEntry {
    /// How the manager reports a hit on this entry.
    var cacheType: CacheType { source == .shared ? .shared : .disk }
}
