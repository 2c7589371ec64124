import Foundation
import HTTPTypes
import Logging
import WebImage

extension ImageEndpoint {
    /// `thumbnail?url=…`: bytes only. The manager answers with the finished
    /// thumbnail's bytes from memory, else from the disk store (no decode: they are
    /// encoded already), else it loads, decodes, transforms and encodes them and
    /// stores them in the background; concurrent requests for one thumbnail share
    /// one load.
    func thumbnail(query text: String, _ request: HTTPRequest) async throws -> ImageResponse {
        let started = ContinuousClock.now
        let (query, context) = try thumbnailLoad(query: text, request)
        // A memory hit holds nothing while it is answered, so it takes none of the
        // origin's places: a warm URL is answered whatever the origin's other
        // requests hold, as at the ceiling and on the fast path. (Nil with a tracer,
        // whose load is a span: that one goes through `loadImage`.)
        if let result = manager.memoryResult(with: query.url, options: .avoidDecode, context: context) {
            return try imageResponse(result, query: query, request: request, started: started)
        }
        do {
            // Past the origin's share this throws `overloaded`, which is shed (503)
            // before any work: not the origin's failure, so `fallsBack` gives no fallback.
            let result = try await originPlaces.run(query.url) {
                try await manager.loadImage(with: query.url, options: .avoidDecode, context: context)
            }
            return try imageResponse(result, query: query, request: request, started: started)
        } catch {
            let failure = WebImageError.wrap(error, as: .loadFailed, "loading \(query.url.absoluteString)")
            guard let fallback = settings.fallbackImage, Self.fallsBack(failure) else { throw failure }
            return try await fallbackResponse(fallback, failure: failure, query: query, accept: request.headerFields.value(.accept))
        }
    }

    /// A memory hit of `thumbnail?…`, answered without suspending (see
    /// ``respondFromMemory(to:)``); nil for anything else.
    func thumbnailFromMemory(query text: String, _ request: HTTPRequest) -> ImageResponse? {
        let started = ContinuousClock.now
        guard let (query, context) = try? thumbnailLoad(query: text, request),
              let result = manager.memoryResult(with: query.url, options: .avoidDecode, context: context)
        else { return nil }
        return try? imageResponse(result, query: query, request: request, started: started)
    }

    /// The query parsed (or found parsed) and checked against the cost limit, and
    /// the load's context: what a thumbnail request asks the manager for.
    private func thumbnailLoad(query text: String, _ request: HTTPRequest) throws -> (ThumbnailQuery, ImageContext) {
        let hints = settings.clientHints && !settings.onlyPresets ? Self.clientHints(request.headerFields) : nil
        let query = try parse {
            try parsedQueries.query(.init(query: text, hints: hints)) {
                try ThumbnailQuery(QueryParameters(text), settings: settings, hints: hints)
            }
        }
        let cost = query.estimatedCost
        guard cost <= Double(settings.maxCost) else {
            throw RequestError(WebImageError(.costLimitExceeded, "the thumbnail and its t= steps cost \(Int(cost.rounded(.up))) megapixel passes at w=\(query.box.width) h=\(query.box.height), more than the \(settings.maxCost) this service allows: ask for a smaller box or lighter steps"))
        }
        var context = context(for: query.url)
        apply(query, to: &context, accept: request.headerFields.value(.accept))
        return (query, context)
    }

    func apply(_ query: ThumbnailQuery, to context: inout ImageContext, accept: String?) {
        context.thumbnailPixelSize = query.box
        context.maxTransformCost = Double(settings.maxCost)
        context.workBudget = work
        context.workCost = query.renderCost
        context.encodeWorkWeight = query.encodeWeight
        if let focus = query.crop {
            context.preserveAspectRatio = false
            context.cropFocus = focus
        }
        context.transformer = query.transform
        if let maxBytes = query.maxBytes {
            // Part of the derived key (`e=…,max=N`): each size target is its own entry.
            var options = manager.configuration.encodeOptions
            options.maxBytes = maxBytes
            context.encodeOptions = options
        }
        if let format = query.format {
            context.encodeFormat = format
        } else {
            // One cache entry per answer (AVIF, WebP, or a legacy format), not per Accept header.
            context.acceptedFormats = AcceptedFormats(accept: accept, allowed: autoFormats.value)
        }
    }

