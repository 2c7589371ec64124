import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing
import WebImageHummingbird

@Suite("Connections that wait too long are closed")
struct ConnectionTimeoutHandlerTests {
    static let limit = TimeAmount.seconds(60)

    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: ConnectionTimeoutHandler(limit: limit))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        return channel
    }

    static func head(_ path: String = "/thumbnail") -> HTTPRequestPart {
        .head(HTTPRequest(method: .get, scheme: "http", authority: "test", path: path))
    }

    static func answer(_ channel: EmbeddedChannel) throws {
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
    }

    @Test("a connection that sends no request, or not a whole head, is closed at the limit and not before")
    func noRequest() throws {
        let channel = try Self.channel()
        channel.embeddedEventLoop.advanceTime(by: Self.limit - .seconds(1))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive, "idle for the whole limit")
    }

    @Test("a request being answered is never timed out; the clock starts again when the last answer ends")
    func answering() throws {
        let channel = try Self.channel()
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        try channel.writeInbound(Self.head())
        try channel.writeInbound(HTTPRequestPart.end(nil))
        try channel.writeInbound(Self.head("/second"))  // pipelined
        try channel.writeInbound(HTTPRequestPart.end(nil))
        channel.embeddedEventLoop.advanceTime(by: Self.limit * 3)
        #expect(channel.isActive, "two answers pending")
        try Self.answer(channel)
        channel.embeddedEventLoop.advanceTime(by: Self.limit * 3)
        #expect(channel.isActive, "one answer still pending")
        try Self.answer(channel)
        channel.embeddedEventLoop.advanceTime(by: Self.limit - .seconds(1))
        #expect(channel.isActive)
        try channel.writeInbound(Self.head("/third"))  // keep-alive: the next request in time
        try channel.writeInbound(HTTPRequestPart.end(nil))
        try Self.answer(channel)
        channel.embeddedEventLoop.advanceTime(by: Self.limit - .seconds(1))
        #expect(channel.isActive, "the clock started again at the third answer's end")
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
        // What passed through is untouched.
        var heads = 0
        while let part = try channel.readInbound(as: HTTPRequestPart.self) { if case .head = part { heads += 1 } }
        #expect(heads == 3)
    }

    @Test("a client that stops reading its answers is closed when writes have waited the limit; one that reads again is not")
    func stalledReader() throws {
        let channel = try Self.channel()
        try channel.writeInbound(Self.head())
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: Self.limit - .seconds(1))
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: Self.limit * 2)
        #expect(channel.isActive, "it read again in time, and a request is still being answered")
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(!channel.isActive, "writes waited the whole limit")
    }
}

@Suite("A request that does not keep its connection closes it after the answer")
struct HTTP1KeepAliveHandlerTests {
    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try channel.pipeline.syncOperations.addHandler(HTTP1KeepAliveHandler())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        return channel
    }

    /// The connection field the request reaches Hummingbird with.
    static func connection(_ version: HTTPVersion, _ headers: HTTPHeaders = [:]) throws -> String? {
        let channel = try channel()
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: version, method: .GET, uri: "/health", headers: headers)))
        guard case .head(let request)? = try channel.readInbound(as: HTTPRequestPart.self) else { return "no head" }
        return request.headerFields[.connection]
    }

    @Test("what reaches Hummingbird: `close` for HTTP/1.0 without keep-alive and for any close option in any case; keep-alive and plain HTTP/1.1 as they came")
    func marks() throws {
        #expect(try Self.connection(.http1_0) == "close")
        #expect(try Self.connection(.http1_0, ["Connection": "keep-alive"]) == "keep-alive")
        #expect(try Self.connection(.http1_0, ["Connection": "Upgrade"]) == "close")
        #expect(try Self.connection(.http1_1) == nil)
        #expect(try Self.connection(.http1_1, ["Connection": "close"]) == "close")
        #expect(try Self.connection(.http1_1, ["Connection": "Close"]) == "close")
        #expect(try Self.connection(.http1_1, ["Connection": "keep-alive, CLOSE"]) == "close")
        var twice = HTTPHeaders()
        twice.add(name: "Connection", value: "keep-alive")
        twice.add(name: "Connection", value: "close")
        #expect(try Self.connection(.http1_1, twice) == "close")
    }

    /// Answers one request of `version` with `headers` and returns the answer's
    /// connection field and whether the channel is still open after it.
    static func answer(_ version: HTTPVersion, _ headers: HTTPHeaders = [:]) throws -> (connection: String?, open: Bool) {
        let channel = try channel()
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: version, method: .GET, uri: "/health", headers: headers)))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        guard case .head(let head)? = try channel.readOutbound(as: HTTPServerResponsePart.self) else { return ("no head", channel.isActive) }
        return (head.headers.first(name: "connection"), channel.isActive)
    }

    @Test("the answer says what happens to the connection, and a closing answer closes it fully once written")
    func answers() throws {
        let old = try Self.answer(.http1_0)
        #expect(old.connection == "close" && !old.open)
        let kept = try Self.answer(.http1_0, ["Connection": "keep-alive"])
        #expect(kept.connection == "keep-alive" && kept.open)
        let closing = try Self.answer(.http1_1, ["Connection": "Close"])
        #expect(closing.connection == "close" && !closing.open)
        let plain = try Self.answer(.http1_1)
        #expect(plain.connection == nil && plain.open)
    }
}
