import Foundation
public import Hummingbird
import HTTPTypes
public import Logging
import NIOCore
public import Prometheus
import Synchronization
public import WebImage
import WebImageHTTP
import WebImageHummingbird
import WebImageSamples

/// The example app: the library's image service (``ImageEndpoint`` through
/// ``ImageServer``: `/thumbnail`, `/placeholder`, `/info`, `/health`, `/metrics`)
/// plus what is the example's own: a gallery page at `/` and the bundled samples at
/// `/samples/NAME`.
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
    public let server: ImageServer
    let samples: (directory: URL, names: [String])?
    /// The address the server is listening on, once it is (for the gallery's default sources).
    let origin = OriginBox()

    /// - Parameters:
    ///   - manager: the pipeline; its SSRF guard and limits come from its configuration.
    ///   - settings: the service's own settings.
    ///   - metrics: the registry `/metrics` renders (the one swift-metrics was
    ///     bootstrapped with); nil answers `/metrics` with 404.
    /// - Throws: when the samples cannot be written.
    public init(manager: ImageManager, settings: ThumbnailSettings, metrics: PrometheusCollectorRegistry?,
                logger: Logger = Logger(label: "thumbnail-server")) throws {
        self.manager = manager
        self.settings = settings
        var render: (@Sendable () -> [UInt8])?
        if let metrics { render = { metrics.emitToBuffer() } }
        server = ImageServer(endpoint: ImageEndpoint(manager: manager, settings: settings.endpoint, logger: logger),
                             host: settings.host, port: settings.port, metrics: render,
                             logger: logger, serverName: "swift-web-image ThumbnailServer")
        if settings.gallerySources == nil {
            let directory = settings.samplesDirectory
                ?? FileManager.default.temporaryDirectory.appendingPathComponent("thumbnail-server-samples-\(getpid())")
            samples = (directory, try SampleImages.write(to: directory))
        } else {
            samples = nil
        }
    }

    /// The library's routes plus the gallery and the samples.
    public func router() -> Router<ImageRequestContext> {
        let router = server.router()
        addRoutes(to: router)
        return router
    }

    func addRoutes(to router: Router<ImageRequestContext>) {
        router.get("/") { _, _ in self.galleryPage() }
        router.get("/samples/{name}") { _, context in try self.sample(named: context.parameters.require("name")) }
    }

    /// A Hummingbird application serving ``router()`` on `settings.host:settings.port`.
    /// Run it with `runService()` or inside a `ServiceGroup` of your own; `main`
    /// runs ``ImageServer/run(routes:onServerRunning:)`` instead, which also stops
    /// gracefully on SIGTERM.
    /// - Parameter onServerRunning: called with the bound port once the server listens.
    public func application(logger: Logger = Logger(label: "thumbnail-server"),
                            onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let origin = origin
        let host = settings.host
        return Application(
            router: router(),
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: server.serverName),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                origin.set(Self.url(host: host, port: port))
                await onServerRunning(port)
            },
            logger: logger
        )
    }

    /// Serves until SIGTERM or SIGINT, then stops gracefully (``ImageServer/run(routes:onServerRunning:)``).
    public func run(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws -> Bool {
        let origin = origin
        let host = settings.host
        return try await server.run(routes: addRoutes(to:)) { port in
            origin.set(Self.url(host: host, port: port))
            await onServerRunning(port)
        }
    }

    static func url(host: String, port: Int) -> URL {
        URL(string: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")!
    }

    private func sample(named name: String) throws -> Response {
        guard let samples, samples.names.contains(name),
              let data = FileManager.default.contents(atPath: samples.directory.appendingPathComponent(name).path)
        else { throw HTTPError(.notFound, message: "no sample named \(name)") }
        let type = ImageFormat.sniff(data)?.mimeType ?? "application/octet-stream"
        return Response(status: .ok, headers: [.contentType: type, .cacheControl: "public, max-age=3600"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The URLs the gallery shows: `gallery.sources`, else the bundled samples.
    var gallerySources: [URL] {
        if let sources = settings.gallerySources { return sources }
        guard let samples, let origin = origin.get() else { return [] }
        return samples.names.map { origin.appendingPathComponent("samples").appendingPathComponent($0) }
    }
}

/// The bound address, set once the server listens.
final class OriginBox: Sendable {
    private let value = Mutex<URL?>(nil)
    func set(_ url: URL) { value.withLock { $0 = url } }
    func get() -> URL? { value.withLock { $0 } }
}
