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

    /// What the write buffer holds and what the client acknowledged, as a test sets them.
    final class Buffer: @unchecked Sendable {
        var bytes = 0
        var acknowledged: UInt64 = 0
    }

    static func channel(buffer: Buffer) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: ConnectionTimeoutHandler(limit: limit) { _ in ReaderProgress(acknowledged: buffer.acknowledged, buffered: buffer.bytes) })
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        return channel
    }

    static func writable(_ channel: EmbeddedChannel, _ writable: Bool) {
        channel.isWritable = writable
        channel.pipeline.fireChannelWritabilityChanged()
    }

    @Test("a client that stops reading its answers is closed when it has read nothing for the limit; one that reads again is not")
    func stalledReader() throws {
        let buffer = Buffer()
        let channel = try Self.channel(buffer: buffer)
        try channel.writeInbound(Self.head())
        buffer.bytes = 200_000
        Self.writable(channel, false)
        channel.embeddedEventLoop.advanceTime(by: Self.limit - .seconds(1))
        Self.writable(channel, true)
        channel.embeddedEventLoop.advanceTime(by: Self.limit * 2)
        #expect(channel.isActive, "it read again in time, and a request is still being answered")
        Self.writable(channel, false)
        channel.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(!channel.isActive, "it read nothing for the whole limit")
    }

    static let step = TimeAmount.nanoseconds(limit.nanoseconds / 4)

    @Test("a client that reads slowly is not closed while the buffer stays full: whatever it read since the last look (every quarter limit) counts, with what was written meanwhile; once it stops, it is closed a limit after the last look that saw it read")
    func slowReader() throws {
        let buffer = Buffer()
        let channel = try Self.channel(buffer: buffer)
        try channel.writeInbound(Self.head())
        try channel.writeInbound(Self.head("/second"))
        buffer.bytes = 200_000
        Self.writable(channel, false)
        // It read 150 KB while another answer's 100 KB body was written.
        channel.embeddedEventLoop.advanceTime(by: Self.step - .seconds(1))
        try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(repeating: 0, count: 100_000)))
        buffer.bytes = 150_000
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(channel.isActive, "it read 150 KB of 300 KB")
        // A byte a look, for two limits.
        for _ in 0..<8 {
            buffer.bytes -= 1
            channel.embeddedEventLoop.advanceTime(by: Self.step)
            #expect(channel.isActive, "it read a byte")
        }
        // Acknowledgements count though NIO's buffer does not move (the kernel's send buffer is draining).
        for _ in 0..<8 {
            buffer.acknowledged += 4_096
            channel.embeddedEventLoop.advanceTime(by: Self.step)
            #expect(channel.isActive, "it acknowledged 4 KB")
        }
        // 50 KB written while it read 49 KB: it read.
        try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(repeating: 0, count: 50_000)))
        buffer.bytes += 1_000
        channel.embeddedEventLoop.advanceTime(by: Self.step)
        #expect(channel.isActive, "it read 49 KB")
        // Then 10 KB written and nothing read: closed a limit after that look, not before.
        try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(repeating: 0, count: 10_000)))
        buffer.bytes += 10_000
        channel.embeddedEventLoop.advanceTime(by: Self.limit - .seconds(1))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive, "it read nothing for the whole limit")
    }

    @Test("a client that stops reading is closed a limit after it last read, not two: its kernel filling its receive buffer just after the clock starts is the last it reads")
    func stoppedEarly() throws {
        let buffer = Buffer()
        let channel = try Self.channel(buffer: buffer)
        try channel.writeInbound(Self.head())
        buffer.bytes = 500_000
        Self.writable(channel, false)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        buffer.acknowledged += 65_536  // what its receive buffer took, then nothing
        channel.embeddedEventLoop.advanceTime(by: Self.step - .seconds(2) + Self.limit - .seconds(1))
        #expect(channel.isActive, "a limit has not passed since the look that saw it read")
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive, "closed a limit after that look (the old clock waited two limits)")
    }

    @Test("a connection whose answers are all written but not all sent is not idle while its client reads them, and is closed a limit after it stops")
    func drainingAnswers() throws {
        let buffer = Buffer()
        let channel = try Self.channel(buffer: buffer)
        try channel.writeInbound(Self.head())
        try Self.answer(channel)
        buffer.bytes = 900_000  // the answer, still in NIO's buffer
        channel.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(channel.isActive, "a limit to read from it")
        buffer.acknowledged += 100_000
        channel.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(channel.isActive, "it read")
        buffer.bytes -= 100_000
        channel.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(channel.isActive, "it read")
        channel.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(!channel.isActive, "it read nothing for a limit")
        // Once the buffer is empty, idle is idle (the kernel sends what it holds before the FIN).
        let drained = Buffer()
        let other = try Self.channel(buffer: drained)
        try other.writeInbound(Self.head())
        try Self.answer(other)
        other.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(!other.isActive)
    }

    @Test("where the channel cannot say what its buffer holds, a full limit without writability closes")
    func unknownBuffer() throws {
        let channel = EmbeddedChannel(handler: ConnectionTimeoutHandler(limit: Self.limit) { _ in nil })
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        try channel.writeInbound(Self.head())
        Self.writable(channel, false)
        channel.embeddedEventLoop.advanceTime(by: Self.limit)
        #expect(!channel.isActive)
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

    /// A request's head with a `Host` field, as every HTTP/1.1 request has.
    static func head(_ version: HTTPVersion, _ headers: HTTPHeaders, uri: String = "/health") -> HTTPServerRequestPart {
        var headers = headers
        if !headers.contains(name: "host") { headers.add(name: "Host", value: "test") }
        return .head(HTTPRequestHead(version: version, method: .GET, uri: uri, headers: headers))
    }

    /// The connection field the request reaches Hummingbird with.
    static func connection(_ version: HTTPVersion, _ headers: HTTPHeaders = [:]) throws -> String? {
        let channel = try channel()
        try channel.writeInbound(head(version, headers))
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
        try channel.writeInbound(head(version, headers))
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

    /// What a request with these fields gets: the status written (nil when the
    /// request was passed on) and whether the connection is still open.
    static func refused(_ version: HTTPVersion, _ headers: HTTPHeaders) throws -> (status: Int?, body: String, open: Bool) {
        let channel = try channel()
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: version, method: .GET, uri: "/health", headers: headers)))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        guard case .head(let head)? = try channel.readOutbound(as: HTTPServerResponsePart.self) else {
            let passedOn = try channel.readInbound(as: HTTPRequestPart.self)
            return (nil, passedOn == nil ? "nothing passed on" : "", channel.isActive)
        }
        var body = ""
        while case .body(.byteBuffer(let buffer))? = try channel.readOutbound(as: HTTPServerResponsePart.self) { body += String(buffer: buffer) }
        #expect(head.headers.first(name: "connection") == "close" && head.headers.first(name: "date") != nil)
        #expect(head.headers.first(name: "content-length") == String(body.utf8.count))
        #expect(try channel.readInbound(as: HTTPRequestPart.self) == nil, "a refused request reaches no handler after")
        return (Int(head.status.code), body, channel.isActive)
    }

    @Test("a wrong Host is 400 with the JSON error, and the connection closes: none in HTTP/1.1, two, or a value that is not host[:port]; sound ones pass on")
    func host() throws {
        func fields(_ pairs: (String, String)...) -> HTTPHeaders { HTTPHeaders(pairs) }
        let missing = try Self.refused(.http1_1, [:])
        #expect(missing.status == 400 && !missing.open)
        #expect(missing.body.contains("\"error\":\"invalidArgument\"") && missing.body.contains("no Host field"), "\(missing.body)")
        let twice = try Self.refused(.http1_1, fields(("Host", "a.example"), ("Host", "b.example")))
        #expect(twice.status == 400 && twice.body.contains("2 Host fields") && !twice.open)
        for bad in ["a b", "a.example/path", "user@a.example", "a.example:80:80", "a.example:http", "a.example:123456", "a.example:65536",
                    "[::1", "[]", "[zz::1]", "[1:2:3:4:5:6:7:8:9]", "[v1.]", "[vx.a]", "%", "a%zz", "a%2", "é.example", "a.example?x"] {
            let answer = try Self.refused(.http1_1, fields(("Host", bad)))
            #expect(answer.status == 400 && answer.body.contains("not a host with an optional port") && !answer.open, "\(bad)")
        }
        for good in ["a.example", "a.example:8080", "a.example:65535", "127.0.0.1:80", "[::1]:8080", "[2001:db8::1]", "[::ffff:127.0.0.1]",
                     "[v1.fe80::a+en1]", "xn--bcher-kva.example", "a-b_c~d.example", "a%2Eexample", "", "a.example ", " a.example:80\t"] {
            let answer = try Self.refused(.http1_1, fields(("Host", good)))
            #expect(answer.status == nil && answer.open, "good host \(good): \(answer.status ?? 0) \(answer.body)")
        }
        // HTTP/1.0 need not send one; two are wrong in any version.
        #expect(try Self.refused(.http1_0, [:]).status == nil)
        #expect(try Self.refused(.http1_0, fields(("Host", "a"), ("Host", "b"))).status == 400)
    }

    @Test("CONNECT is 405 with Allow; a Transfer-Encoding not ending in chunked is 400, as is a target that is not a path or an http URL with a host (no user, no fragment); each closes, and neither reaches a handler")
    func connectAndFraming() throws {
        let channel = try Self.channel()
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .CONNECT, uri: "a.example:443", headers: ["Host": "a.example:443"])))
        guard case .head(let head)? = try channel.readOutbound(as: HTTPServerResponsePart.self) else { Issue.record("no answer"); return }
        #expect(head.status == .methodNotAllowed && head.headers.first(name: "allow") == "GET, HEAD")
        #expect(!head.headers.contains(name: "Content-Type") && head.headers.first(name: "connection") == "close", "no type for no body")
        #expect(try channel.readOutbound(as: HTTPServerResponsePart.self) == .end(nil), "no body: NIO's encoder frames an answer to CONNECT without one")
        #expect(try channel.readInbound(as: HTTPRequestPart.self) == nil && !channel.isActive)
        for codings in [["identity"], ["chunked, gzip"], ["gzip", "x"], ["chunked", "identity"]] {
            var fields = HTTPHeaders([("Host", "a")])
            for coding in codings { fields.add(name: "Transfer-Encoding", value: coding) }
            let answer = try Self.refused(.http1_1, fields)
            #expect(answer.status == 400 && answer.body.contains("does not end in chunked") && !answer.open, "\(codings)")
        }
        let chunked = try Self.refused(.http1_1, HTTPHeaders([("Host", "a"), ("Transfer-Encoding", "gzip, Chunked")]))
        #expect(chunked.status == nil && chunked.open)
        // Userinfo in an absolute-form target; an @ in the path or query is not userinfo.
        for (target, refused) in [("http://u:p@a/health", true), ("HTTPS://u@a", true), ("http://a/health?x=u@b", false),
                                  ("http://a/u@b", false), ("/health?url=http://u@a", false), ("/x:y@z", false),
                                  ("http:///health", true), ("http://[::1/health", true), ("http://a:65536/x", true), ("http://%zz/x", true),
                                  ("http://[::1]:80/health", false), ("HTTP://a.example", false), ("ftp://a/x", true), ("a.example/x", true),
                                  ("/health#x", true), ("*", true), ("http://a:/x", false)] {
            let channel = try Self.channel()
            try channel.writeInbound(Self.head(.http1_1, [:], uri: target))
            let answered = try channel.readOutbound(as: HTTPServerResponsePart.self) != nil
            #expect(answered == refused, "\(target)")
        }
    }

    static func status(_ part: HTTPServerResponsePart?) -> UInt? {
        guard case .head(let head)? = part else { return nil }
        return head.status.code
    }

    @Test("a request the decoder cannot read is 400 in its turn; within a request already passed on, its answer is the last, and no second answer is sent")
    func parseErrors() throws {
        // Between requests, behind a pending answer: the answer, then the 400 saying why, then the close.
        let between = try Self.channel()
        try between.writeInbound(Self.head(.http1_1, [:]))
        try between.writeInbound(HTTPServerRequestPart.end(nil))
        between.pipeline.fireErrorCaught(HTTPParserError.headerOverflow)
        #expect(try between.readOutbound(as: HTTPServerResponsePart.self) == nil, "nothing before the pending answer")
        try between.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try between.writeOutbound(HTTPResponsePart.end(nil))
        #expect(Self.status(try between.readOutbound(as: HTTPServerResponsePart.self)) == 200)
        _ = try between.readOutbound(as: HTTPServerResponsePart.self)
        guard case .head(let refused)? = try between.readOutbound(as: HTTPServerResponsePart.self),
              case .body(.byteBuffer(let body))? = try between.readOutbound(as: HTTPServerResponsePart.self) else { Issue.record("no 400"); return }
        #expect(refused.status == .badRequest && String(buffer: body).contains("80 KiB"))
        #expect(!between.isActive)
        // Within a request (a broken chunk after its head): the handler's answer, then the close;
        // an answer no request waits for (Hummingbird's bare 400 after it) is not sent.
        let within = try Self.channel()
        try within.writeInbound(Self.head(.http1_1, HTTPHeaders([("Transfer-Encoding", "chunked")])))
        within.pipeline.fireErrorCaught(HTTPParserError.invalidChunkSize)
        #expect(throws: HTTPParserError.self) { try within.throwIfErrorCaught() }
        // Hummingbird writes its answer, then its bare 400 when it reads on and meets the error, before a flush.
        within.write(HTTPResponsePart.head(HTTPResponse(status: .methodNotAllowed)), promise: nil)
        within.write(HTTPResponsePart.end(nil), promise: nil)
        within.write(HTTPResponsePart.head(HTTPResponse(status: .badRequest)), promise: nil)
        within.write(HTTPResponsePart.end(nil), promise: nil)
        within.flush()
        #expect(Self.status(try within.readOutbound(as: HTTPServerResponsePart.self)) == 405)
        #expect(try within.readOutbound(as: HTTPServerResponsePart.self) == .end(nil))
        #expect(try within.readOutbound(as: HTTPServerResponsePart.self) == nil, "no second answer")
        #expect(!within.isActive)
    }

    @Test("the 400 for a wrong Host comes after the answers to the requests before it, and nothing after it is read")
    func hostInTurn() throws {
        let channel = try Self.channel()
        try channel.writeInbound(Self.head(.http1_1, [:]))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/health", headers: [:])))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(Self.head(.http1_1, [:], uri: "/after"))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        // Only the first request reached Hummingbird, and nothing is written yet.
        guard case .head(let first)? = try channel.readInbound(as: HTTPRequestPart.self) else { Issue.record("no first request"); return }
        #expect(first.path == "/health")
        #expect(try channel.readInbound(as: HTTPRequestPart.self) == .end(nil))
        #expect(try channel.readInbound(as: HTTPRequestPart.self) == nil, "the refused request and the one after it are not passed on")
        #expect(try channel.readOutbound(as: HTTPServerResponsePart.self) == nil)
        // The first answer, then the 400, then the close.
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        guard case .head(let ok)? = try channel.readOutbound(as: HTTPServerResponsePart.self) else { Issue.record("no first answer"); return }
        #expect(ok.status == .ok)
        #expect(try channel.readOutbound(as: HTTPServerResponsePart.self) == .end(nil))
        guard case .head(let refused)? = try channel.readOutbound(as: HTTPServerResponsePart.self) else { Issue.record("no 400"); return }
        #expect(refused.status == .badRequest)
        #expect(!channel.isActive)
    }
}
