import Foundation
import HTTPTypes
import Hummingbird
import ServiceLifecycle
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import Testing
import WebImage
import WebImageHTTP
import WebImageHummingbird
import WebImageTestSupport

@Suite("Memory hits answered on the event loop")
struct MemoryHitHandlerTests {
    /// A channel with the handler and nothing after it: what it passes on is read with `readInbound`.
    static func channel(_ f: EndpointFixture, mountedAt: String = "") -> EmbeddedChannel {
        EmbeddedChannel(handler: MemoryHitFastPath(endpoint: f.endpoint, mountedAt: mountedAt, serverName: "test-server").channelHandler())
    }

    /// The endpoint at the root of a Hummingbird app with the handler before its router.
    /// Served on loopback with `LiveServer`, which passes `onServerRunning`.
    static func app(_ f: EndpointFixture, onServerRunning: @escaping @Sendable (any Channel) async -> Void) -> some ApplicationProtocol & Service {
        let router = Router()
        router.addImageRoutes(f.endpoint)
        let fastPath = MemoryHitFastPath(endpoint: f.endpoint)
        return Application(router: router, server: .http1(configuration: .init(additionalChannelHandlers: [fastPath.channelHandler()])),
                           configuration: LiveServer.configuration, onServerRunning: onServerRunning)
    }

