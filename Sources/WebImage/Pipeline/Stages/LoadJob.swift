import Foundation

/// The stages of a load, made once by the manager.
final class LoadStages: Sendable {
    let services: StageServices
    let lookup: LookupStage
    let original: OriginalStage
    let render: RenderStage
    let publish: PublishStage

    init(configuration: ImageManager.Configuration) {
        let services = StageServices(configuration: configuration)
        let pending = PendingEntries()
        let lookup = LookupStage(services: services, pending: pending)
        let render = RenderStage(services: services)
        self.services = services
        self.lookup = lookup
        self.render = render
        self.original = OriginalStage(services: services, lookup: lookup, budget: ByteBudget(limit: configuration.originalsBudget))
        self.publish = PublishStage(services: services, pending: pending,
                                    writes: BackgroundWork(maxPending: configuration.maxPendingWrites,
                                                           maxPendingBytes: configuration.maxPendingWriteBytes),
                                    render: render)
    }
}

/// One coalesced job: what every caller of one job key shares. It composes the
/// stages and holds what the job owns until it ends: the original's room in the
/// originals' budget, and the original itself, visible to other jobs (other
/// sizes of the URL) until its store write takes over, or (read from the
/// store) until the last job that shares it ends.
///
/// 1. A derived result already stored: its bytes are the finished image.
/// 2. The original: stored, else downloaded (``OriginalStage``).
/// 3. Bytes only, for an original: checked to be an image, stored, returned.
/// 4. Render (``RenderStage``); stored bytes no coder reads are a damaged entry,
///    removed and downloaded again, once. Downloaded bytes a coder read, whose
///    render this request asked too much of (a pixel or cost limit, a step),
///    are stored all the same.
/// 5. Publish (``PublishStage``): the original and the result stored, the memory tier.
struct LoadJob: ~Copyable {
    let plan: LoadPlan
    let stages: LoadStages
    let firstRead: LookupStage.DiskRead?
    let progress: @Sendable (LoadProgress) -> Void
    /// The download's charge in the originals' budget, shared with the other
    /// loads of the download: the last reference to go releases it.
    private var charge: ByteBudget.Reservation?
    private var heldOriginal: UInt64?

    init(_ plan: LoadPlan, stages: LoadStages, firstRead: LookupStage.DiskRead?, progress: @escaping @Sendable (LoadProgress) -> Void) {
        self.plan = plan
        self.stages = stages
        self.firstRead = firstRead
        self.progress = progress
    }

    deinit {
        if let heldOriginal { stages.lookup.pending.release(plan.plainKey, id: heldOriginal) }
        stages.services.jobStages.clear(plan.jobKey)
    }

    consuming func run() async throws -> ImageResult {
        stages.services.jobStages.set(plan.jobKey, .lookup)
        if plan.derivesBytes, let hit = try await derivedHit() { return hit }
        var source = try await original()
        if plan.bytesOnly && !plan.derivesBytes { return try await originalBytes(source) }
        let rendered = try await render(&source)
        return try await publish(rendered, source)
    }

    // MARK: Stages

    /// A derived result already stored; nil when there is none, or when it no
    /// longer decodes (then removed: the result is made again).
    private func derivedHit() async throws -> ImageResult? {
        let (url, key, context) = (plan.url, plan.key, plan.context)
        guard let entry = await stages.lookup.entry(key, plan, firstRead: firstRead)?.entry else { return nil }
        try stages.services.judge(stored: entry, plan)
        stages.services.metrics.hit(entry.cacheType)
        if plan.bytesOnly {
            stages.publish.rememberData(entry.data, key: key, context: context, checksum: entry.checksum, madeAt: entry.metadata.storedAt)
            return ImageResult(image: nil, data: entry.data, cacheType: entry.cacheType, key: key, url: url,
                               checksum: entry.checksum, lastModified: entry.metadata.storedAt)
        }
        do {
            let image = try await stages.render.render(entry.data, plan, derived: true).image
            stages.publish.remember(image, key: key, context: context)
            return ImageResult(image: image, data: entry.data, cacheType: entry.cacheType, key: key, url: url,
                               checksum: entry.checksum, lastModified: entry.metadata.storedAt)
        } catch let error as WebImageError where Self.blamesURL(error) {
            await stages.lookup.discard(key, from: plan.store, error)
            return nil
        }
    }

