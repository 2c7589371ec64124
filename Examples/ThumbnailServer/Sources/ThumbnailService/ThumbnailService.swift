import Foundation
public import Hummingbird
import HTTPTypes
import Logging
import Metrics
import NIOCore
public import Prometheus
import Synchronization
public import WebImage
import WebImageKit
import WebImageVips
import WebImageSamples

/// A thumbnail service: `GET /thumbnail?url=…&w=…&h=…&format=…&crop=…&dpr=…&t=…`
/// through an ``ImageManager`` (`format=auto`, the default, answers AVIF, WebP,
/// JPEG, PNG or GIF from the request's `Accept` and the image, with
/// `Vary: Accept`), `GET /placeholder?url=…` (BlurHash and ThumbHash as JSON), a
/// gallery page at `/`, Prometheus metrics at `/metrics`, the bundled samples at
/// `/samples/NAME`, and `/health`. With `thumbnail.signingKey`, `/thumbnail` and
/// `/placeholder` answer only signed URLs (``URLSigner``).
///
/// ```swift
/// let config = try await ThumbnailSettings.reader(file: "thumbnail-server.json")
/// let service = try ThumbnailService(manager: try ConfigLayers.manager(config: config),
///                                    settings: try ThumbnailSettings(config: config),
///                                    metrics: registry)
/// try await service.application().runService()
/// ```
public struct ThumbnailService: Sendable {
    public let manager: ImageManager
    public let settings: ThumbnailSettings
    let metrics: PrometheusCollectorRegistry?
    let samples: (directory: URL, names: [String])?
    /// The address the server is listening on, once it is (for the gallery's default sources).
    let origin = OriginBox()
    /// `thumbnail_responses_total{source}`, made once (a metric made per request
    /// costs a registry look-up each time).
    let responses = ResponseCounters()
    /// What `format=auto` may answer in: the formats the manager's coders write.
    let autoFormats: Set<ImageFormat>
    /// `thumbnail.watermarks`' PNGs by name, read and decoded once at start (a
    /// query's transformer is built on every request, hits included).
    let watermarks: [String: ImageTransformers.Watermark.Overlay]
    /// `/thumbnail` and `/placeholder` requests being answered; past
    /// `thumbnail.maxInFlight` the next is shed with 503 at once.
    let inFlight: InFlightLimit

