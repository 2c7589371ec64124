public import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Closes the connection after the answer to a request that did not ask to keep
/// it, as HTTP/1.1 defines it (RFC 9112 §9.3, §9.6): any `close` option in
/// `Connection` (in any case, among other options, in any of several fields), or
/// an HTTP/1.0 request without `keep-alive`.
///
/// Hummingbird closes after an answer only when the request's `Connection` field
/// is exactly `close`, and the HTTP version, which decides the default, is gone
/// by the time a request reaches it. So `Connection: Close`, `keep-alive, close`
/// and every plain HTTP/1.0 request (ApacheBench without `-k`, many scripts) kept
/// their connection, and its slot under `http.maxConnections`, until the idle
/// timeout. Installed among Hummingbird's `additionalChannelHandlers` (which come
/// after the HTTP codec), this handler puts a small one before the codec, where
/// the version and the raw fields are still known. That one:
/// - writes `Connection: close` into such a request, so that every handler after
///   it sees the same thing;
/// - says so in the answer (`Connection: close`; `Connection: keep-alive` to an
///   HTTP/1.0 request that asked to keep the connection);
/// - closes the connection once that answer is written. Hummingbird's own close is
///   a half-close, which held the connection until the client closed its end.
public final class HTTP1KeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? pipeline.addHandler(ConnectionOptionsHandler(), position: .before(codec))
        }
    }
}

/// Before the HTTP codec: what each request asked of its connection, applied to
/// the request, to its answer and to the connection.
final class ConnectionOptionsHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    enum Asked { case close, keepAliveOnHTTP10, nothing }
    /// One per request whose answer has not ended, in order (answers keep the requests' order).
    private var asked: [Asked] = []
    private var answered = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        if !head.isKeepAlive {
            asked.append(.close)
            head.headers.replaceOrAdd(name: "Connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
        } else {
            asked.append(head.version.major == 1 && head.version.minor == 0 ? .keepAliveOnHTTP10 : .nothing)
            context.fireChannelRead(data)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let current = answered < asked.count ? asked[answered] : .nothing
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.code >= 200 && current != .nothing:
            head.headers.replaceOrAdd(name: "Connection", value: current == .close ? "close" : "keep-alive")
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            answered += 1
            if answered == asked.count {
                asked.removeAll(keepingCapacity: true)
                answered = 0
            }
            guard current == .close else { return context.write(data, promise: promise) }
            let written = promise ?? context.eventLoop.makePromise()
            let channel = context.channel
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            context.write(data, promise: written)
        default:
            context.write(data, promise: promise)
        }
    }
}
