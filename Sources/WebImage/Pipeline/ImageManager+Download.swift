import Foundation
import Logging
import Tracing

extension ImageManager {
    /// The bytes from the loader, one download per URL however many jobs want it.
    func download(_ plan: LoadPlan, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> (data: Data, cacheType: CacheType, response: LoadResponse?) {
        let (url, plainKey, options, context, store) = (plan.url, plan.plainKey, plan.options, plan.context, plan.store)
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

    /// One request to the loader: the URL policy and the origin breaker asked
    /// first, the breaker told how it went, a status outside 2xx and 304 thrown.
    /// (``info(for:options:context:)`` uses it too, for a header-only read.)
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
        request.refusesPrivateAddresses = context.refusesPrivateAddresses
        context.requestModifier?(&request)
        if let policy = request.urlPolicy, let reason = policy(request.url) {
            throw WebImageError(.forbidden, "\(request.url.absoluteString) \(reason)", isTransient: false)
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
            let loading = request
            response = try await traced("webimage.download") { span in
                span.set("server.address", loading.url.host ?? "")
                span.set("url.scheme", loading.url.scheme ?? "")
                let response = if let limit = context.originLimit {
                    try await limit.run(Self.originKey(loading.url)) { try await loader.load(loading, progress: progress) }
                } else {
                    try await loader.load(loading, progress: progress)
                }
                span.set("http.response.status_code", response.statusCode)
                span.set("webimage.bytes", response.data.count)
                return response
            }
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
}
