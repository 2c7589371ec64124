import Foundation
public import Hummingbird
import HummingbirdCore
import HTTPTypes
public import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals
import WebImage
public import WebImageHTTP

/// A standalone image server: an `ImageEndpoint` at `/thumbnail`,
/// `/placeholder` and `/info`, `/health`, and `/metrics` when given a renderer,
/// on Hummingbird 2, with a graceful stop. `webimage serve` is this.
///
/// On SIGTERM or SIGINT the manager's grace period starts at once, beside the
/// server's own drain: the drain waits on the manager's loads, and when the grace
/// period (`thumbnail.shutdownGrace`) ends the loads still running are ended
/// (answered 503), so that a silent origin cannot hold the exit. A connection
/// still open a second after that is closed (``QuiesceDeadlineHandler``), so that
/// a client that does not read its answers cannot hold it either. Then the cache
/// writes finish and ``run(routes:onServerRunning:)`` returns.
public struct ImageServer: Sendable {
    public var endpoint: ImageEndpoint
    public var host: String
    public var port: Int
    /// The text `/metrics` answers (Prometheus' exposition format); nil answers 404.
    public var metrics: (@Sendable () -> [UInt8])?
    public var logger: Logger
    /// The `Server` header and the log's name for the server.
    public var serverName: String
    /// Whether thumbnails the memory tier holds are answered on the connection's
    /// event loop, before the router (``MemoryHitFastPath``). On by default: the
    /// same answer without a hop to a task and back (docs/performance.md gives the rates).
    public var answersMemoryHitsOnEventLoop = true
    /// The most connections open at once (`http.maxConnections`); past it the
    /// server stops accepting until one closes (new clients wait in the kernel's
    /// listen queue). Nil: no bound. Each connection can hold a few MiB (the
    /// requests read and the answers written that its client has not read), so
    /// this with ``idleTimeout`` bounds what clients can make the server hold.
    public var maxConnections: Int? = 1024
    /// The most connections one client address may have open at once
    /// (`http.maxConnectionsPerClient`); one more is closed at once
    /// (``ClientConnectionLimitHandler``). Nil, the default: no bound, as
    /// behind a proxy, where every client has the proxy's address. Without
    /// it one client can take every place under ``maxConnections``.
    public var maxConnectionsPerClient: Int?
    /// How long a connection may wait for its next request, or for its client to
    /// read an answer, before it is closed (`http.idleTimeout`;
    /// ``ConnectionTimeoutHandler``). Nil: forever.
    public var idleTimeout: Duration? = .seconds(60)

    public init(endpoint: ImageEndpoint, host: String = "127.0.0.1", port: Int = 8080,
                metrics: (@Sendable () -> [UInt8])? = nil, logger: Logger = Logger(label: "webimage.serve"),
                serverName: String = "swift-web-image") {
        self.endpoint = endpoint
        self.host = host
        self.port = port
        self.metrics = metrics
        self.logger = logger
        self.serverName = serverName
    }

