import Foundation
public import HTTPTypes
public import Logging
import Metrics
import Synchronization
import Tracing
@_spi(WebImageInternal) public import WebImage

/// An image service as a value: a request in (method, path with query, header
/// fields), a response out (status, header fields, body bytes), over an
/// `ImageManager`, with no server framework.
///
/// It answers three paths, matched by their last component so that it can be
/// mounted under any prefix (`/img/thumbnail`):
/// - `thumbnail?url=…&w=…&h=…` (``ThumbnailQuery``): the thumbnail's bytes, in
///   the format `Accept` allows (`Vary: Accept`) unless the query names one, with
///   a strong `ETag` from the stored entry, `Last-Modified`, `Cache-Control`,
///   `Server-Timing` and `X-Image-Source`; `304` for `If-None-Match` or
///   `If-Modified-Since`; `412` for an `If-Match` or `If-Unmodified-Since` that
///   fails (``ConditionalRequest/evaluate(_:entityTag:lastModified:)``);
/// - `placeholder?url=…`: `{"blurHash": …, "thumbHash": base64}`;
/// - `info?url=…`: the image's header as JSON (`webimage info --json`'s fields),
///   no pixels decoded; `&placeholder=1` adds the placeholders.
///
/// `GET` and `HEAD` only. Every failure is a status with a JSON body whose message
/// is safe for the client (`WebImageError.clientMessage`); the operator's
/// message goes to ``logger``. The policy parts work alone too: ``HostAllowList``,
/// ``URLSigner``, ``ConditionalRequest``, `WebImageError.responseStatus`,
/// ``ImageResponse/error(_:message:)``, and the manager's `InFlightCounter`.
///
/// ```swift
/// var settings = ImageEndpoint.Settings()
/// settings.allowedHosts = HostAllowList(["images.example.com"])!
/// let endpoint = ImageEndpoint(manager: manager, settings: settings)
/// let response = await endpoint.respond(to: HTTPRequest(method: .get, scheme: nil, authority: nil,
///                                                        path: "/thumbnail?url=…&w=256&h=256"))
/// ```
public struct ImageEndpoint: Sendable {
    public let manager: ImageManager
    public let settings: Settings
    public var logger: Logger
    /// What `format=auto` may answer in: `thumbnail.formats` that the manager's
    /// coders write, worked out by the first request that needs it, not here:
    /// asking libvips which formats it writes starts it, and a JPEG-only service
    /// (every request naming `format=jpeg`) never needs libvips' modules (about
    /// 20 MiB resident in `serve`).
    let autoFormats: AutoFormats
    let ceiling: RequestCeiling
    /// The heavy work rendered at once across requests (`thumbnail.maxCostInFlight`).
    public let work: WorkBudget
    /// Downloads per origin across requests (`thumbnail.maxDownloadsPerOrigin`).
    public let originLimit: OriginLimit?
    /// Requests in flight per origin (`thumbnail.maxInFlightPerOrigin`).
    let originPlaces: OriginPlaces
    /// The endpoint's breaker, when the manager has none of its own.
    public let originBreaker: OriginCircuitBreaker?
    let responses = ResponseCounters()
    /// Parsed thumbnail queries, so that a warm request skips parsing.
    let parsedQueries = ThumbnailQueryCache()
    /// The store's size for ``recordGauges()``, read at most once a minute.
    let storeSample = StoreSample()
    let pluginTotals = PluginTotals()

    public init(manager: ImageManager, settings: Settings, logger: Logger = Logger(label: "webimage.http")) {
        self.manager = manager
        self.settings = settings
        self.logger = logger
        let coders = manager.configuration.coders
        autoFormats = AutoFormats(settings.formats, coders: coders)
        ceiling = RequestCeiling(settings.maxInFlight)
        originPlaces = OriginPlaces(limit: settings.effectiveMaxInFlightPerOrigin)
        work = WorkBudget(limit: Double(settings.maxCostInFlight), maxHeavy: settings.maxHeavyInFlight)
        originLimit = settings.maxDownloadsPerOrigin > 0 ? OriginLimit(limit: settings.maxDownloadsPerOrigin) : nil
        originBreaker = manager.configuration.originBreaker == nil && settings.circuitBreakerFailures > 0
            ? OriginCircuitBreaker(failureThreshold: settings.circuitBreakerFailures, cooldown: settings.circuitBreakerCooldown) : nil
        // `webimage serve` refuses to start on this (`FallbackImage.check(with:)`); here it is said once.
        do { try settings.fallbackImage?.check(with: coders) } catch {
            logger.error("thumbnail.fallbackImage will not be answered", metadata: ["error": "\(error)"])
        }
    }

