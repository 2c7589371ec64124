import Foundation
import Synchronization
import Logging
import Tracing

/// An original's bytes and where they came from.
struct Original: Sendable {
    var data: Data
    /// `.none` for bytes just downloaded; `.disk` or `.shared` for a stored entry
    /// (or a revalidated one the origin answered 304 for).
    var cacheType: CacheType
    /// The loader's response, for bytes just downloaded.
    var response: LoadResponse?
    /// Where the bytes came from when a redirect led elsewhere: the response's
    /// final URL, or a stored entry's ``CacheMetadata/originalURL``. Stored with
    /// derived results too, so that their hits can be judged by the URL policy.
    var finalURL: String?
    /// Bytes another job of this process downloaded and holds until its store
    /// write (``PendingEntries``), reported as stored: if they do not decode, the
    /// URL is at fault, as for a download of this job's own, not the store.
    var heldDownload = false
    /// The hold on these bytes in ``PendingEntries`` that is this load's to
    /// release, made as the shared download ended (nil: none yet).
    var holdID: UInt64?
    /// The download's charge in the originals' budget, one for all the loads
    /// that share it: released when the last of them lets it go.
    var charge: ByteBudget.Reservation?
    /// Which of the loads that share the download stores it (nil: not shared).
    var storeOnce: StoreOnce?

    /// Whether this load stores the bytes: the first of a shared download's
    /// loads to ask, or any load of bytes that are its own. (Each load storing
    /// them queued a write of the whole original per size: 256 sizes of a new
    /// 1.7 MB photo held hundreds of MB of writes of the same bytes.)
    func claimsStore() -> Bool { storeOnce?.claim() ?? true }
}

/// Claimed once: the first load of a shared download to store its bytes.
final class StoreOnce: Sendable {
    private let claimed = Atomic<Bool>(false)
    func claim() -> Bool { !claimed.exchange(true, ordering: .relaxed) }
}

/// A download's response, its hold in ``PendingEntries`` (each load that gets
/// it releases the hold once) and its charge in the originals' budget.
struct Downloaded: Sendable {
    var response: LoadResponse
    var holdID: UInt64?
    var charge: ByteBudget.Reservation?
    var storeOnce: StoreOnce?
}

/// The stage that brings an original's bytes from its origin: one download per
/// URL however many loads want it (shared by the URL's key), admitted to the
/// originals' budget before it starts, with the URL policy, the shared blocklist
/// and the origin's circuit breaker asked first.
///
/// The URL policy judged the URL asked for before any tier (``ImageManager``):
/// the loader is given a policy that passes that URL and asks the real one about
/// every other URL it requests (redirect hops, or a URL the context's request
/// modifier put in its place). A refusal is ``WebImageError/Code/forbidden``,
/// which an HTTP endpoint maps to 403.
struct OriginalStage: Sendable {
    let services: StageServices
    let lookup: LookupStage
    /// Downloads in flight, one per URL (and validators, for a revalidation).
    let downloads = Coalescer<String, Downloaded>()
    /// Downloaded originals waiting for, or in, their decode (``ImageManager/Configuration/originalsBudget``).
    let budget: ByteBudget

    var blocklist: FailedURLBlocklist { services.configuration.blocklist }

