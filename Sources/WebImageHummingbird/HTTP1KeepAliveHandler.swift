import Foundation
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
/// It also answers some requests itself, each in its turn after the answers to
/// the requests before it on the connection, with the JSON error the endpoint
/// uses; the connection then closes, and nothing sent after that request is read:
/// - `400` for a wrong `Host` (RFC 9112 §3.2): none in an HTTP/1.1 request, more
///   than one, or a value that is not a host with an optional port. Hummingbird
///   passes such a request on as if it were sound.
/// - `400` for a `Transfer-Encoding` whose last coding is not `chunked` (RFC 9112
///   §6.1), which Hummingbird answered and then answered again with a bare `400`.
/// - `405` for `CONNECT`, after which Hummingbird read nothing more.
/// - `400` for a target that is not a path or an `http(s)` URL with a host.
///
/// A request asking to upgrade (`Connection: upgrade` with `Upgrade`) is passed on
/// as one asking to close: NIO's decoder reads nothing after it. Every close after
/// an answer is staged (RFC 9112 §9.6): the sending side first, then the whole
/// connection when the client closes or 2 seconds later, so answers already
/// written are not cut off by a reset.
/// - `505` for a connection's first request in HTTP/0.9 (`GET /path`, no
///   version), and `400` for `PRI` in any line but HTTP/2's preface, which the
///   decoder left waiting for the idle timeout, and for a first request line
///   ended by LF alone, which it answered `505` (`FirstRequestLineHandler`).
/// - `400` for a request the decoder cannot read (a head past 80 KiB, a byte no
///   request may hold), which Hummingbird answers with an empty body, at once,
///   even behind answers still pending. When the body of a request already passed
///   on breaks (a bad chunk), that request's own answer is the last one and
///   Hummingbird's bare `400` after it is not sent.
public final class HTTP1KeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny
    let serverName: String?

    /// - Parameter serverName: the `Server` header of the answers this handler
    ///   makes itself (a `400` for a wrong `Host`...), as
    ///   `ApplicationConfiguration.serverName`.
    public init(serverName: String? = nil) { self.serverName = serverName }

    public func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            let options = ConnectionOptionsHandler(serverName: serverName)
            try? pipeline.addHandler(options, position: .before(codec))
            if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
                try? pipeline.addHandler(FirstRequestLineHandler(options: options), position: .before(decoder))
            }
        }
    }
}