    func imageResponse(_ result: ImageResult, query: ThumbnailQuery, request: HTTPRequest, started: ContinuousClock.Instant) throws -> ImageResponse {
        guard let bytes = result.data, let entityTag = result.entityTag else {
            throw WebImageError(.encodeFailed, "no thumbnail bytes were made")
        }
        let source = result.cacheType == .none ? "network" : result.cacheType.rawValue
        // Appended, not a dictionary literal: each name here is set once, and the
        // literal searched the fields for every one.
        var headers = HTTPFields()
        headers.reserveCapacity(10)
        headers.append(HTTPField(name: .contentType, value: result.contentType ?? "application/octet-stream"))
        headers.append(HTTPField(name: .cacheControl, value: cacheControl))
        headers.append(HTTPField(name: .eTag, value: entityTag))
        headers.append(HTTPField(name: .serverTiming, value: source + ";dur=" + Self.tenths(ContinuousClock.now - started)))
        headers.append(HTTPField(name: .imageSource, value: source))
        // Never later than the response's Date (RFC 9110 §8.8.2.1), and the same
        // on every answer of the entry (If-Modified-Since compares it). Hummingbird's
        // Date comes from a cache it refreshes once a second, up to a second behind,
        // so every entry says the whole second before the one it was made in:
        // a clamp to the time of the answer made the first answers of an entry
        // say a second earlier than the later ones.
        let modified = result.lastModified.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down) - 1) }
        if let modified { headers.append(HTTPField(name: .lastModified, value: HTTPDate.format(modified))) }
        if let image = result.image { headers.append(HTTPField(name: .imageSize, value: "\(image.pixelSize.width)x\(image.pixelSize.height)")) }
        addVary(query, to: &headers)
        responses.increment(source)
        switch ConditionalRequest.evaluate(request.headerFields, entityTag: entityTag, lastModified: modified) {
        case .proceed: break
        case .notModified: return ImageResponse(status: .notModified, headerFields: headers)
        case .preconditionFailed:
            // No body, and no freshness: a shared cache must not answer the URL with it.
            headers[.contentType] = nil
            headers[.cacheControl] = "no-store"
            headers[.contentLength] = "0"
            return ImageResponse(status: .preconditionFailed, headerFields: headers)
        }
        headers[.contentLength] = String(bytes.count)
        return ImageResponse(status: .ok, headerFields: headers, body: bytes)
    }

    /// Whether a failure is the origin's (so a fallback image may stand in): it is
    /// missing, failing, too slow, or sent bytes that are no image. Not the
    /// request's mistakes, a refused host, or a size limit.
    static func fallsBack(_ failure: WebImageError) -> Bool {
        switch failure.code {
        case .notFound, .badStatus, .loadFailed, .timedOut, .decodeFailed, .unsupportedFormat, .originUnavailable: true
        case .blockedURL: (failure.underlying as? WebImageError).map(fallsBack) ?? false
        default: false
        }
    }

    /// The fallback image, thumbnailed to the request's box and format (cached like
    /// any thumbnail), with the failure's status unless `thumbnail.fallbackStatus`
    /// says otherwise, a short `Cache-Control` and `X-Image-Fallback: 1`.
    /// The original is the bytes read at start-up, through a loader of its own: no
    /// request loader (nor its policy) is asked.
    func fallbackResponse(_ fallback: FallbackImage, failure: WebImageError, query: ThumbnailQuery, accept: String?) async throws -> ImageResponse {
        var context = ImageContext()
        context.deadline = .now + settings.deadline
        context.loader = fallback.loader
        context.urlPolicy = { _ in nil }
        apply(query, to: &context, accept: accept)
        let result: ImageResult
        do {
            result = try await manager.loadImage(with: fallback.url, options: .avoidDecode, context: context)
        } catch {
            logger.error("thumbnail.fallbackImage failed", metadata: ["file": "\(fallback.file.path)", "error": "\(error)"])
            throw failure
        }
        guard let bytes = result.data else { throw failure }
        logger.info("answered with the fallback image", metadata: ["url": "\(query.url.absoluteString)", "error": "\(failure)"])
        responses.increment("fallback")
        var headers: HTTPFields = [
            .contentType: result.contentType ?? "application/octet-stream",
            .contentLength: String(bytes.count),
            .cacheControl: "public, max-age=\(settings.fallbackMaxAge.components.seconds)",
            .imageFallback: "1",
            .imageSource: "fallback",
        ]
        addVary(query, to: &headers)
        if let seconds = failure.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        let status = settings.fallbackStatus.map { HTTPResponse.Status(code: $0) } ?? failure.responseStatus
        return ImageResponse(status: status, headerFields: headers, body: bytes)
    }

    /// `Cache-Control` of a thumbnail.
    var cacheControl: String { "public, max-age=\(settings.cacheMaxAge.components.seconds)" }

    /// `Vary`: `Accept` when the format was negotiated, and the client hints
    /// consulted; and `Accept-CH` where hints are read.
    func addVary(_ query: ThumbnailQuery, to headers: inout HTTPFields) {
        let varies = (query.format == nil ? ["Accept"] : []) + query.hintsConsulted
        if !varies.isEmpty { headers[.vary] = varies.joined(separator: ", ") }
        if settings.clientHints && !settings.onlyPresets { headers[Self.acceptCH] = ThumbnailQuery.ClientHints.names.joined(separator: ", ") }
    }

    static let acceptCH = HTTPField.Name("Accept-CH")!

    /// The request's client hints, as sent.
    static func clientHints(_ fields: HTTPFields) -> ThumbnailQuery.ClientHints {
        ThumbnailQuery.ClientHints(dpr: fields.value(secCHDPR), width: fields.value(secCHWidth), viewportWidth: fields.value(secCHViewportWidth))
    }

    // Made once: a name made per request is validated and lower-cased each time.
    static let secCHDPR = HTTPField.Name("Sec-CH-DPR")!
    static let secCHWidth = HTTPField.Name("Sec-CH-Width")!
    static let secCHViewportWidth = HTTPField.Name("Sec-CH-Viewport-Width")!

    /// Milliseconds with one decimal, without `String(format:)` (slow on Linux).
    static func tenths(_ duration: Duration) -> String {
        let tenths = Int((duration.milliseconds * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