    /// Requests being answered now.
    public var requestsInFlight: Int { ceiling.count }

    /// Answers one request.
    public func respond(to request: HTTPRequest) async -> ImageResponse {
        let (path, query) = Self.split(request.path ?? "/")
        // A server span that continues the caller's trace (W3C `traceparent` with
        // swift-otel's propagator); the manager's spans nest inside it.
        guard let tracer = manager.activeTracer else { return await route(request, path: path, query: query) }
        var context = ServiceContext.current ?? .topLevel
        tracer.extract(request.headerFields, into: &context, using: HTTPFieldsExtractor())
        func serve<Traced: Tracer>(_ tracer: Traced) async -> ImageResponse {
            await tracer.withSpan("\(request.method.rawValue) \(path)", context: context, ofKind: .server) { span in
                span.set("http.request.method", request.method.rawValue)
                span.set("url.path", path)
                let response = await route(request, path: path, query: query)
                span.set("http.response.status_code", response.status.code)
                if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
                return response
            }
        }
        return await serve(tracer)
    }

    /// The answer to a request for a thumbnail the memory tier holds, made on the
    /// calling thread without suspending; nil for any other request, which
    /// ``respond(to:)`` answers.
    ///
    /// It is the answer ``respond(to:)`` would give (a `200`, or a `304` or `412` for a
    /// conditional request; `HEAD` without the body), with the same headers and
    /// metrics, for a `GET` or `HEAD` of `thumbnail` whose query parses, whose
    /// signature holds, and whose URL the allow-list and the manager admit. It
    /// takes no place under `thumbnail.maxInFlight`: a memory hit holds nothing
    /// while it is answered (``respond(to:)`` too answers one at the ceiling,
    /// where any other request gets 503). Nil as well with a tracer, whose
    /// request is a span.
    ///
    /// A server calls it where the request arrives (`MemoryHitChannelHandler`
    /// does, on a NIO event loop) and hands a nil to ``respond(to:)``.
    public func respondFromMemory(to request: HTTPRequest) -> ImageResponse? {
        guard request.method == .get || request.method == .head, manager.activeTracer == nil else { return nil }
        let (path, query) = Self.split(request.path ?? "/")
        guard Self.lastSegment(path) == "thumbnail",
              settings.signer?.verify(path: path, query: query) ?? true,
              var response = thumbnailFromMemory(query: query ?? "", request)
        else { return nil }
        if request.method == .head { response.body = Data() }
        return response
    }

    /// A request target's path and query, split at the first `?` (found by its
    /// byte: a Character search walked the whole target's graphemes).
    static func split(_ target: String) -> (path: String, query: String?) {
        let question = target.utf8.firstIndex(of: UInt8(ascii: "?"))
        let path = String(target[..<(question ?? target.endIndex)])
        return (path, question.map { String(target[target.utf8.index(after: $0)...]) })
    }

    private func route(_ request: HTTPRequest, path: String, query: String?) async -> ImageResponse {
        guard request.method == .get || request.method == .head else {
            var response = ImageResponse.error(WebImageError(.invalidArgument, "only GET and HEAD"), message: "only GET and HEAD are answered here")
            response.status = .methodNotAllowed
            response.headerFields[.allow] = "GET, HEAD"
            return response
        }
        var response: ImageResponse
        switch Self.lastSegment(path) {
        case "thumbnail":
            // At the ceiling a memory hit is still answered, as the fast path answers it:
            // it holds nothing, so a warm URL's answer does not depend on the door it came in by.
            response = await guarded(path, query, atCeiling: { respondFromMemory(to: request) }) {
                try await thumbnail(query: query ?? "", request)
            }
        case "placeholder":
            response = Self.conditional(await guarded(path, query) { try await placeholder(QueryParameters(query ?? "")) }, request)
        case "info":
            response = Self.conditional(await guarded(path, query) { try await info(QueryParameters(query ?? "")) }, request)
        default:
            response = .error(WebImageError(.notFound, "no such path"), message: "no such path: this service answers thumbnail, placeholder and info")
        }
        if request.method == .head { response.body = Data() }
        return response
    }

