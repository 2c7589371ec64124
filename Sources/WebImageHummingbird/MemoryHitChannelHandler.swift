import Foundation
import HTTPTypes
import Logging
import Metrics
public import NIOCore
import NIOHTTP1
public import NIOHTTPTypes
import Synchronization
import WebImage
public import WebImageHTTP

/// Answers thumbnails the memory tier holds on the connection's event loop, and
/// passes every other request on to Hummingbird.
///
/// A warm thumbnail is a lookup and a write, but through the router it costs a
/// hop from the event loop to a task and back, which is most of its time. This
/// handler sits between the HTTP codec and Hummingbird's handlers and asks
/// `ImageEndpoint.respondFromMemory(to:)` first. What it answers
/// is the endpoint's own answer, with Hummingbird's `Date` and `Server` headers
/// and its request metrics (`hb_requests`, `http_server_request_duration`,
/// `http_server_active_requests` under the route `{path}/thumbnail`) and debug
/// request line. It passes a request on when:
/// - the endpoint has no answer from memory (a miss, any other path, a bad query);
/// - a request it passed on is still being answered on this connection, so that
///   pipelined responses keep their order;
/// - the request has a body or a `Connection` header (Hummingbird's handler
///   decides about closing);
/// - the connection's write buffer is full (a client that does not read gets the
///   router's back-pressure, not an unbounded buffer).
///
/// A request the HTTP decoder rejects (a head past 80 KiB, a bad byte) gets a 400
/// with the endpoint's JSON error naming why, and the connection closes, where
/// Hummingbird alone answers an empty 400.
///
/// `webimage serve` and ``ImageServer`` install it. In an application of your own:
///
/// ```swift
/// let fastPath = MemoryHitFastPath(endpoint: endpoint, mountedAt: "/img", serverName: "my-service")
/// let app = Application(
///     router: router,  // with router.addImageRoutes(endpoint, at: "/img")
///     server: .http1(configuration: .init(additionalChannelHandlers: [fastPath.channelHandler()])))
/// ```
///
/// Requests it answers bypass the router's middleware. Hummingbird's own
/// `idleTimeout` on the HTTP/1 channel does not see them (its handler comes after
/// this one), so a connection busy only with memory hits would be closed when the
/// timeout passes; ``ConnectionTimeoutHandler`` placed before this handler, as
/// ``ImageServer`` places it, sees every request and answer.
public struct MemoryHitFastPath: Sendable {
    let endpoint: ImageEndpoint
    /// The exact path it answers (`/img/thumbnail`); any other goes to the router.
    let path: String
    let serverName: String?
    let metrics = RequestMetricsCache()
    let dates = HTTPDateCache()

    /// - Parameters:
    ///   - endpoint: the endpoint the router serves.
    ///   - mountedAt: the path `addImageRoutes(_:at:)` was given (empty for the root).
    ///   - serverName: the `Server` header, as `ApplicationConfiguration.serverName`.
    public init(endpoint: ImageEndpoint, mountedAt: String = "", serverName: String? = nil) {
        self.endpoint = endpoint
        let prefix = mountedAt.hasSuffix("/") ? String(mountedAt.dropLast()) : mountedAt
        self.path = (prefix.isEmpty || prefix.hasPrefix("/") ? prefix : "/" + prefix) + "/thumbnail"
        self.serverName = serverName
    }

    /// A handler for one connection (Hummingbird's `additionalChannelHandlers`
    /// makes one per connection).
    public func channelHandler() -> MemoryHitChannelHandler { MemoryHitChannelHandler(self) }
}

