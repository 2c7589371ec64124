package import Foundation
@_spi(WebImageInternal) package import WebImage
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real HTTP/1.1 server on 127.0.0.1 for the loader's tests, with routes that
/// misbehave on purpose, and counters of what it saw. It also answers as a forward
/// proxy would (a request line with a whole URL is routed on its path), without
/// forwarding anything.
///
/// Routes: `/bytes/N`, `/chunked/N`, `/gzip`, `/etag`, `/status/C[/RETRY-AFTER]`,
/// `/redirect/K` (K hops to /bytes/100), `/redirect-to/HOST:PORT/PATH`, `/redirect-file`, `/loop`, `/stall` (or `/stall/N/…`: declares N bytes, sends 10, then nothing)
/// (headers, then nothing), `/big[/N]` (N bytes, default 10 MB, streamed), `/big-chunked` (endless
/// chunks), `/truncated` (declares 1000 bytes, sends 500, closes),
/// `/slow/MS/ID` (answers after MS ms; records ID on arrival).
/// `/gate/ID` (records ID on arrival; answers when the test calls `openGate()`).
package final class TestHTTPServer: Sendable {
    package struct Stats {
        package var connectionsOpened = 0
        package var connectionsClosed = 0
        package var inFlight = 0
        package var maxInFlight = 0
        package var arrivals: [String] = []
        package var requests: [(path: String, headers: [String: String])] = []
        /// What happened when: each request's arrival, each streamed body's end,
        /// each connection's open and close, for a failing test to print.
        package var events: [(at: ContinuousClock.Instant, what: String)] = []
    }

    /// The events so far, in seconds since the first.
    package var timeline: String {
        let events = stats.withLock { $0.events }
        guard let first = events.first?.at else { return "(nothing happened)" }
        return events.map { String(format: "%.3f", Double(($0.at - first).components.attoseconds) / 1e18 + Double(($0.at - first).components.seconds)) + " " + $0.what }
            .joined(separator: "; ")
    }

    /// The origins' own event loops: not the singleton that the services under
    /// test (Hummingbird's, in process) run on, so that an origin answers at its
    /// own pace whatever a service's loop is doing.
    private static let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    package let stats = Lock(Stats())
    /// Bodies served at exact request paths (`serve(_:_:)`), checked before the routes.
    private let files = Lock<[String: (data: Data, contentType: String, delay: Int)]>([:])
    /// Responses held by `/gate` until `openGate()`, and whether it is open.
    private let gate = Gate()
    private let channel: Lock<(any Channel)?> = Lock(nil)
    package let port: Int
    package static let gzipBody: Data = makeGzip(bytes(5000))

    /// `1 + 258 × runs` zero bytes as a zlib stream (RFC 1950/1951): one block of
    /// fixed Huffman codes, a literal 0 then back-references of 258 bytes at
    /// distance 1, about 1/160 of the bytes it stands for.
    package static func deflatedZeros(runs: Int) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var pending = 0, count = 0
        func bits(_ value: Int, _ width: Int) {  // values: least significant bit first
            pending |= value << count
            count += width
            while count >= 8 { out.append(UInt8(pending & 0xFF)); pending >>= 8; count -= 8 }
        }
        func code(_ value: Int, _ width: Int) {  // Huffman codes: most significant bit first
            for shift in stride(from: width - 1, through: 0, by: -1) { bits((value >> shift) & 1, 1) }
        }
        bits(1, 1); bits(1, 2)  // the last block, fixed codes
        code(0x30, 8)  // literal 0
        for _ in 0..<runs { code(0xC5, 8); code(0, 5) }  // length 258 (symbol 285), distance 1
        code(0, 7)  // end of block
        if count > 0 { out.append(UInt8(pending & 0xFF)) }
        let sum = (1 + 258 * runs) % 65521  // Adler-32 of zeros: a = 1, b = the count
        out += [UInt8(sum >> 8), UInt8(sum & 0xFF), 0, 1]
        return out
    }

    package static func bytes(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }) }

    private init(channel: any Channel, host: String) {
        self.host = host
        self.channel.withLock { $0 = channel }
        port = channel.localAddress?.port ?? 0
    }

    /// Starts on a free port of `host` (any loopback address: 127.0.0.2 works too).
    package static func start(host: String = "127.0.0.1") async throws -> TestHTTPServer {
        let box = Lock<TestHTTPServer?>(nil)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Handler(server: { box.withLock { $0! } }))
                }
            }
            .bind(host: host, port: 0).get()
        let server = TestHTTPServer(channel: channel, host: host)
        box.withLock { $0 = server }
        return server
    }

    package let host: String
    package func url(_ path: String) -> URL { URL(string: "http://\(host):\(port)\(path)")! }

    package func shutdown() async {
        let channel = self.channel.withLock { $0 }
        try? await channel?.close()
    }

    /// Answers every held `/gate` request, and any that come later at once.
    package func openGate() { gate.open() }

    /// Holds `answer` until the gate opens (runs it now if it is open).
    func whenGateOpens(on loop: any EventLoop, _ answer: @escaping @Sendable () -> Void) {
        gate.onOpen { loop.execute(answer) }
    }

    /// Serves `data` at exactly `path` (as the request line has it, percent-encoding
    /// and all), ahead of every route.
    /// - Parameter delay: milliseconds before the answer.
    package func serve(_ path: String, _ data: Data, contentType: String = "application/octet-stream", delay: Int = 0) {
        files.withLock { $0[path] = (data, contentType, delay) }
    }

    func file(at path: String) -> (data: Data, contentType: String, delay: Int)? { files.withLock { $0[path] } }

    /// Requests that reached `/gate` so far.
    package var arrivalCount: Int { stats.withLock { $0.arrivals.count } }
    package func requestCount(path: String) -> Int { stats.withLock { $0.requests.filter { $0.path == path }.count } }

    private static func makeGzip(_ data: Data) -> Data {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gz-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("body")
        try? data.write(to: file)
        var pid: pid_t = 0
        let arguments: [String] = ["/bin/gzip", "-n", file.path]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        guard posix_spawn(&pid, "/bin/gzip", nil, nil, argv, environ) == 0 else { return Data() }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return (try? Data(contentsOf: file.appendingPathExtension("gz"))) ?? Data()
    }

    final class Handler: ChannelInboundHandler, @unchecked Sendable {
        // @unchecked: NIO calls a handler on its channel's event loop only.
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let server: () -> TestHTTPServer
        var head: HTTPRequestHead?

        init(server: @escaping () -> TestHTTPServer) { self.server = server }

        func channelActive(context: ChannelHandlerContext) {
            server().stats.withLock { $0.connectionsOpened += 1; $0.events.append((.now, "open")) }
            context.fireChannelActive()
        }

        func channelInactive(context: ChannelHandlerContext) {
            server().stats.withLock { $0.connectionsClosed += 1; $0.events.append((.now, "close")) }
            context.fireChannelInactive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): self.head = head
            case .body: break
            case .end:
                guard let head else { return }
                route(head, context: context)
            }
        }

        private func send(_ context: ChannelHandlerContext, status: HTTPResponseStatus, headers: [(String, String)] = [], body: Data? = nil, length: Bool = true) {
            var fields = HTTPHeaders(headers)
            if let body, length { fields.replaceOrAdd(name: "Content-Length", value: String(body.count)) }
            if body == nil { fields.replaceOrAdd(name: "Content-Length", value: "0") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: fields))), promise: nil)
            if let body, !body.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }

        private func route(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
            let server = server()
            // As a forward proxy, the request line holds the whole URL: route on its path.
            var path = head.uri
            if path.hasPrefix("http://"), let slash = path.dropFirst(7).firstIndex(of: "/") { path = String(path[slash...]) }
            let parts = path.split(separator: "/").map(String.init)
            let headers = Dictionary(head.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
            server.stats.withLock { $0.requests.append((head.uri, headers)); $0.events.append((.now, head.uri)) }
            if let file = server.file(at: head.uri) {
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(Int64(file.delay))) {
                    self.send(bound.value, status: .ok, headers: [("Content-Type", file.contentType)], body: file.data)
                }
                return
            }
            switch parts.first ?? "" {
            case "bytes":
                send(context, status: .ok, body: TestHTTPServer.bytes(Int(parts[1]) ?? 0))
            case "chunked":
                let body = TestHTTPServer.bytes(Int(parts[1]) ?? 0)
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Transfer-Encoding": "chunked"]))), promise: nil)
                for start in stride(from: 0, to: body.count, by: max(1, body.count / 3)) {
                    let chunk = body[start..<min(body.count, start + max(1, body.count / 3))]
                    context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: chunk)))), promise: nil)
                }
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            case "gzip":
                send(context, status: .ok, headers: [("Content-Encoding", "gzip")], body: TestHTTPServer.gzipBody)
            case "etag":
                if headers["if-none-match"] == "\"v1\"" {
                    send(context, status: .notModified, headers: [("ETag", "\"v1\"")])
                } else {
                    send(context, status: .ok, headers: [("ETag", "\"v1\""), ("Last-Modified", "Tue, 15 Nov 1994 12:45:26 GMT")], body: TestHTTPServer.bytes(1000))
                }
            case "status":
                let retryAfter = parts.count > 2 ? [("Retry-After", parts[2...].joined(separator: "/").removingPercentEncoding ?? "")] : []
                send(context, status: HTTPResponseStatus(statusCode: Int(parts[1]) ?? 500), headers: retryAfter, body: Data("status".utf8))
            case "s3-slowdown":
                // An S3 endpoint asking for a pause: 503 SlowDown with Retry-After (seconds).
                let document = Data("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>".utf8)
                send(context, status: .serviceUnavailable, headers: [("Content-Type", "application/xml"), ("Retry-After", parts.count > 1 ? parts[1] : "1")], body: document)
            case "redirect":
                let hops = Int(parts[1]) ?? 0
                send(context, status: .found, headers: [("Location", hops > 1 ? "/redirect/\(hops - 1)" : "/bytes/100")])
            case "redirect-nowhere":
                send(context, status: .found)
            case "redirect-to":
                send(context, status: .found, headers: [("Location", "http://" + parts.dropFirst().joined(separator: "/"))])
            case "redirect-file":
                send(context, status: .found, headers: [("Location", "file:///etc/passwd")])
            case "loop":
                send(context, status: .found, headers: [("Location", "/loop")])
            case "deflate":
                // `/deflate/K/...`: 1 + 258 K zero bytes as `Content-Encoding: deflate`,
                // all but its last 4 bytes (the checksum) sent, then nothing;
                // `/deflate/K/whole`: all of it.
                let body = TestHTTPServer.deflatedZeros(runs: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: [
                    "Content-Length": "\(body.count)", "Content-Encoding": "deflate", "Content-Type": "application/octet-stream"]))), promise: nil)
                if parts.count > 2, parts[2] == "whole" {
                    context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
                    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                } else {
                    context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body.dropLast(4))))), promise: nil)
                }
            case "stall":
                // `/stall/N/...` declares N bytes; `/stall`, 1000.
                let declared = parts.count > 1 ? Int(parts[1]) ?? 1000 : 1000
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "\(declared)"]))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: TestHTTPServer.bytes(10))))), promise: nil)
            case "big":
                let size = parts.count > 1 ? Int(parts[1]) ?? 10_000_000 : 10_000_000
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "\(size)"]))), promise: nil)
                stream(context, remaining: size)
            case "big-chunked":
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Transfer-Encoding": "chunked"]))), promise: nil)
                stream(context, remaining: 10_000_000)
            case "truncated":
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "1000"]))), promise: nil)
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: TestHTTPServer.bytes(500)))))).whenComplete { _ in
                    bound.value.close(promise: nil)
                }
            case "slow":
                let delay = Int64(parts[1]) ?? 100
                server.stats.withLock { stats in
                    stats.arrivals.append(parts.count > 2 ? parts[2] : "")
                    stats.inFlight += 1
                    stats.maxInFlight = max(stats.maxInFlight, stats.inFlight)
                }
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(delay)) {
                    server.stats.withLock { $0.inFlight -= 1 }
                    self.send(bound.value, status: .ok, body: TestHTTPServer.bytes(100))
                }
            case "gate":
                server.stats.withLock { $0.arrivals.append(parts.count > 1 ? parts[1] : "") }
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                server.whenGateOpens(on: context.eventLoop) {
                    self.send(bound.value, status: .ok, body: TestHTTPServer.bytes(100))
                }
            default:
                send(context, status: .notFound, body: Data("no route".utf8))
            }
        }

        /// Sends 64 KiB chunks until `remaining` is sent or the client goes away.
        private func stream(_ context: ChannelHandlerContext, remaining: Int) {
            guard remaining > 0, context.channel.isActive else {
                server().stats.withLock { $0.events.append((.now, remaining > 0 ? "stream stopped, \(remaining) left" : "stream sent")) }
                return
            }
            let size = min(65_536, remaining)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: 1, count: size))))).whenSuccess {
                self.stream(bound.value, remaining: remaining - size)
            }
        }
    }
}