    /// The original: stored, else (unless ``ImageOptions/fromCacheOnly``) downloaded.
    private mutating func original() async throws -> Original {
        if let found = await stages.lookup.entry(plan.plainKey, plan, firstRead: firstRead, sharing: true) {
            let entry = found.entry
            // Shared with the other jobs of the original until this one ends.
            if let heldOriginal { stages.lookup.pending.release(plan.plainKey, id: heldOriginal) }
            heldOriginal = found.holdID
            try stages.services.judge(stored: entry, plan)
            stages.services.metrics.hit(entry.cacheType)
            return Original(data: entry.data, cacheType: entry.cacheType, finalURL: entry.metadata.originalURL, heldDownload: found.held)
        }
        stages.services.metrics.miss()
        guard !plan.options.contains(.fromCacheOnly) else {
            throw WebImageError(.notCached, "\(plan.url.absoluteString) is not in the cache and .fromCacheOnly forbids loading it")
        }
        return try await download()
    }

    /// Downloads the original, holding its room in the budget and sharing its bytes until the job ends.
    private mutating func download() async throws -> Original {
        charge = nil
        // A stored copy this job held (it did not decode) is let go first.
        if let heldOriginal { stages.lookup.pending.release(plan.plainKey, id: heldOriginal) }
        heldOriginal = nil
        let original = try await stages.original.download(plan, progress: progress)
        charge = original.charge
        // The download held the bytes already, one hold for each load that got them;
        // a revalidated entry (304) is held here.
        heldOriginal = original.holdID ?? stages.lookup.pending.hold(original.data, key: plan.plainKey,
                                                                     metadata: CacheMetadata(contentType: original.response?.contentType, originalURL: original.finalURL))
        return original
    }

    /// Bytes only, for an original: some coder must recognise bytes just downloaded
    /// before they are cached (a pipeline with no coders at all stores anything).
    private func originalBytes(_ source: Original) async throws -> ImageResult {
        let (url, context) = (plan.url, plan.context)
        var failure: WebImageError?
        if source.cacheType == .none {
            let coders = stages.services.configuration.coders
            let recognised = context.coder.map { $0.canDecode(source.data) } ?? (coders.decoder(for: source.data) != nil)
            guard recognised || coders.coders.isEmpty else {
                throw stages.original.recordFailure(coders.noCoder("\(url.absoluteString) is not an image any coder recognises"), url: url)
            }
            if storesOriginal(source) { failure = await stages.publish.storeOriginal(source.data, response: source.response, plan) }
        }
        stages.publish.rememberData(source.data, key: plan.plainKey, context: context, checksum: nil, madeAt: nil)
        return ImageResult(image: nil, data: source.data, cacheType: source.cacheType, key: plan.plainKey, url: url, storeFailure: failure)
    }

    /// Whether the derived result's bytes are made in the render's own pool job:
    /// when the caller wants them (bytes only) or waits for the store anyway; else
    /// they are made and stored in the background.
    private var encodesNow: Bool {
        plan.derivesBytes && (plan.bytesOnly || plan.options.contains(.waitStoreCache))
    }