    /// Downloads the original within the originals' budget: the load is admitted
    /// first (it waits while the budget is spent), then the download, which the
    /// loads of one URL share, is charged once, by what its response declares and
    /// delivers, until the last load that holds its bytes ends
    /// (``Original/charge``). Two hundred sizes of one new URL charge its bytes
    /// once, not two hundred times.
    func download(_ plan: LoadPlan, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> Original {
        try await admit(plan)
        do {
            return try await fetch(plan, progress: progress)
        } catch {
            throw recordFailure(error, url: plan.url)
        }
    }

    /// Waits while the originals' budget is spent (or the URL's origin holds its
    /// share), with the job's stage saying so; nothing stays charged. Asked again
    /// inside the shared download (`again`), the stage is that of the job that
    /// started it, while it lasts.
    private func admit(_ plan: LoadPlan, again: Bool = false) async throws {
        let stages = services.jobStages
        again ? stages.update(plan.jobKey, .waitingForOriginals) : stages.set(plan.jobKey, .waitingForOriginals)
        do { try await budget.reserve(0, origin: Self.originKey(plan.url)).release() } catch {
            throw WebImageError.wrap(error, as: .cancelled, "waiting for room in the originals' budget")
        }
        again ? stages.update(plan.jobKey, .download) : stages.set(plan.jobKey, .download)
    }

    /// The bytes from the loader, one download per URL however many jobs want it;
    /// with ``ImageOptions/refreshCached``, a conditional request for a stored entry.
    private func fetch(_ plan: LoadPlan, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> Original {
        let (url, plainKey, options, context, store) = (plan.url, plan.plainKey, plan.options, plan.context, plan.store)
        var cached: CacheEntry?
        if options.contains(.refreshCached), let store, context.queryCacheTiers.contains(.disk) {
            cached = await lookup.read(store, plainKey)
        }
        // Every tier missed: before the origin, ask whether another host of the fleet found this URL broken.
        if cached == nil, !options.contains(.retryFailed), blocklist.shared != nil,
           let failure = await blocklist.sharedBlockingError(for: url.absoluteString) {
            throw Self.blocked(url, by: failure, elsewhere: true)
        }
        let validators = cached.map { [$0.metadata.etag ?? "", $0.metadata.lastModified ?? ""].joined(separator: "|") }
        let jobKey = plainKey + (validators.map { "|revalidate|" + $0 } ?? "")
        let validatorMetadata = cached?.metadata
        // A download's outcome is published before the coalescer lets the URL go: its
        // bytes held for other loads of the URL, or its failure on the blocklist, which
        // a new download asks first. A load that looked a moment before the end and
        // asks the coalescer a moment after finds one or the other, instead of
        // downloading again (16 sizes of a new URL at once made 2 downloads in 3 of 10 tries).
        let pending = lookup.pending
        // Bytes another job's download left here since this job looked (it
        // waited for the store meanwhile): a new download would fetch them again.
        // (Not bytes read from the store: a job downloads again when those failed.)
        if cached == nil, let held = pending.share(plainKey) {
            guard held.stored else {
                return Original(data: held.entry.data, cacheType: .none, finalURL: held.entry.metadata.originalURL,
                                heldDownload: true, holdID: held.id)
            }
            pending.release(plainKey, id: held.id)
        }
        let (blocklist, budget) = (blocklist, budget)
        let downloaded = try await downloads.value(for: jobKey, priority: Self.priority(options), progress: progress) { progress in
            if !options.contains(.retryFailed), let failure = blocklist.blockingError(for: url.absoluteString) {
                throw Self.blocked(url, by: failure, elsewhere: false)
            }
            // Charged once for every load that shares it: they were admitted as they came.
            let charge = budget.charge(origin: Self.originKey(url))
            let response = try await self.load(url: url, options: options, context: context, validators: validatorMetadata,
                                               admit: { try await self.admit(plan, again: true) }) { value in
                charge.grow(to: Self.charged(value))
                progress(value)
            }
            guard !response.isNotModified else { return Downloaded(response: response) }
            charge.resize(to: response.data.count)
            let id = pending.hold(response.data, key: plainKey,
                                  metadata: CacheMetadata(contentType: response.contentType, originalURL: response.url.absoluteString))
            return Downloaded(response: response, holdID: id, charge: charge, storeOnce: StoreOnce())
        } finished: { result, callers in
            switch result {
            case .success(let downloaded):
                // One hold per load that gets the bytes; none left if every load went.
                if let id = downloaded.holdID { pending.setHolders(plainKey, id: id, callers) }
            case .failure(let error):
                // (Logged by the loads' own record of it, which finds it recorded.)
                _ = blocklist.record(WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)"), for: url.absoluteString)
            }
        }
        let response = downloaded.response
        guard response.isNotModified else {
            return Original(data: response.data, cacheType: .none, response: response, finalURL: response.url.absoluteString,
                            holdID: downloaded.holdID, charge: downloaded.charge, storeOnce: downloaded.storeOnce)
        }
        guard let cached, let store else {
            throw WebImageError(.badStatus, "\(url.absoluteString) answered 304 to a request that was not conditional", statusCode: 304)
        }
        var metadata = cached.metadata
        metadata.etag = response.etag ?? metadata.etag
        metadata.lastModified = response.lastModified ?? metadata.lastModified
        do { try await store.updateMetadata(metadata, forKey: plainKey) } catch { services.logStoreError(error, key: plainKey) }
        services.logger.debug("revalidated, not modified", metadata: ["url": "\(url.absoluteString)"])
        return Original(data: cached.data, cacheType: .disk, response: nil, finalURL: cached.metadata.originalURL)
    }

    /// One request to the loader: the URL policy and the origin breaker asked
    /// first, the breaker told how it went, a status outside 2xx and 304 thrown.
    /// (``ImageManager/info(for:context:)`` uses it too, for a header-only read.)
    /// - Parameter admit: asked again once the download holds its origin's slot
    ///   (``ImageContext/originLimit``), right before the loader: loads admitted
    ///   while the budget had room and then queued for a slot would otherwise all
    ///   start after it filled.
    func load(url: URL, options: ImageOptions, context: ImageContext, validators: CacheMetadata?,
              admit: (@Sendable () async throws -> Void)? = nil,
              progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        let configuration = services.configuration
        guard let loader = context.loader ?? configuration.loaders.loader(for: url) else {
            if ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty ?? true {
                // Not the loaders' fault: such a URL (http:///x.jpg) has nowhere to go.
                throw WebImageError(.invalidURL, "\(url.absoluteString) names no host")
            }
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
        if let policy = context.urlPolicy ?? configuration.urlPolicy {
            // Judged already, before any tier: each URL of a load is asked about once.
            request.urlPolicy = { $0 == url ? nil : policy($0) }
        }
        request.refusesPrivateAddresses = context.refusesPrivateAddresses
        context.requestModifier?(&request)
        if request.url != url, let policy = request.urlPolicy, let reason = policy(request.url) {
            throw WebImageError(.forbidden, "\(request.url.absoluteString) \(reason)", isTransient: false)
        }
        // A URL that names a user: refused before anything is sent, as a redirect
        // to one is (below). The message leaves the credentials out.
        if Self.namesUser(request.url) {
            throw WebImageError(.forbidden, "\(WebImageError.hidingCredentials(request.url.absoluteString)) names a user (user@host); URLs with credentials are refused", isTransient: false)
        }
        let breaker = context.originBreaker ?? configuration.originBreaker
        let admission = try breaker?.admit(request.url)
        if let breaker, request.stillAdmitted == nil {
            let queued = request.url
            request.stillAdmitted = { breaker.refusal(for: queued) }
        }
        let started = ContinuousClock.now
        let response: LoadResponse
        do {
            response = try await send(request, with: loader, limit: context.originLimit, admit: admit, progress: progress)
        } catch {
            var failure = WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)")
            if let admission, let breaker { Self.report(&failure, admission, to: breaker) }
            throw failure
        }
        // One error for a status outside 2xx and 304: its outcome for the breaker,
        // then thrown (the Retry-After is parsed once).
        var failure = response.isNotModified || (200..<300).contains(response.statusCode) ? nil
            : WebImageError.httpStatus(response.statusCode, url: url.absoluteString, retryAfter: response.headers["retry-after"])
        if let admission, let breaker {
            if failure != nil { Self.report(&failure!, admission, to: breaker) } else { breaker.report(admission, outcome: .answered) }
        }
        services.metrics.loaded(bytes: response.data.count, duration: ContinuousClock.now - started)
        if let failure { throw failure }
        // A loader that followed a redirect to a URL with credentials (curl does,
        // when it follows them itself): what they opened is not kept under a URL
        // that names none.
        if Self.namesUser(response.url) {
            throw WebImageError(.forbidden, "\(url.absoluteString) redirected to a URL that names a user (user@host), which is refused", isTransient: false)
        }
        if response.isNotModified { return response }
        guard !response.data.isEmpty else {
            throw WebImageError(.unsupportedFormat, "\(url.absoluteString) answered with an empty body")
        }
        return response
    }

    /// Tells the breaker how a load failed. Its pause is at most its
    /// maxCooldown, whatever the origin asked, so the failure's `retryAfter`
    /// says no more: the first answer then names the pause the breaker's
    /// refusals after it name (an origin's 3600 would reach clients once, then 300).
    private static func report(_ failure: inout WebImageError, _ admission: OriginCircuitBreaker.Admission, to breaker: OriginCircuitBreaker) {
        breaker.report(admission, outcome: OriginCircuitBreaker.outcome(of: failure))
        if let pause = failure.retryAfter, pause > breaker.maxCooldown { failure.retryAfter = breaker.maxCooldown }
    }

    /// The loader's call, in its span, within the origin's share of the loader's slots.
    private func send(_ request: LoadRequest, with loader: any Loader, limit: OriginLimit?, admit: (@Sendable () async throws -> Void)?,
                      progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        try await services.spans.traced("webimage.download") { span in
            span.set("server.address", request.url.host ?? "")
            span.set("url.scheme", request.url.scheme ?? "")
            let response = if let limit {
                try await limit.run(Self.originKey(request.url)) {
                    try await admit?()
                    return try await loader.load(request, progress: progress)
                }
            } else {
                try await loader.load(request, progress: progress)
            }
            span.set("http.response.status_code", response.statusCode)
            span.set("webimage.bytes", response.data.count)
            return response
        }
    }

    /// A failure of the URL itself: counted, and put on the failed-URL blocklist
    /// when it is the kind the blocklist keeps.
    static func namesUser(_ url: URL) -> Bool {
        url.user(percentEncoded: true) != nil || url.password(percentEncoded: true) != nil
    }

    func recordFailure(_ error: any Error, url: URL) -> WebImageError {
        let error = WebImageError.wrap(error, as: .loadFailed, "loading \(url.absoluteString)")
        // A download cancelled with its job (callers gone, deadline passed) is no failure of the URL.
        if error.code != .cancelled { services.metrics.failed(error.code) }
        if blocklist.record(error, for: url.absoluteString) {
            services.logger.info("blocked a failing URL", metadata: ["url": "\(url.absoluteString)", "error": "\(error)"])
        }
        return error
    }

    /// What a download in progress is charged: what has arrived, and ahead of it
    /// what its response declares, up to as much again as has arrived plus
    /// 1 MiB. A body announced large is mostly charged before it has arrived
    /// (more admissions wait for it), but a response that declares 63 MiB and
    /// sends a trickle holds about 1 MiB it does not use, not 63: before, a few
    /// such origins filled the budget and every other load waited for their
    /// timeouts.
    static func charged(_ progress: LoadProgress) -> Int {
        let received = Int(clamping: progress.received)
        let ahead = received.multipliedReportingOverflow(by: 2).partialValue + (1 << 20)
        return max(received, min(Int(clamping: progress.expected ?? 0), max(ahead, received)))
    }

    /// The origin a download is charged to in the originals' budget: scheme, host and port.
    static func originKey(_ url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host?.lowercased() ?? "")\(url.port.map { ":\($0)" } ?? "")"
    }

    static func blocked(_ url: URL, by failure: WebImageError, elsewhere: Bool) -> WebImageError {
        WebImageError(.blockedURL, "\(url.absoluteString) failed recently\(elsewhere ? " on another host" : "") (\(failure)); pass .retryFailed to try again",
                      isTransient: false, statusCode: failure.statusCode, underlying: failure)
    }

    static func priority(_ options: ImageOptions) -> TaskPriority? {
        if options.contains(.highPriority) { return .high }
        if options.contains(.lowPriority) { return .low }
        return nil
    }
}