/// Before the HTTP codec: what each request asked of its connection, applied to
/// the request, to its answer and to the connection; and the requests refused
/// here, each answered in its turn.
final class ConnectionOptionsHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    enum Asked { case close, keepAliveOnHTTP10, nothing }
    /// One per request whose answer has not ended, in order (answers keep the requests' order).
    private var asked: [Asked] = []
    private var answered = 0
    /// A request answered here instead of being passed on: nothing from then on is
    /// read, and its answer is written once the answers before it have ended.
    struct Refusal {
        var status: HTTPResponseStatus
        var message: String
        var method: HTTPMethod
        var allow: String?
    }
    private var refusal: Refusal?
    /// A request whose head was passed on and whose end was not yet.
    private var insideRequest = false
    /// The request being read could not be read to its end (its body's framing is
    /// broken): its answer is the last, then the connection closes.
    private var closingAfterAnswers = false
    /// Dropping a response no request is waiting for (Hummingbird's bare 400 after a
    /// body it could not read), until its end.
    private var droppingUnasked = false
    private let serverName: String?
    /// The connection's first request line is a `HEAD`'s, until its head arrives
    /// here (`FirstRequestLineHandler`): a refusal of it before then has no body.
    var firstIsHead = false
    private static let dates = HTTPDateCache()
    private static let metrics = RequestMetricsCache()

    init(serverName: String?) { self.serverName = serverName }

    private var nothingPending: Bool { answered == asked.count }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard refusal == nil, !closingAfterAnswers else { return }
        let part = unwrapInboundIn(data)
        guard case .head(var head) = part else {
            if case .end = part { insideRequest = false }
            return context.fireChannelRead(data)
        }
        firstIsHead = false
        if let refusal = Self.refusal(of: head) {
            refuse(refusal, context)
            return
        }
        insideRequest = true
        // `Connection: upgrade` with `Upgrade`: NIO's decoder reads nothing after such a
        // request (it leaves the bytes to an upgrader, and Hummingbird has none), so
        // the upgrade is declined by closing after the answer, as `close` would.
        if !head.isKeepAlive || Self.asksToUpgrade(head) {
            asked.append(.close)
            head.headers.replaceOrAdd(name: "Connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
        } else {
            asked.append(head.version.major == 1 && head.version.minor == 0 ? .keepAliveOnHTTP10 : .nothing)
            context.fireChannelRead(data)
        }
    }

    /// A request the decoder could not read (a head past 80 KiB, a byte no request
    /// may hold, a broken chunk). Between requests, it is refused in its turn with a
    /// 400 that says why. Within a request whose head was passed on, that request
    /// is answered as its handler answers it (which hears of the error), and then
    /// the connection closes; Hummingbird's own bare 400 after it is not sent.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parseError = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        guard refusal == nil, !closingAfterAnswers else { return }  // this connection already ends here
        guard insideRequest else {
            return refuse(Refusal(status: Self.status(for: parseError), message: Self.message(for: parseError),
                                  method: firstIsHead ? .HEAD : .GET), context)
        }
        closingAfterAnswers = true
        context.fireErrorCaught(error)
        if nothingPending { closeLingering(context) }
    }

    /// 505 for another version of HTTP (RFC 9110 §15.6.6), 400 for the rest.
    static func status(for error: HTTPParserError) -> HTTPResponseStatus {
        switch error {
        case .invalidVersion, .paused: .httpVersionNotSupported
        default: .badRequest
        }
    }

    static func message(for error: HTTPParserError) -> String {
        switch error {
        case .invalidVersion: "the request's HTTP version is not one this server speaks: HTTP/1.1 and 1.0 only"
        // The parser stops at HTTP/2's connection preface (PRI * HTTP/2.0).
        case .paused: "the request is HTTP/2 (its connection preface): this server speaks HTTP/1.1 and 1.0 only"
        // NIO's one error for either bound of Hummingbird's decoder.
        case .headerOverflow: "the request's line and header fields are more than this server reads (80 KiB, or 1000 fields)"
        case .lfExpected: "the request is not valid HTTP/1.1: its lines end in CR LF"
        default: "the request is not valid HTTP/1.1 (\(error))"
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part = unwrapOutboundIn(data)
        if droppingUnasked || (nothingPending && closingAfterAnswers) {
            // No request waits for this answer: not sent.
            droppingUnasked = true
            promise?.succeed(())
            if case .end = part {
                droppingUnasked = false
                closeLingering(context)
            }
            return
        }
        var current = answered < asked.count ? asked[answered] : .nothing
        // The last answer before a close for a broken body says so.
        if closingAfterAnswers, answered == asked.count - 1 { current = .close }
        switch part {
        case .head(var head) where head.status.code >= 200 && current != .nothing:
            head.headers.replaceOrAdd(name: "Connection", value: current == .close ? "close" : "keep-alive")
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            answered += 1
            let last = nothingPending
            if last {
                asked.removeAll(keepingCapacity: true)
                answered = 0
            }
            guard current == .close || (last && closingAfterAnswers) else {
                context.write(data, promise: promise)
                if last, refusal != nil { writeRefusal(context) }
                return
            }
            // Nothing after this request is read (a client that sent more is done with).
            closingAfterAnswers = true
            let written = promise ?? context.eventLoop.makePromise()
            let channel = context.channel
            written.futureResult.whenComplete { _ in Self.closeLingering(channel) }
            context.write(data, promise: written)
        default:
            context.write(data, promise: promise)
        }
    }

    /// How long a closing connection goes on reading (and dropping) what its client
    /// sends after the last answer.
    static let linger = TimeAmount.seconds(2)

    /// Closes in stages (RFC 9112 §9.6): the sending side first, so the answers
    /// already written all arrive; then the whole connection once the client
    /// closes its side or ``linger`` has passed. Closing at once while the
    /// client's next requests sit unread makes the kernel send a reset, which
    /// throws away answers the client had not read yet. Meanwhile what arrives is
    /// read and dropped (``channelRead(context:data:)`` passes nothing on).
    private func closeLingering(_ context: ChannelHandlerContext) { Self.closeLingering(context.channel) }

    private static func closeLingering(_ channel: any Channel) {
        guard channel.isActive else { return }
        channel.close(mode: .output).whenComplete { result in
            guard case .success = result else { return channel.close(promise: nil) }
            channel.eventLoop.scheduleTask(in: Self.linger) { channel.close(promise: nil) }
        }
    }

    /// Refuses a request: nothing after it is passed on, and its answer goes now
    /// or after the answers before it.
    private func refuse(_ refusal: Refusal, _ context: ChannelHandlerContext) {
        self.refusal = refusal
        if nothingPending { writeRefusal(context) }
    }

    /// The answer to ``refusal``: the endpoint's JSON error, then a full close once written.
    private func writeRefusal(_ context: ChannelHandlerContext) {
        guard let refusal else { return }
        var response = ImageResponse.error(WebImageError(.invalidArgument, refusal.message), message: refusal.message)
        response.status = HTTPResponse.Status(code: Int(refusal.status.code))
        var head = HTTPResponseHead(version: .http1_1, status: refusal.status)
        for field in response.headerFields { head.headers.add(name: field.name.rawName, value: field.value) }
        head.headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        head.headers.replaceOrAdd(name: "Date", value: Self.dates.now())
        if let allow = refusal.allow { head.headers.replaceOrAdd(name: "Allow", value: allow) }
        if let serverName { head.headers.replaceOrAdd(name: "Server", value: serverName) }
        // NIO's encoder drops the length of an answer to CONNECT, which has no body:
        // a type for no body would only mislead.
        if refusal.method == .CONNECT { head.headers.remove(name: "Content-Type") }
        let method = HTTPRequest.Method(refusal.method.rawValue) ?? .get
        Self.metrics.endpoint("NotFound", method, response.status).requests.increment()
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        // No body after HEAD, nor after CONNECT, whose answer NIO's encoder frames without one
        // (the close that follows ends it).
        if refusal.method != .HEAD, refusal.method != .CONNECT {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in Self.closeLingering(channel) }
    }

    /// Why a request is answered here rather than passed on, or nil:
    /// - a wrong `Host` (RFC 9112 §3.2): none in an HTTP/1.1 request, more than
    ///   one in any, or a value that is not a host with an optional port;
    /// - a `Transfer-Encoding` whose last coding is not `chunked` (RFC 9112 §6.1:
    ///   the body's length cannot be known, so nothing after it can be read);
    /// - a target that is not one (``targetProblem(_:)``);
    /// - `CONNECT`: this is not a proxy, and the decoder would read nothing after it
    ///   (`405` with `Allow`, and no body: NIO's encoder frames any answer to
    ///   `CONNECT` without one).
    ///
    /// Every request passes here, so a sound one costs one pass over its fields and
    /// no allocation.
    static func refusal(of head: HTTPRequestHead) -> Refusal? {
        func refused(_ message: String) -> Refusal { Refusal(status: .badRequest, message: message, method: head.method) }
        var hosts = 0
        var hostIsSound = true
        var lastCoding: Substring?
        for (name, value) in head.headers {
            if name.utf8.count == 4, name.lowercased() == "host" {
                hosts += 1
                // Optional whitespace around a field's value is not part of it (RFC 9112 §5).
                // Read in place: a native string's bytes are contiguous.
                hostIsSound = hostIsSound && (value.utf8.withContiguousStorageIfAvailable { isHostAndPort(trimmed($0[...])) }
                    ?? isHostAndPort(trimmed(Substring(value).utf8)))
            } else if name.utf8.count == 17, name.lowercased() == "transfer-encoding" {
                lastCoding = value.split(separator: ",").last ?? ""
            }
        }
        if hosts > 1 { return refused("the request has \(hosts) Host fields; HTTP/1.1 allows one") }
        if !hostIsSound { return refused("the request's Host field is not a host with an optional port") }
        if hosts == 0, !(head.version.major == 1 && head.version.minor == 0) {
            return refused("the request has no Host field, which HTTP/1.1 requires")
        }
        if let lastCoding, lastCoding.trimmingCharacters(in: .whitespaces).lowercased() != "chunked" {
            return refused("the request's Transfer-Encoding does not end in chunked, so where its body ends cannot be known")
        }
        if let problem = targetProblem(head) { return refused(problem) }
        if head.method == .CONNECT {
            return Refusal(status: .methodNotAllowed, message: "CONNECT is not answered here: this service is not a proxy",
                           method: head.method, allow: "GET, HEAD")
        }
        return nil
    }

    /// A field's value without the spaces and tabs around it.
    private static func trimmed<Bytes: BidirectionalCollection<UInt8>>(_ value: Bytes) -> Bytes where Bytes.SubSequence == Bytes {
        let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = value.firstIndex(where: { !isSpace($0) }), let last = value.lastIndex(where: { !isSpace($0) }) else {
            return value[value.endIndex...]
        }
        return value[first...last]
    }

    /// What is wrong with a request's target (RFC 9112 §3.2), or nil: a `#`
    /// (a fragment is never sent); `*` for any method but `OPTIONS`; an
    /// absolute-form target that is not an `http` or `https` URL with a host and
    /// an optional port (the host the request names: RFC 9112 §3.2.2), or that
    /// names a user (RFC 9110 §4.2.4). `CONNECT`'s authority-form is refused as
    /// `CONNECT`.
    static func targetProblem(_ head: HTTPRequestHead) -> String? {
        let hasFragment = head.uri.utf8.withContiguousStorageIfAvailable { $0.count > 0 && memchr($0.baseAddress!, Int32(UInt8(ascii: "#")), $0.count) != nil }
            ?? head.uri.utf8.contains(UInt8(ascii: "#"))
        if hasFragment { return "the request's target has a fragment (#), which is never sent" }
        let target = Substring(head.uri).utf8
        // Origin-form (`/path?query`), nearly every request: nothing more to check.
        guard let first = target.first, first != UInt8(ascii: "/"), head.method != .CONNECT else { return nil }
        if target.elementsEqual("*".utf8) {
            return head.method == .OPTIONS ? nil : "the target * is for OPTIONS only"
        }
        let scheme = target.prefix { $0 != UInt8(ascii: ":") }
        let lowered = String(decoding: scheme, as: UTF8.self).lowercased()
        guard lowered == "http" || lowered == "https", target[scheme.endIndex...].starts(with: "://".utf8) else {
            return "the request's target is neither a path nor an http URL"
        }
        let authority = target[target.index(scheme.endIndex, offsetBy: 3)...]
            .prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") }
        if authority.contains(UInt8(ascii: "@")) {
            return "the request's target names a user (user@host), which an http URI must not (RFC 9110 §4.2.4)"
        }
        let host = authority.prefix { $0 != UInt8(ascii: ":") || authority.first == UInt8(ascii: "[") }
        guard !host.isEmpty, host.first != UInt8(ascii: ":"), isHostAndPort(authority) else {
            return "the request's target does not name a host with an optional port"
        }
        return nil
    }

    /// Whether a request asks to upgrade its connection: an `upgrade` option in
    /// `Connection` and an `Upgrade` field.
    static func asksToUpgrade(_ head: HTTPRequestHead) -> Bool {
        head.headers.contains(name: "upgrade") && head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
    }

    /// `uri-host [ ":" port ]` (RFC 3986 §3.2.2): a reg-name (unreserved
    /// characters, sub-delimiters and `%XX`), or an IPv6 address or IPvFuture
    /// literal in brackets; then an optional port of at most 65535.
    static func isHostAndPort<Bytes: BidirectionalCollection<UInt8>>(_ value: Bytes) -> Bool where Bytes.SubSequence == Bytes {
        var rest = value[...]
        if rest.first == UInt8(ascii: "[") {
            guard let close = rest.firstIndex(of: UInt8(ascii: "]")) else { return false }
            guard isIPLiteral(rest[rest.index(after: rest.startIndex)..<close]) else { return false }
            rest = rest[rest.index(after: close)...]
        } else {
            let end = rest.firstIndex(of: UInt8(ascii: ":")) ?? rest.endIndex
            guard isRegName(rest[..<end]) else { return false }
            rest = rest[end...]
        }
        guard let colon = rest.first else { return true }
        let port = rest.dropFirst()
        guard colon == UInt8(ascii: ":"), port.count <= 5, port.allSatisfy(isDigit) else { return false }
        return port.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } <= 65535
    }

    /// Unreserved characters, sub-delimiters, and `%` followed by two hex digits.
    private static func isRegName<Bytes: BidirectionalCollection<UInt8>>(_ name: Bytes) -> Bool where Bytes.SubSequence == Bytes {
        var index = name.startIndex
        while index < name.endIndex {
            let byte = name[index]
            if byte == UInt8(ascii: "%") {
                let first = name.index(after: index)
                guard first < name.endIndex, isHexDigit(name[first]) else { return false }
                let second = name.index(after: first)
                guard second < name.endIndex, isHexDigit(name[second]) else { return false }
                index = name.index(after: second)
                continue
            }
            guard isUnreservedOrSubDelimiter(byte) else { return false }
            index = name.index(after: index)
        }
        return true
    }

    /// An IPv6 address as `inet_pton` reads it (a zone identifier is not allowed in
    /// a Host), or `v<hex>.<unreserved, sub-delimiters, colons>` (IPvFuture).
    private static func isIPLiteral<Bytes: BidirectionalCollection<UInt8>>(_ literal: Bytes) -> Bool where Bytes.SubSequence == Bytes {
        if let v = literal.first, v | 0x20 == UInt8(ascii: "v") {
            let body = literal.dropFirst()
            guard let dot = body.firstIndex(of: UInt8(ascii: ".")), dot > body.startIndex,
                  body[..<dot].allSatisfy(isHexDigit) else { return false }
            let tail = body[body.index(after: dot)...]
            return !tail.isEmpty && tail.allSatisfy { $0 == UInt8(ascii: ":") || isUnreservedOrSubDelimiter($0) }
        }
        guard literal.count <= 45 else { return false }
        var address = in6_addr()
        return inet_pton(AF_INET6, String(decoding: literal, as: UTF8.self), &address) == 1
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
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