    /// The routes: request metrics (swift-metrics) and debug request logs, the
    /// endpoint at the root, `/health`, `/metrics` (each for `GET` and `HEAD`).
    /// Every error is the endpoint's JSON: a path no route has is 404, another
    /// method on these paths 405 with `Allow`, a method HTTP does not define 501;
    /// `OPTIONS *` is 200 with `Allow`.
    public func router() -> Router<ImageRequestContext> {
        let router = Router(context: ImageRequestContext.self)
        // Not Hummingbird's MetricsMiddleware: see RequestMetricsMiddleware.
        router.add(middleware: RequestMetricsMiddleware())
        router.add(middleware: LogRequestsMiddleware(.debug))
        router.add(middleware: UnknownMethodMiddleware())
        router.add(middleware: NoRouteMiddleware())
        router.addImageRoutes(endpoint)
        let healthy = "ok\n"
        router.get("/health") { _, _ in healthy }
        // HEAD as GET without the body (a load balancer's check may use it).
        router.head("/health") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8", .contentLength: String(healthy.utf8.count)])
        }
        let metrics = metrics, endpoint = endpoint
        let metricsType = "text/plain; version=0.0.4; charset=utf-8"
        /// The exposition: the gauges set to their values now, rendered with the
        /// rest; the process's own metrics (memory, CPU, descriptors) after them.
        @Sendable func exposition(_ metrics: @Sendable () -> [UInt8]) async -> ByteBuffer {
            await endpoint.recordGauges()
            var buffer = ByteBuffer(bytes: metrics())
            buffer.writeString(ProcessMetrics.exposition())
            return buffer
        }
        router.get("/metrics") { _, _ -> Response in
            guard let metrics else { return NoRouteMiddleware<ImageRequestContext>.notFound(head: false) }
            return Response(status: .ok, headers: [.contentType: metricsType], body: ResponseBody(byteBuffer: await exposition(metrics)))
        }
        // HEAD's Content-Length is the length a GET gets now (RFC 9110 §9.3.2), so it renders the text too.
        router.head("/metrics") { _, _ -> Response in
            guard let metrics else { return NoRouteMiddleware<ImageRequestContext>.notFound(head: true) }
            let length = await exposition(metrics).readableBytes
            return Response(status: .ok, headers: [.contentType: metricsType, .contentLength: String(length)])
        }
        // Any other method on these two paths: 405 with Allow and the JSON error, as the endpoint's paths answer.
        let notAllowed = {
            var response = ImageResponse.error(WebImageError(.invalidArgument, "only GET and HEAD"), message: "only GET and HEAD are answered here")
            response.status = .methodNotAllowed
            response.headerFields[.allow] = "GET, HEAD"
            return response
        }()
        for path in ["/health", "/metrics"] {
            for method: HTTPRequest.Method in [.post, .put, .delete, .patch, .options, .trace, .connect] {
                router.on(RouterPath(stringLiteral: path), method: method) { _, _ in Response(notAllowed) }
            }
        }
        return router
    }

    /// Serves until SIGTERM or SIGINT, then stops gracefully.
    /// - Parameters:
    ///   - routes: adds routes of the caller's own to ``router()`` (a gallery page).
    ///   - onServerRunning: called with the bound port once the server listens.
    /// - Returns: whether everything in flight finished within the grace period.
    /// - Throws: `WebImageError` (`invalidArgument`) naming the address when the
    ///   server cannot listen (a port in use, a host that does not resolve); after
    ///   it listened, what the server group throws.
    @discardableResult
    public func run(routes: (Router<ImageRequestContext>) -> Void = { _ in },
                    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws -> Bool {
        let router = router()
        routes(router)
        let listening = ListeningFlag()
        let fastPath = answersMemoryHitsOnEventLoop ? MemoryHitFastPath(endpoint: endpoint, serverName: serverName) : nil
        // A connection still open a second past the grace period is closed: a client
        // that never reads its answers would otherwise hold the exit (QuiesceDeadlineHandler).
        let deadline = TimeAmount(endpoint.settings.shutdownGrace + .seconds(1))
        let idleLimit = idleTimeout.map(TimeAmount.init)
        let perClient = maxConnectionsPerClient.map { ClientConnectionCounts(limit: $0) }
        // In this order after the codec: the timeouts see every request and answer,
        // the fast path's and the router's alike.
        let app = Application(
            router: router,
            server: .http1(configuration: .init(additionalChannelHandlers:
                (perClient.map { [ClientConnectionLimitHandler(counts: $0)] } ?? [])
                + [HTTP1KeepAliveHandler(serverName: serverName), QuiesceDeadlineHandler(after: deadline), ClientDisconnectHandler()] + (idleLimit.map { [ConnectionTimeoutHandler(limit: $0)] } ?? [])
                    + (fastPath.map { [$0.channelHandler()] } ?? []))),
            configuration: .init(address: .hostname(host, port: port), serverName: serverName,
                                 availableConnectionsDelegate: maxConnections.map { MaximumAvailableConnections($0, logger: logger) }),
            onServerRunning: { channel in
                listening.set()
                await onServerRunning(channel.localAddress?.port ?? 0)
            },
            logger: logger
        )
        // The manager first: a group shuts its services down in reverse order, so the
        // server stops taking requests and answers those in flight, then the manager
        // lets the cache writes finish. The signal starts the manager's grace period
        // at once (ImageManagerService), so a silent origin cannot hold the drain.
        let manager = ImageManagerService(endpoint.manager, gracePeriod: endpoint.settings.shutdownGrace)
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: manager), .init(service: app)],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch where !listening.isSet {
            // It never listened: the address is what was wrong, said plainly.
            throw WebImageError(.invalidArgument, "could not listen on \(host):\(port): \(Self.describe(listenError: error))", isTransient: false)
        }
        let clean = manager.finishedWithinGrace ?? true
        logger.info("stopped", metadata: ["finishedWithinGrace": "\(clean)"])
        return clean
    }
}

extension ImageServer {
    /// A failure to listen in a few words: the system's text for an errno
    /// (`Address already in use`), the host for a name that does not resolve.
    static func describe(listenError error: any Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        if let unknown = error as? SocketAddressError.UnknownHost { return "no address for the host \(unknown.host): \(unknown.errorDescription)" }
        if case .failedToParseIPString(let text)? = error as? SocketAddressError { return "\(text) is not an IP address" }
        return "\(error)"
    }
}

/// Whether the server got to listen (set from its `onServerRunning`).
private final class ListeningFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// `501 Not Implemented` for a method HTTP does not define (RFC 9110 §9.1: "An
/// origin server that receives a request method that is unrecognized or not
/// implemented SHOULD respond with the 501"), on any path, with the endpoint's
/// JSON error; the router alone answers such a method 404. The nine methods of
/// RFC 9110 and RFC 5789 pass on: on the service's paths, `GET` and `HEAD` are
/// answered and the rest get `405` with `Allow`.
struct UnknownMethodMiddleware<Context: RequestContext>: RouterMiddleware {
    static var known: Set<HTTPRequest.Method> { [.get, .head, .post, .put, .delete, .patch, .options, .trace, .connect] }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !Self.known.contains(request.method) else { return try await next(request, context) }
        let message = "the method \(request.method.rawValue) is not one this service implements: only GET and HEAD are answered"
        var response = ImageResponse.error(WebImageError(.invalidArgument, message), message: message)
        response.status = .notImplemented
        return Response(response)
    }
}

/// A request no route answers: the endpoint's JSON `404` (Hummingbird's own has
/// no body), without the body for `HEAD`. `OPTIONS *`, a question about the
/// server rather than a path (RFC 9110 §9.3.7), is answered `200` with `Allow`.
/// A route's own `HTTPError(.notFound)` with a message passes as it is.
struct NoRouteMiddleware<Context: RequestContext>: RouterMiddleware {
    static func notFound(head: Bool) -> Response {
        let message = "no such path: this service answers thumbnail, placeholder, info, health and metrics"
        var response = ImageResponse.error(WebImageError(.notFound, message), message: message)
        response.status = .notFound
        if head { response.body = Data() }
        return Response(response)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && error.body == nil {
            if request.method == .options, request.uri.path == "*" {
                return Response(status: .ok, headers: [.allow: "GET, HEAD", .contentLength: "0"])
            }
            return Self.notFound(head: request.method == .head)
        }
    }
}