    /// The path's last non-empty segment (`thumbnail` of `/img/thumbnail/`), found by bytes.
    static func lastSegment(_ path: String) -> Substring? {
        var end = path.utf8.endIndex
        while end > path.utf8.startIndex, path.utf8[path.utf8.index(before: end)] == UInt8(ascii: "/") { end = path.utf8.index(before: end) }
        guard end > path.utf8.startIndex else { return nil }
        var start = end
        while start > path.utf8.startIndex, path.utf8[path.utf8.index(before: start)] != UInt8(ascii: "/") { start = path.utf8.index(before: start) }
        return path[start..<end]
    }

    /// The ceiling, the signature, and the answer to a failure, around a handler.
    /// At the ceiling, `atCeiling`'s answer when it has one (a memory hit), else 503.
    private func guarded(_ path: String, _ query: String?, atCeiling: () -> ImageResponse? = { nil },
                         _ handler: () async throws -> ImageResponse) async -> ImageResponse {
        guard ceiling.enter() else { return atCeiling() ?? shed() }
        defer { ceiling.leave() }
        do {
            if let signer = settings.signer, !signer.verify(path: path, query: query) {
                throw RequestError(WebImageError(.forbidden, "this service answers signed URLs only: the s parameter is missing or does not match the path and query"))
            }
            return try await handler()
        } catch let error as RequestError {
            // The client's own mistake, in terms of its own query: its message is safe to show.
            logger.info("request refused", metadata: ["status": "\(error.error.responseStatus.code)", "error": "\(error.error)", "path": "\(Self.logged(path))"])
            return .error(error.error, message: error.error.message)
        } catch {
            let failure = WebImageError.wrap(error, as: .loadFailed, "answering \(path)")
            let status = failure.responseStatus
            if failure.code == .overloaded {
                // Shed like the ceiling's (an origin's share of the places is taken): counted, and debug.
                ceiling.shed.increment()
                logger.debug("request shed", metadata: ["error": "\(failure)", "path": "\(Self.logged(path))"])
                return .error(failure)
            }
            logger.log(level: status.code >= 500 ? .warning : .info, "request failed",
                       metadata: ["status": "\(status.code)", "error": "\(failure)", "path": "\(Self.logged(path))",
                                  "query": "\(Self.logged(query ?? ""))"])
            return .error(failure)
        }
    }

    /// The answer past `thumbnail.maxInFlight`: 503 with `Retry-After: 1`, before
    /// any work.
    func shed() -> ImageResponse {
        ceiling.shed.increment()
        // Debug, not warning: under a flood a line per shed request would flood the
        // logs too; thumbnail_shed_total counts them.
        logger.debug("request shed: thumbnail.maxInFlight reached", metadata: ["limit": "\(settings.maxInFlight)"])
        return .error(WebImageError(.overloaded, "\(settings.maxInFlight) requests are being answered (thumbnail.maxInFlight)",
                                    isTransient: true, retryAfter: .seconds(1)))
    }

    /// The allow-list, as the load's URL policy: the manager judges the URL asked
    /// for by it before any tier, and the loader every redirect hop, so an allowed
    /// origin cannot send the service to a host that is not allowed. The endpoint
    /// only maps the refusal (``WebImageError/Code/forbidden``) to 403.
    func context(for url: URL) -> ImageContext {
        let list = settings.allowedHosts
        var context = ImageContext()
        context.urlPolicy = { url in
            guard !list.allows(url) else { return nil }
            return "is not a \(url.scheme?.lowercased() == "s3" ? "bucket" : "host") this service fetches from (thumbnail.allowedHosts)"
        }
        context.deadline = .now + settings.deadline
        // The safe defaults of a service whose URLs come from strangers, whatever the manager's own.
        context.refusesPrivateAddresses = settings.blockPrivateAddresses
        context.originLimit = originLimit
        context.originBreaker = originBreaker
        return context
    }

    /// A value from the request as a log may hold it: one line, control characters
    /// escaped, so that a request cannot forge a log record.
    static func logged(_ text: String) -> String { WebImageError.escapingControlCharacters(text) }