    /// Renders the original. Only a failure of the URL itself blocks it: bytes no
    /// coder can read. A failure that belongs to this request (a transform, a pixel
    /// limit the options could lift) says nothing about the next load of the URL.
    /// Cached bytes no coder reads are a damaged entry, not the URL's fault: removed,
    /// and the original downloaded again, once (a fresh download that fails to
    /// decode is the URL's, as are the bytes another job just downloaded and holds
    /// for the store: every size of a bad image asked at once must not each fetch
    /// it again).
    private mutating func render(_ source: inout Original) async throws -> RenderStage.Rendered {
        var reloaded = false
        while true {
            do {
                return try await stages.render.render(source.data, plan, derived: false, encoding: encodesNow)
            } catch {
                let failure = WebImageError.wrap(error, as: .decodeFailed, "decoding \(plan.url.absoluteString)")
                guard Self.blamesURL(failure) else {
                    // A cancelled job (its callers gone, or its deadline passed) is no
                    // failure of its own: the deadline's error is counted when it fires.
                    if failure.code != .cancelled { stages.services.metrics.failed(failure.code) }
                    // Bytes a coder read are a good original that this request asked too
                    // much of: stored, so that the next request (another size, lighter
                    // steps, or the same one again) reads them instead of downloading them.
                    if source.cacheType == .none, Self.keepsOriginal(after: failure), storesOriginal(source) {
                        _ = await stages.publish.storeOriginal(source.data, response: source.response, plan)
                    }
                    throw failure
                }
                guard source.cacheType != .none, !source.heldDownload else { throw stages.original.recordFailure(failure, url: plan.url) }
                guard !reloaded else { throw failure }
                await stages.lookup.discard(plan.plainKey, from: plan.store, failure)
                guard !plan.options.contains(.fromCacheOnly) else { throw failure }
                source = try await download()
                reloaded = true
            }
        }
    }

    /// Stores the original and the result, fills the memory tier, and makes the callers' result.
    private func publish(_ rendered: RenderStage.Rendered, _ source: Original) async throws -> ImageResult {
        let (url, key, context, publish) = (plan.url, plan.key, plan.context, stages.publish)
        let image = rendered.image
        var storeFailure: WebImageError?
        if source.cacheType == .none, storesOriginal(source) {
            stages.services.jobStages.set(plan.jobKey, .store)
            storeFailure = await publish.storeOriginal(source.data, response: source.response, plan)
        }
        guard plan.derivesBytes else {
            publish.remember(image, key: key, context: context)
            return ImageResult(image: image, data: source.data, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure)
        }
        guard encodesNow, let encoded = rendered.encoded else {
            publish.remember(image, key: key, context: context)
            publish.storeDerivedInBackground(image, plan, originalURL: source.finalURL)
            return ImageResult(image: image, data: nil, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure)
        }
        let madeAt = Date()
        var checksum: UInt64?
        if plan.bytesOnly {
            guard let encoded else {
                // A format asked for that no coder writes because a coder is unavailable
                // (its library is missing): the deployment's failure (CacheSerializer).
                let coders = stages.services.configuration.coders
                if let format = context.encodeFormat, coders.encoder(for: format) == nil,
                   case let missing = coders.noCoder("the cache serializer made no bytes for \(key): no coder here writes \(format)"),
                   missing.code == .libraryUnavailable {
                    throw missing
                }
                throw WebImageError(.encodeFailed, "the cache serializer made no bytes for \(key), which .avoidDecode asked for")
            }
            // Hashed once here: the memory tier keeps it, so its hits carry an ETag
            // without hashing again (the store's codec hashes for its own checksum).
            checksum = XXH3.hash(encoded)
            publish.rememberData(encoded, key: key, context: context, checksum: checksum, madeAt: madeAt)
        } else {
            publish.remember(image, key: key, context: context)
        }
        if let encoded, let failure = await publish.storeDerived(encoded, plan, originalURL: source.finalURL) {
            storeFailure = storeFailure ?? failure
        }
        return ImageResult(image: image, data: encoded, cacheType: source.cacheType, key: key, url: url, storeFailure: storeFailure,
                           checksum: checksum, lastModified: madeAt)
    }

    /// Whether this load stores its downloaded original: one load of a shared
    /// download does, unless a load waits for its own writes (`.waitStoreCache`).
    private func storesOriginal(_ source: Original) -> Bool {
        plan.options.contains(.waitStoreCache) || source.claimsStore()
    }

    /// Whether a render that failed so had its original read by a coder (its
    /// header at least): a request's limits, steps or encode, not its bytes.
    static func keepsOriginal(after error: WebImageError) -> Bool {
        [.pixelLimitExceeded, .costLimitExceeded, .transformFailed, .encodeFailed].contains(error.code)
    }

    /// Whether a decode failure is the URL's fault (its bytes are no image any
    /// coder reads), rather than this request's (transform, pixel limit, options).
    static func blamesURL(_ error: WebImageError) -> Bool {
        error.code == .unsupportedFormat || error.code == .decodeFailed
    }
}