    static func request(_ path: String, _ method: HTTPRequest.Method = .get, _ fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: method, scheme: "http", authority: "test", path: path, headerFields: fields)
    }

    /// Sends a whole request (head and end).
    static func send(_ channel: EmbeddedChannel, _ request: HTTPRequest) throws {
        try channel.writeInbound(HTTPRequestPart.head(request))
        try channel.writeInbound(HTTPRequestPart.end(nil))
    }

    /// The response the handler wrote, if it wrote one: its head and its body's bytes.
    static func answered(_ channel: EmbeddedChannel) throws -> (head: HTTPResponse, body: Data)? {
        guard case .head(let head)? = try channel.readOutbound(as: HTTPResponsePart.self) else { return nil }
        var body = Data()
        while let part = try channel.readOutbound(as: HTTPResponsePart.self) {
            switch part {
            case .body(let buffer): body.append(contentsOf: buffer.readableBytesView)
            case .end: return (head, body)
            case .head: Issue.record("a second head before the end"); return nil
            }
        }
        Issue.record("no end part")
        return nil
    }

    /// The request parts passed on to the router, as heads' paths and "end"/"body".
    static func passedOn(_ channel: EmbeddedChannel) throws -> [String] {
        var parts: [String] = []
        while let part = try channel.readInbound(as: HTTPRequestPart.self) {
            switch part {
            case .head(let request): parts.append(request.path ?? "")
            case .body: parts.append("body")
            case .end: parts.append("end")
            }
        }
        return parts
    }

    @Test("a memory hit is the router's answer, with Date and Server, and nothing reaches the router; HEAD and 304 too")
    func answersHits() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let path = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=120&h=120"
        let warm = await f.get(path)  // made (network), then held in memory
        #expect(warm.status == .ok)
        let routed = await f.get(path)
        #expect(routed.headerFields[.imageSource] == "memory")
        let channel = Self.channel(f)
        try Self.send(channel, Self.request(path))
        let hit = try #require(try Self.answered(channel))
        #expect(try Self.passedOn(channel).isEmpty)
        #expect(hit.head.status == .ok && hit.body == routed.body)
        // The endpoint's headers as the router's path gives them (Server-Timing's duration aside).
        for name in [HTTPField.Name.contentType, .eTag, .cacheControl, .lastModified, .vary, .contentLength, .imageSource] {
            #expect(hit.head.headerFields[name] == routed.headerFields[name], "\(name)")
        }
        #expect(hit.head.headerFields[.server] == "test-server")
        let date = try #require(hit.head.headerFields[.date])
        #expect(abs((HTTPDate.parse(date) ?? .distantPast).timeIntervalSinceNow) < 600)

        try Self.send(channel, Self.request(path, .head))
        let head = try #require(try Self.answered(channel))
        #expect(head.head.status == .ok && head.body.isEmpty && head.head.headerFields[.contentLength] == String(routed.body.count))

        let etag = try #require(routed.headerFields[.eTag])
        try Self.send(channel, Self.request(path, .get, [.ifNoneMatch: etag]))
        let notModified = try #require(try Self.answered(channel))
        #expect(notModified.head.status == .notModified && notModified.body.isEmpty)
        #expect(try Self.passedOn(channel).isEmpty)
        _ = try channel.finish()
    }

    @Test("everything else goes to the router whole: misses, bad queries, other paths and methods, bodies, Connection, a full write buffer")
    func passesOn() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let path = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=90&h=90"
        _ = await f.get(path)
        let channel = Self.channel(f)
        let others: [HTTPRequest] = [
            Self.request("/thumbnail?url=\(f.source("photo-2.jpg"))&w=90&h=90"),  // a miss
            Self.request("/thumbnail?url=\(f.source("photo-1.jpg"))&w=90"),  // a bad query: the router's 400
            Self.request("/thumbnail?url=\(f.source("photo-1.jpg"))&w=90&h=90&t=bogus"),
            Self.request("/img/thumbnail?url=\(f.source("photo-1.jpg"))&w=90&h=90"),  // not where it is mounted
            Self.request("/thumbnails?url=\(f.source("photo-1.jpg"))&w=90&h=90"),
            Self.request("/info?url=\(f.source("photo-1.jpg"))"),
            Self.request(path, .post),
            Self.request(path, .get, [.connection: "close"]),
            Self.request(path, .get, [.contentLength: "3"]),
        ]
        for request in others {
            try Self.send(channel, request)
            #expect(try Self.answered(channel) == nil, "\(request.path ?? "")")
            #expect(try Self.passedOn(channel) == [request.path ?? "", "end"], "\(request.path ?? "")")
            // The router's answer ends: the next request may be answered here again.
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            _ = try Self.answered(channel)
        }
        // A body that came without a length header: the held head goes on before it.
        try channel.writeInbound(HTTPRequestPart.head(Self.request(path)))
        try channel.writeInbound(HTTPRequestPart.body(ByteBuffer(string: "x")))
        try channel.writeInbound(HTTPRequestPart.end(nil))
        #expect(try Self.passedOn(channel) == [path, "body", "end"])
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        _ = try channel.readOutbound(as: HTTPResponsePart.self)
        // A client that does not read: its responses go through the router's back-pressure.
        channel.isWritable = false
        try Self.send(channel, Self.request(path))
        #expect(try Self.passedOn(channel) == [path, "end"])
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        _ = try channel.readOutbound(as: HTTPResponsePart.self)
        channel.isWritable = true
        try Self.send(channel, Self.request(path))
        #expect(try Self.answered(channel)?.head.status == .ok)
        _ = try channel.finish()
    }

    @Test("a hit behind a request the router is answering waits its turn, and one after it is answered here")
    func keepsOrder() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let hit = "/img/thumbnail?url=\(f.source("photo-1.jpg"))&w=80&h=80"
        let miss = "/img/thumbnail?url=\(f.source("photo-3.jpg"))&w=80&h=80"
        _ = await f.get(hit)
        let channel = Self.channel(f, mountedAt: "/img/")
        try Self.send(channel, Self.request(miss))
        try Self.send(channel, Self.request(hit))
        // Both with the router, in order; nothing written yet.
        #expect(try Self.passedOn(channel) == [miss, "end", hit, "end"])
        #expect(try Self.answered(channel) == nil)
        for _ in 0..<2 {
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
        }
        while try channel.readOutbound(as: HTTPResponsePart.self) != nil {}
        try Self.send(channel, Self.request(hit))
        #expect(try Self.passedOn(channel).isEmpty)
        #expect(try Self.answered(channel)?.head.headerFields[.imageSource] == "memory")
        _ = try channel.finish()
    }

    @Test("a request that is not HTTP/1.1 gets a 400 saying why, as JSON, and the connection closes; behind a pending answer Hummingbird's own")
    func parseErrors() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let channel = Self.channel(f)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).get()
        #expect(channel.isActive)
        channel.pipeline.fireErrorCaught(HTTPParserError.headerOverflow)
        let answer = try #require(try Self.answered(channel))
        #expect(answer.head.status == .badRequest && answer.head.headerFields[.connection] == "close")
        #expect(answer.head.headerFields[.contentType] == "application/json" && answer.head.headerFields[.contentLength] == String(answer.body.count))
        let json = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: String])
        #expect(json["error"] == "invalidArgument" && json["message"]?.contains("80 KiB") == true, "\(json)")
        #expect(!channel.isActive)
        // With an answer of the router's pending, the error is the router's to answer after it.
        let second = Self.channel(f)
        try Self.send(second, Self.request("/info?url=x"))
        second.pipeline.fireErrorCaught(HTTPParserError.invalidURL)
        #expect(throws: HTTPParserError.self) { try second.throwIfErrorCaught() }
        #expect(try second.readOutbound(as: HTTPResponsePart.self) == nil)
        _ = try? second.finish()
    }

    @Test("over a real socket, pipelined requests are answered in order whichever path answers each, and both paths answer")
    func pipelinedOverHTTP() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let target: @Sendable (String, Int) -> String = { name, box in "/thumbnail?url=\(f.source(name))&w=\(box)&h=\(box)" }
        _ = await f.get(target("photo-1.jpg", 100))
        try await LiveServer.run({ Self.app(f, onServerRunning: $0) }) { port in
            // A cold one first (the router's, slow), hits behind it, a second cold
            // one, and hits after it: each answer must be the one asked for. The
            // app has no server name, so neither path adds a Server header.
            let asked = [("photo-2.jpg", 140), ("photo-1.jpg", 100), ("photo-1.jpg", 100), ("photo-3.jpg", 150),
                         ("photo-1.jpg", 100), ("photo-2.jpg", 140), ("photo-1.jpg", 100)]
            var sources: Set<String> = []
            for _ in 0..<3 {
                let responses = try await RawHTTP.pipelined(port: port, targets: asked.map(target))
                #expect(responses.count == asked.count)
                for (response, (name, box)) in zip(responses, asked) {
                    #expect(response.status == 200)
                    let size = try f.manager.configuration.coders.info(response.body).pixelSize
                    #expect(max(size.width, size.height) == box, "\(name) \(box): \(size)")
                    sources.insert(response.headers["x-image-source"] ?? "")
                    #expect(response.headers["date"] != nil && response.headers["server"] == nil)
                }
            }
            // A byte no request target may hold: 400 with the reason, over the wire.
            let bad = try await RawHTTP.send(port: port, target: "/thumbnail?url=\u{01}")
            #expect(bad.status == 400 && bad.headers["content-type"] == "application/json", "\(bad)")
            #expect(String(decoding: bad.body, as: UTF8.self).contains("not valid HTTP/1.1"), "\(String(decoding: bad.body, as: UTF8.self))")
            // Both paths answered: the router's (network or disk) and the handler's (memory).
            #expect(sources.contains("memory") && sources.count > 1, "\(sources)")
        }
    }

    @Test("a client that sends thousands of pipelined requests before reading any answer gets every one, in order, as the write buffer fills and empties")
    func backPressure() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        // Answers of about 30 KiB: 1,500 of them are far more than the sockets' buffers hold.
        let hit = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=600&h=600&format=jpeg"
        let other = "/thumbnail?url=\(f.source("photo-2.jpg"))&w=500&h=500&format=jpeg"
        let warmHit = await f.get(hit), warmOther = await f.get(other)
        #expect(warmHit.status == .ok && warmOther.status == .ok && warmHit.body.count > 10_000, "\(warmHit.body.count)")
        try await LiveServer.run({ Self.app(f, onServerRunning: $0) }) { port in
            // Two sizes alternating, so that an answer out of order shows in its bytes.
            let targets = (0..<1500).map { $0 % 2 == 0 ? hit : other }
            let responses = try await RawHTTP.pipelined(port: port, targets: targets)
            #expect(responses.count == targets.count)
            let wrong = zip(responses, targets).enumerated().filter { _, pair in
                pair.0.status != 200 || pair.0.body != (pair.1 == hit ? warmHit.body : warmOther.body)
            }
            #expect(wrong.isEmpty, "\(wrong.count) answers wrong, the first at \(wrong.first?.offset ?? -1)")
        }
    }
}