    /// - Parameters:
    ///   - manager: the pipeline; its SSRF guard and limits come from its configuration.
    ///   - settings: the service's own settings.
    ///   - metrics: the registry `/metrics` renders (the one swift-metrics was
    ///     bootstrapped with); nil answers `/metrics` with 404.
    /// - Throws: when the samples cannot be written.
    public init(manager: ImageManager, settings: ThumbnailSettings, metrics: PrometheusCollectorRegistry?) throws {
        self.manager = manager
        self.settings = settings
        self.metrics = metrics
        let coders = manager.configuration.coders
        autoFormats = Set(ThumbnailQuery.formats.filter { coders.encoder(for: $0) != nil })
        var watermarks: [String: ImageTransformers.Watermark.Overlay] = [:]
        if let directory = settings.watermarkDirectory {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".png") {
                let file = directory.appendingPathComponent(name)
                do {
                    watermarks[String(name.dropLast(4))] = try ImageTransformers.Watermark.Overlay(data: try Data(contentsOf: file))
                } catch {
                    throw WebImageError(.invalidArgument, "thumbnail.watermarks: \(file.path) is not a usable watermark (\(error))")
                }
            }
        }
        self.watermarks = watermarks
        inFlight = InFlightLimit(settings.maxInFlight)
        if settings.gallerySources == nil {
            let directory = settings.samplesDirectory
                ?? FileManager.default.temporaryDirectory.appendingPathComponent("thumbnail-server-samples-\(getpid())")
            samples = (directory, try SampleImages.write(to: directory))
        } else {
            samples = nil
        }
    }

    /// The routes, with request metrics (swift-metrics) and request logging.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: LogRequestsMiddleware(.debug))
        router.get("/thumbnail") { request, context in await self.thumbnail(request, logger: context.logger) }
        router.get("/placeholder") { request, context in await self.placeholder(request, logger: context.logger) }
        router.get("/") { _, _ in self.galleryPage() }
        router.get("/samples/{name}") { _, context in try self.sample(named: context.parameters.require("name")) }
        router.get("/metrics") { _, _ in self.metricsPage() }
        router.get("/health") { _, _ in "ok\n" }
        return router
    }

    /// A Hummingbird application serving ``router()`` on `settings.host:settings.port`.
    /// Run it with `runService()` (stops gracefully on SIGTERM and SIGINT) or inside
    /// a `ServiceGroup` of your own.
    /// - Parameter onServerRunning: called with the bound port once the server listens.
    public func application(logger: Logger = Logger(label: "thumbnail-server"),
                            onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let origin = origin
        let host = settings.host
        return Application(
            router: router(),
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "swift-web-image ThumbnailServer"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                origin.set(URL(string: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")!)
                await onServerRunning(port)
            },
            logger: logger
        )
    }

    // MARK: Handlers

    func thumbnail(_ request: Request, logger: Logger) async -> Response {
        let started = ContinuousClock.now
        guard inFlight.enter() else { return shed(logger: logger) }
        defer { inFlight.leave() }
        do {
            try checkSignature(request)
            let parameters = request.uri.queryParameters
            let query = try ThumbnailQuery({ parameters[Substring($0)].map(String.init) }, settings: settings, watermark: watermark(named:))
            guard settings.allowedHosts.allows(query.url) else {
                throw WebImageError(.forbidden, "\(query.url.host ?? "the host") is not on thumbnail.allowedHosts (\(settings.allowedHosts))")
            }
            var context = ImageContext()
            context.urlPolicy = hostPolicy
            context.deadline = started + settings.deadline
            context.thumbnailPixelSize = query.box
            if let focus = query.crop {
                context.preserveAspectRatio = false
                context.cropFocus = focus
            }
            context.transformer = query.transform
            if let format = query.format {
                context.encodeFormat = format
            } else {
                // One cache entry per answer (AVIF, WebP, or neither), not per Accept header.
                context.acceptedFormats = AcceptedFormats(accept: request.headers[.accept], allowed: autoFormats)
            }
            // Bytes only: the manager answers with the finished thumbnail's bytes from
            // memory, else from the disk store (no decode: they are encoded already),
            // else it loads, decodes, transforms and encodes them, and stores them in
            // the background. Concurrent requests for one thumbnail share one load.
            let result = try await manager.loadImage(with: query.url, options: .avoidDecode, context: context)
            guard let bytes = result.data else { throw WebImageError(.encodeFailed, "no thumbnail bytes were made") }
            let source = result.cacheType == .none ? "network" : result.cacheType.rawValue
            let etag = Self.etag(of: bytes)
            let elapsed = ContinuousClock.now - started
            var headers: HTTPFields = [
                .contentType: ImageFormat.sniff(bytes)?.mimeType ?? "application/octet-stream",
                .cacheControl: "public, max-age=\(settings.cacheMaxAge.components.seconds)",
                .eTag: etag,
                .serverTiming: "\(source);dur=\(Self.tenths(elapsed))",
                .imageSource: source,
            ]
            if let image = result.image { headers[.imageSize] = "\(image.pixelSize.width)x\(image.pixelSize.height)" }
            if query.format == nil { headers[.vary] = "Accept" }
            responses.increment(source)
            if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag || $0 == "*" }) {
                return Response(status: .notModified, headers: headers)
            }
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        } catch {
            let failure = WebImageError.wrap(error, as: .loadFailed, "serving a thumbnail")
            let status = failure.httpStatus
            logger.log(level: status.code >= 500 ? .warning : .info, "thumbnail failed",
                       metadata: ["status": "\(status.code)", "error": "\(failure)", "query": "\(request.uri.query ?? "")"])
            return Self.errorResponse(status, failure)
        }
    }

    /// `/placeholder?url=…`: `{"blurHash": …, "thumbHash": base64}` from a 100x100
    /// thumbnail the manager caches like any other.
    func placeholder(_ request: Request, logger: Logger) async -> Response {
        guard inFlight.enter() else { return shed(logger: logger) }
        defer { inFlight.leave() }
        do {
            try checkSignature(request)
            let parameters = request.uri.queryParameters
            let url = try ThumbnailQuery.sourceURL { parameters[Substring($0)].map(String.init) }
            guard settings.allowedHosts.allows(url) else {
                throw WebImageError(.forbidden, "\(url.host ?? "the host") is not on thumbnail.allowedHosts (\(settings.allowedHosts))")
            }
            var context = ImageContext()
            context.urlPolicy = hostPolicy
            context.deadline = .now + settings.deadline
            let placeholders = try await manager.placeholders(for: url, context: context)
            let body = try JSONSerialization.data(withJSONObject: ["blurHash": placeholders.blurHash, "thumbHash": placeholders.thumbHashBase64],
                                                  options: [.sortedKeys, .withoutEscapingSlashes])
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "public, max-age=\(settings.cacheMaxAge.components.seconds)"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
        } catch {
            let failure = WebImageError.wrap(error, as: .loadFailed, "making placeholders")
            logger.log(level: failure.httpStatus.code >= 500 ? .warning : .info, "placeholder failed",
                       metadata: ["status": "\(failure.httpStatus.code)", "error": "\(failure)"])
            return Self.errorResponse(failure.httpStatus, failure)
        }
    }

    /// The allow-list as the loader's policy: it judges every redirect hop too, so
    /// an allowed origin cannot send the service to a host that is not allowed.
    var hostPolicy: URLPolicy {
        let list = settings.allowedHosts
        return { url in list.allows(url) ? nil : "is not on thumbnail.allowedHosts (\(list))" }
    }

    /// The answer past `thumbnail.maxInFlight`: 503 with `Retry-After: 1`, before
    /// any work. Each waiting request can hold a downloaded original until a decode
    /// thread is free, so an unbounded number of them is unbounded memory.
    func shed(logger: Logger) -> Response {
        inFlight.shed.increment()
        // Debug, not warning: under a flood a line per shed request would flood the
        // logs too; thumbnail_shed_total counts them.
        logger.debug("request shed: thumbnail.maxInFlight reached", metadata: ["limit": "\(settings.maxInFlight)"])
        let error = WebImageError(.overloaded, "\(settings.maxInFlight) requests are being answered (thumbnail.maxInFlight); try again shortly",
                                  isTransient: true, retryAfter: .seconds(1))
        return Self.errorResponse(.serviceUnavailable, error)
    }

    /// With `thumbnail.signingKey` set, a request without the right `s` is refused
    /// (403) before its query is even parsed.
    func checkSignature(_ request: Request) throws {
        guard let signer = settings.signer else { return }
        guard signer.verify(path: request.uri.path, query: request.uri.query) else {
            throw WebImageError(.forbidden, "this service answers signed URLs only: the s parameter is missing or does not match the path and query (thumbnail.signingKey)")
        }
    }

    /// `t=watermark:NAME`: a PNG from `thumbnail.watermarks`, by name only (never a path).
    func watermark(named name: String) throws -> ImageTransformers.Watermark.Overlay {
        guard settings.watermarkDirectory != nil else {
            throw WebImageError(.invalidArgument, "watermark '\(name)': watermarks are not enabled here (thumbnail.watermarks)")
        }
        guard let data = watermarks[name] else {
            throw WebImageError(.invalidArgument, "watermark '\(name)': no such watermark; known: \(watermarks.keys.sorted().joined(separator: ", "))")
        }
        return data
    }

    /// A strong ETag: the bytes' ``XXH64`` (the hash the cache stores verify
    /// entries with) and their length. Not cryptographic: it only has to change
    /// when the bytes do.
    static func etag(of data: Data) -> String {
        "\"" + String(XXH64.hash(data), radix: 16) + "-" + String(data.count, radix: 16) + "\""
    }

    /// Milliseconds with one decimal, without `String(format:)` (slow on Linux).
    static func tenths(_ duration: Duration) -> String {
        let tenths = Int((duration.milliseconds * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    private func sample(named name: String) throws -> Response {
        guard let samples, samples.names.contains(name),
              let data = FileManager.default.contents(atPath: samples.directory.appendingPathComponent(name).path)
        else { throw HTTPError(.notFound, message: "no sample named \(name)") }
        let type = ImageFormat.sniff(data)?.mimeType ?? "application/octet-stream"
        return Response(status: .ok, headers: [.contentType: type, .cacheControl: "public, max-age=3600"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    private func metricsPage() -> Response {
        guard let metrics else { return Response(status: .notFound) }
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
    }

    /// The URLs the gallery shows: `gallery.sources`, else the bundled samples.
    var gallerySources: [URL] {
        if let sources = settings.gallerySources { return sources }
        guard let samples, let origin = origin.get() else { return [] }
        return samples.names.map { origin.appendingPathComponent("samples").appendingPathComponent($0) }
    }

    static func errorResponse(_ status: HTTPResponse.Status, _ error: WebImageError) -> Response {
        let body: [String: String] = ["error": error.code.rawValue, "message": error.message]
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var headers: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store"]
        if let seconds = error.retryAfterSeconds { headers[.retryAfter] = "\(seconds)" }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// `thumbnail_responses_total` by source.
struct ResponseCounters: Sendable {
    private let counters: [String: Metrics.Counter] = Dictionary(uniqueKeysWithValues: ["network", "disk", "shared", "memory"].map {
        ($0, Counter(label: "thumbnail_responses_total", dimensions: [("source", $0)]))
    })
    func increment(_ source: String) {
        (counters[source] ?? Counter(label: "thumbnail_responses_total", dimensions: [("source", source)])).increment()
    }
}

/// The requests in flight (WebImage's `InFlightCounter` with the ceiling), and
/// their metrics.
final class InFlightLimit: Sendable {
    private let counter: InFlightCounter
    /// `thumbnail_shed_total`: requests answered 503 at the ceiling.
    let shed = Counter(label: "thumbnail_shed_total")
    /// `thumbnail_in_flight`: requests being answered, against the ceiling.
    private let gauge = Gauge(label: "thumbnail_in_flight")

    init(_ limit: Int) { counter = InFlightCounter(limit: limit) }

    var limit: Int { counter.limit }

    /// Counts a request in, unless `limit` are in already.
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

extension WebImageError.Code {
    /// The service is answering as many requests as it may (`thumbnail.maxInFlight`).
    static let overloaded = WebImageError.Code("overloaded")
}

/// The bound address, set once the server listens.
final class OriginBox: Sendable {
    private let value = Mutex<URL?>(nil)
    func set(_ url: URL) { value.withLock { $0 = url } }
    func get() -> URL? { value.withLock { $0 } }
}

extension HTTPField.Name {
    static let serverTiming = HTTPField.Name("Server-Timing")!
    /// Where the thumbnail came from: `network`, `disk` or `memory`.
    static let imageSource = HTTPField.Name("X-Image-Source")!
    /// The thumbnail's size in pixels, `WxH`.
    static let imageSize = HTTPField.Name("X-Image-Size")!
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}