/// One connection's ``MemoryHitFastPath``: see there.
public final class MemoryHitChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart
    public typealias OutboundIn = HTTPResponsePart
    public typealias OutboundOut = HTTPResponsePart

    private let fastPath: MemoryHitFastPath
    /// Requests passed on whose response has not ended.
    private var passedOn = 0
    /// The head of a request that may be answered here, held until its end.
    private var held: HTTPRequest?
    /// Whether a response was written since the last flush.
    private var unflushed = false

    init(_ fastPath: MemoryHitFastPath) { self.fastPath = fastPath }

    /// One socket read per read event (NIO's default is four, 256 KiB): every
    /// request in what was read is decoded at once, whoever answers it, so a
    /// client that pipelines without reading its answers held about 4.5 MiB per
    /// connection; with one read, about 2.7 MiB (40 such connections, measured
    /// by RSS). A client that sends one request at a time reads the same.
    public func handlerAdded(context: ChannelHandlerContext) {
        context.channel.setOption(ChannelOptions.maxMessagesPerRead, value: 1).whenFailure { _ in }
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            if passedOn == 0, mayAnswer(request) {
                held = request
            } else {
                passOn(request, context)
            }
        case .body:
            // A body after all: the router takes the request.
            if let request = held.take() { passOn(request, context) }
            context.fireChannelRead(data)
        case .end:
            guard let request = held.take() else { return context.fireChannelRead(data) }
            if context.channel.isWritable, let response = answer(request) {
                write(response, context)
                context.write(wrapOutboundOut(.end(nil)), promise: nil)
                unflushed = true
            } else {
                passOn(request, context)
                context.fireChannelRead(data)
            }
        }
    }

    /// A request that is not HTTP/1.1 (a head past the decoder's 80 KiB, a bad
    /// byte): Hummingbird answers 400 with no body and closes. Here, when nothing
    /// is pending on the connection, the 400 says what was wrong, in the JSON the
    /// endpoint's other errors use; then the connection closes as Hummingbird's would.
    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parseError = error as? HTTPParserError, passedOn == 0, held == nil else {
            return context.fireErrorCaught(error)
        }
        let message = ConnectionOptionsHandler.message(for: parseError)
        var response = ImageResponse.error(WebImageError(.invalidArgument, message), message: message)
        response.status = .badRequest
        response.headerFields[.connection] = "close"
        response.headerFields[.date] = fastPath.dates.now()
        if let serverName = fastPath.serverName { response.headerFields[.server] = serverName }
        fastPath.metrics.endpoint("NotFound", .get, .badRequest).requests.increment()
        write(response, context)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // The router's responses pass here; ours are written past this handler.
        if case .end = unwrapOutboundIn(data), passedOn > 0 { passedOn -= 1 }
        context.write(data, promise: promise)
    }

    /// A response's head and body (the end is the caller's).
    private func write(_ response: ImageResponse, _ context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(response.head)), promise: nil)
        guard !response.body.isEmpty else { return }
        var buffer = context.channel.allocator.buffer(capacity: response.body.count)
        buffer.writeBytes(response.body)
        context.write(wrapOutboundOut(.body(buffer)), promise: nil)
    }

    private func passOn(_ request: HTTPRequest, _ context: ChannelHandlerContext) {
        passedOn += 1
        context.fireChannelRead(wrapInboundOut(.head(request)))
    }

    /// A GET or HEAD of the endpoint's thumbnail path, with no body and no say on the connection.
    private func mayAnswer(_ request: HTTPRequest) -> Bool {
        guard request.method == .get || request.method == .head, let target = request.path,
              target.utf8.starts(with: fastPath.path.utf8) else { return false }
        let rest = target.utf8.dropFirst(fastPath.path.utf8.count)
        guard rest.isEmpty || rest.first == UInt8(ascii: "?") else { return false }
        let fields = request.headerFields
        return fields[.connection] == nil && fields[.transferEncoding] == nil && (fields[.contentLength] ?? "0") == "0"
    }

    /// The endpoint's answer from memory, with Hummingbird's headers, counted as the router counts.
    private func answer(_ request: HTTPRequest) -> ImageResponse? {
        let started = ContinuousClock.now
        let metrics = fastPath.metrics
        let active = metrics.active(request.method)
        active.increment()
        defer { active.decrement() }
        guard var response = fastPath.endpoint.respondFromMemory(to: request) else { return nil }
        let logger = fastPath.endpoint.logger
        if logger.logLevel <= .debug {
            logger.debug("Request", metadata: ["hb.request.path": "\(request.path ?? "")", "hb.request.method": "\(request.method.rawValue)"])
        }
        response.headerFields[.date] = fastPath.dates.now()
        if let serverName = fastPath.serverName { response.headerFields[.server] = serverName }
        let endpoint = metrics.endpoint(fastPath.path, request.method, response.status)
        endpoint.requests.increment()
        endpoint.duration.recordNanoseconds(RequestMetricsCache.nanoseconds(since: started))
        return response
    }
}

/// The `Date` header's text, made once a second.
final class HTTPDateCache: Sendable {
    private let current = Mutex<(second: Int, text: String)>((-1, ""))

    func now() -> String {
        let second = Int(Date().timeIntervalSince1970)
        return current.withLock { current in
            if current.second != second {
                current = (second, HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(second))))
            }
            return current.text
        }
    }
}
