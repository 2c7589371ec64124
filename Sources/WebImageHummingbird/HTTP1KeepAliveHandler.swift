public import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Closes the connection after the answer to a request that did not ask to keep
/// it: an HTTP/1.0 request without `Connection: keep-alive` (RFC 9112 §9.3).
///
/// Hummingbird closes after an answer only when the request says
/// `Connection: close`; the HTTP version, which decides the default, is gone by
/// the time a request reaches it. So an HTTP/1.0 client that reads until the
/// connection closes (ApacheBench without `-k`, many scripts) waited for the
/// idle timeout, holding a connection slot. Installed among Hummingbird's
/// `additionalChannelHandlers` (which come after the HTTP codec), this handler
/// puts a small one before the codec, where the version is still known, which
/// writes `Connection: close` into such a request; it passes everything on itself.
public final class HTTP1KeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? pipeline.addHandler(ConnectionCloseMarker(), position: .before(codec))
        }
    }
}

/// Before the HTTP codec: a request head whose version and fields do not keep
/// the connection alive gets `Connection: close`.
final class ConnectionCloseMarker: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), !head.isKeepAlive,
              !head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "close" })
        else { return context.fireChannelRead(data) }
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}