    /// Parses the request's parameters; their mistakes are the client's.
    func parse<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as WebImageError { throw RequestError(error) }
    }

    /// A JSON answer (`info`, `placeholder`), with a strong `ETag` of its bytes as
    /// a thumbnail has, so that a client or a cache in front can revalidate it.
    static func json(_ object: [String: Any?], maxAge: Duration) -> ImageResponse {
        let cleaned = object.mapValues { $0 ?? NSNull() }
        let data = (try? JSONSerialization.data(withJSONObject: cleaned, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return ImageResponse(status: .ok, headerFields: [
            .contentType: "application/json", .contentLength: String(data.count),
            .cacheControl: "public, max-age=\(maxAge.components.seconds)",
            .eTag: ImageResult.entityTag(hash: XXH3.hash(data), count: data.count),
        ], body: data)
    }

    /// A 200 with an `ETag` answered as the request's conditions ask: 304 without
    /// a body when `If-None-Match` names it, 412 when `If-Match` does not (as a
    /// thumbnail's, ``ConditionalRequest``); anything else as it is.
    static func conditional(_ response: ImageResponse, _ request: HTTPRequest) -> ImageResponse {
        guard response.status == .ok, let tag = response.headerFields[.eTag] else { return response }
        switch ConditionalRequest.evaluate(request.headerFields, entityTag: tag, lastModified: nil) {
        case .proceed: return response
        case .notModified:
            var headers = response.headerFields
            headers[.contentLength] = nil
            return ImageResponse(status: .notModified, headerFields: headers)
        case .preconditionFailed:
            return ImageResponse(status: .preconditionFailed, headerFields: [.eTag: tag, .cacheControl: "no-store", .contentLength: "0"])
        }
    }
}

/// A failure caused by the request itself (its query, its signature, its host),
/// whose message names only what the client sent.
struct RequestError: Error {
    let error: WebImageError
    init(_ error: WebImageError) { self.error = error }
}

/// `thumbnail_responses_total` by source.
struct ResponseCounters: Sendable {
    private let counters: [String: Metrics.Counter] = Dictionary(uniqueKeysWithValues: ["network", "disk", "shared", "memory", "fallback"].map {
        ($0, Counter(label: "thumbnail_responses_total", dimensions: [("source", $0)]))
    })
    func increment(_ source: String) {
        (counters[source] ?? Counter(label: "thumbnail_responses_total", dimensions: [("source", source)])).increment()
    }
}

/// The requests in flight (`InFlightCounter` with the ceiling), and their metrics.
final class RequestCeiling: Sendable {
    private let counter: InFlightCounter
    /// `thumbnail_shed_total`: requests answered 503 at the ceiling, or past
    /// their origin's share of it (`thumbnail.maxInFlightPerOrigin`).
    let shed = Counter(label: "thumbnail_shed_total")
    /// `thumbnail_in_flight`: requests being answered.
    private let gauge = Gauge(label: "thumbnail_in_flight")

    init(_ limit: Int) { counter = InFlightCounter(limit: limit) }

    var count: Int { counter.count }

    func enter() -> Bool {
        guard counter.enter() else { return false }
        gauge.record(counter.count)
        return true
    }

    func leave() {
        counter.leave()
        gauge.record(counter.count)
    }
}

/// The requests in flight per origin (scheme, host and port of `url=`), past a
/// memory hit: one origin holds at most `limit` of the places under
/// `thumbnail.maxInFlight`, whatever its requests wait for (a download slot, a
/// download another request started, the same thumbnail another is making), so
/// an origin that never answers cannot take them all until the deadline.
final class OriginPlaces: Sendable {
    let limit: Int
    private let counts = Lock([String: Int]())

    init(limit: Int) { self.limit = limit }

    /// "scheme://host[:port]", as the manager's per-origin download limit keys it.
    static func key(_ url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host?.lowercased() ?? "")\(url.port.map { ":\($0)" } ?? "")"
    }

    /// Requests of `origin` in flight now.
    func count(_ origin: String) -> Int { counts.withLock { $0[origin] ?? 0 } }

    /// `body` holding one of `url`'s origin's places.
    /// - Throws: `overloaded` (503, `Retry-After: 1`) when the origin holds `limit` already.
    func run<T>(_ url: URL, _ body: () async throws -> T) async throws -> T {
        let origin = Self.key(url)
        let entered = counts.withLock { counts -> Bool in
            let count = counts[origin] ?? 0
            guard count < limit else { return false }
            counts[origin] = count + 1
            return true
        }
        guard entered else {
            throw WebImageError(.overloaded, "\(limit) requests for images of \(origin) are being answered (thumbnail.maxInFlightPerOrigin)",
                                isTransient: true, retryAfter: .seconds(1))
        }
        defer {
            counts.withLock { counts in
                let left = (counts[origin] ?? 1) - 1
                counts[origin] = left > 0 ? left : nil
            }
        }
        return try await body()
    }
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}

/// Reads trace headers (`traceparent`, `tracestate`, …) from a request's fields.
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from fields: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { fields[$0] }
    }
}
