public import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import HTTPTypes
import Metrics
import WebImage
import WebImageHTTP

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
///
/// It also answers `400` to a request whose `Host` is wrong (RFC 9112 §3.2): none
/// in an HTTP/1.1 request, more than one, or a value that is not a host with an
/// optional port. Hummingbird passes such a request on as if it were sound. The
/// `400` comes in its turn, after the answers to the requests before it on the
/// connection, with the JSON error the endpoint uses; the connection then closes,
/// and nothing sent after that request is read.
public final class HTTP1KeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny
    let serverName: String?

    /// - Parameter serverName: the `Server` header of the answers this handler
    ///   makes itself (a `400` for a wrong `Host`), as
    ///   `ApplicationConfiguration.serverName`.
    public init(serverName: String? = nil) { self.serverName = serverName }

    public func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? pipeline.addHandler(ConnectionOptionsHandler(serverName: serverName), position: .before(codec))
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
    /// Why a request was refused here: nothing from then on is read, and its 400
    /// is written once the answers before it have ended.
    private var refusal: (message: String, method: HTTPMethod)?
    private let serverName: String?
    private static let dates = HTTPDateCache()
    private static let metrics = RequestMetricsCache()

    init(serverName: String?) { self.serverName = serverName }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard refusal == nil else { return }
        guard case .head(var head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        if let problem = Self.hostProblem(head) {
            refusal = (problem, head.method)
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
            if answered == asked.count { refuse(context) }
            return
        }
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
            let last = answered == asked.count
            if last {
                asked.removeAll(keepingCapacity: true)
                answered = 0
            }
            guard current == .close else {
                context.write(data, promise: promise)
                if last, refusal != nil { refuse(context) }
                return
            }
            let written = promise ?? context.eventLoop.makePromise()
            let channel = context.channel
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            context.write(data, promise: written)
        default:
            context.write(data, promise: promise)
        }
    }

    /// The 400 for ``refusal``, then a full close once it is written.
    private func refuse(_ context: ChannelHandlerContext) {
        guard let (message, method) = refusal else { return }
        var response = ImageResponse.error(WebImageError(.invalidArgument, message), message: message)
        response.status = .badRequest
        var head = HTTPResponseHead(version: .http1_1, status: .badRequest)
        for field in response.headerFields { head.headers.add(name: field.name.canonicalName, value: field.value) }
        head.headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        head.headers.replaceOrAdd(name: "Date", value: Self.dates.now())
        if let serverName { head.headers.replaceOrAdd(name: "Server", value: serverName) }
        Self.metrics.endpoint("NotFound", HTTPRequest.Method(method.rawValue) ?? .get, .badRequest).requests.increment()
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// What is wrong with a request's `Host` (RFC 9112 §3.2), or nil: an HTTP/1.1
    /// request must have exactly one, any request at most one, and its value must
    /// be a host (a name, an IPv4 address or a bracketed IP literal) with an
    /// optional port, or empty.
    static func hostProblem(_ head: HTTPRequestHead) -> String? {
        let hosts = head.headers["host"]
        if hosts.count > 1 { return "the request has \(hosts.count) Host fields; HTTP/1.1 allows one" }
        guard let host = hosts.first else {
            return head.version.major == 1 && head.version.minor == 0 ? nil : "the request has no Host field, which HTTP/1.1 requires"
        }
        return isHostAndPort(Substring(host).utf8) ? nil : "the request's Host field is not a host with an optional port"
    }

    /// `uri-host [ ":" port ]` (RFC 3986 §3.2.2): reg-name characters, or an IP
    /// literal in brackets, then digits after one colon.
    static func isHostAndPort(_ value: Substring.UTF8View) -> Bool {
        var rest = value[...]
        if rest.first == UInt8(ascii: "[") {
            guard let close = rest.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let literal = rest[rest.index(after: rest.startIndex)..<close]
            // IPv6 (hex digits, colons, dots) or IPvFuture (`v1.…`): unreserved, sub-delimiters, colons.
            guard !literal.isEmpty, literal.allSatisfy({ $0 == UInt8(ascii: ":") || isUnreservedOrSubDelimiter($0) }) else { return false }
            rest = rest[rest.index(after: close)...]
        } else {
            let end = rest.firstIndex(of: UInt8(ascii: ":")) ?? rest.endIndex
            guard rest[..<end].allSatisfy({ isUnreservedOrSubDelimiter($0) || $0 == UInt8(ascii: "%") }) else { return false }
            rest = rest[end...]
        }
        guard let colon = rest.first else { return true }
        let port = rest.dropFirst()
        return colon == UInt8(ascii: ":") && port.count <= 5 && port.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// RFC 3986's unreserved characters and sub-delimiters: what a reg-name holds besides `%XX`.
    private static func isUnreservedOrSubDelimiter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="): true
        default: false
        }
    }
}
