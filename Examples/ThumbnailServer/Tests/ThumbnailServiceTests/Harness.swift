import Configuration
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Synchronization
import ThumbnailService
import WebImage
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import WebImageKit
import WebImageVips
import WebImageSamples

/// swift-metrics is bootstrapped once per process; every test's service renders this registry.
let metricsRegistry: PrometheusCollectorRegistry = {
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    return registry
}()

/// The services' logger in tests: errors only, so a failing test's output shows what matters.
let quietLogger: Logger = {
    var logger = Logger(label: "thumbnail-server-tests")
    logger.logLevel = .error
    return logger
}()

/// Runs a Hummingbird application on 127.0.0.1 (any free port) for `body`, then
/// shuts it down gracefully.
func withApplication<App: ApplicationProtocol, T: Sendable>(
    _ make: (@escaping @Sendable (Int) async -> Void) -> App,
    _ body: @Sendable (Int) async throws -> T
) async throws -> T {
    let (ports, continuation) = AsyncStream<Int>.makeStream()
    let app = make { port in continuation.yield(port) }
    let group = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "test")))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw WebImageError(.loadFailed, "the server did not start") }
        do {
            let value = try await body(port)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return value
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
    }
}

/// The upstream origin the service fetches from: real images made with libvips,
/// and the failures a real origin has. Counts requests by path.
final class Upstream: Sendable {
    let requests = Mutex<[String: Int]>([:])
    let photo: Data      // 1600x1200 JPEG
    let logo: Data       // 512x512 PNG with alpha
    /// Photos of eight sizes for the soak, made on first use.
    var soakPhotos: [Data] { Self.soakPhotos }
    private static let soakPhotos: [Data] = (0..<8).map { index in
        let size = PixelSize(width: 1200 + 100 * index, height: 900 + 75 * index)
        return (try? VipsImageCoder().encode(Image(pixelSize: size, storage: SampleImages.landscape(size, seed: index + 10)),
                                             as: .jpeg, options: EncodeOptions(quality: 85))) ?? Data()
    }

    init() throws {
        let coder = VipsImageCoder()
        let size = PixelSize(width: 1600, height: 1200)
        photo = try coder.encode(Image(pixelSize: size, storage: SampleImages.landscape(size, seed: 3)), as: .jpeg, options: EncodeOptions(quality: 85))
        let disc = SampleImages.disc(PixelSize(512))
        logo = try coder.encode(Image(pixelSize: disc.size, hasAlpha: true, storage: disc), as: .png, options: EncodeOptions())
    }

    func count(_ path: String) -> Int { requests.withLock { $0[path] ?? 0 } }

    /// `/img/gated.jpg` answers only once the gate is open.
    private let gate = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func openGate() {
        let waiters = gate.withLock { gate in
            gate.open = true
            defer { gate.waiters = [] }
            return gate.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
    func waitForGate() async {
        await withCheckedContinuation { continuation in
            let now = gate.withLock { gate -> Bool in
                if gate.open { return true }
                gate.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func application(onServerRunning: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        router.middlewares.add(CountingMiddleware(upstream: self))
        let photo = photo, logo = logo
        router.get("/img/photo.jpg") { _, _ in Self.image(photo, "image/jpeg") }
        router.get("/img/logo.png") { _, _ in Self.image(logo, "image/png") }
        // 2 MiB that starts like a JPEG: refused on its Content-Length, over the 1 MiB limit.
        router.get("/img/huge.jpg") { _, _ in Self.image(photo.prefix(64) + Data(count: 2 << 20), "image/jpeg") }
        router.get("/img/slow.jpg") { _, _ in
            try await Task.sleep(for: .seconds(6))
            return Self.image(photo, "image/jpeg")
        }
        router.get("/img/gated.jpg") { _, _ in
            await self.waitForGate()
            return Self.image(photo, "image/jpeg")
        }
        // An allowed origin that sends the client to a host not on the allow-list
        // (localhost: the same loopback address, so only the allow-list can refuse it).
        router.get("/img/elsewhere.jpg") { request, _ in
            let port = request.head.authority.flatMap { $0.split(separator: ":").last }.map(String.init) ?? "80"
            return Response(status: .found, headers: [.location: "http://localhost:\(port)/img/photo.jpg"])
        }
        // /img/soak/N.jpg: one of eight photos (1200x900 to 1900x1425), under as many URLs as a soak asks for.
        let soakPhotos = self.soakPhotos
        router.get("/img/soak/:name") { _, context in
            let index = Int(context.parameters.get("name")?.split(separator: ".").first ?? "") ?? 0
            return Self.image(soakPhotos[index % soakPhotos.count], "image/jpeg")
        }
        // 300 bytes that declare 10000x10000 with ten components, progressive: a decode
        // would need libjpeg's 2 GB coefficient buffer.
        router.get("/img/ten-components.jpg") { _, _ in Self.image(Self.tenComponentJPEG, "image/jpeg") }
        router.get("/img/text") { _, _ in Self.image(Data("hello, not an image\n".utf8), "text/plain") }
        router.get("/img/broken.jpg") { _, _ in Self.image(Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 7, count: 500), "image/jpeg") }
        // Its backend down: a failure of the origin (a 500 would be an answer about the URL).
        router.get("/img/error.jpg") { _, _ in Response(status: .badGateway) }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                           onServerRunning: { await onServerRunning($0.localAddress?.port ?? 0) }, logger: quietLogger)
    }

    /// SOI, DQT, SOF2 (10000x10000, ten components), DHT, one scan header, a few
    /// bytes of data, EOI.
    static let tenComponentJPEG: Data = {
        func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var bytes: [UInt8] = [0xFF, 0xD8, 0xFF, 0xDB] + be16(67) + [0x00] + [UInt8](repeating: 1, count: 64)
        bytes += [0xFF, 0xC2] + be16(8 + 3 * 10) + [8] + be16(10_000) + be16(10_000) + [10]
        for id in 0..<10 { bytes += [UInt8(id + 1), 0x11, 0x00] }
        bytes += [0xFF, 0xC4] + be16(20) + [0x00, 1] + [UInt8](repeating: 0, count: 15) + [0x00]
        bytes += [0xFF, 0xDA] + be16(8) + [1, 1, 0x00, 0, 0, 0] + [UInt8](repeating: 0, count: 32) + [0xFF, 0xD9]
        return Data(bytes)
    }()

    static func image(_ data: Data, _ type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

struct CountingMiddleware<Context: RequestContext>: RouterMiddleware {
    let upstream: Upstream
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        upstream.requests.withLock { $0[request.uri.path, default: 0] += 1 }
        return try await next(request, context)
    }
}

/// The service under test with its configuration as a deployment would write it:
/// the SSRF guard on, loopback 127.0.0.1 exempt (the upstream lives there), an
/// allow-list, a small response limit, and a real LMDB store. The loader's timeout
/// is generous (a busy CI machine runs Chromium and Redis beside these tests); the
/// test that wants a timeout sets a short one and an origin far slower than it.
func makeService(directory: URL, overrides: [String: String] = [:]) async throws -> ThumbnailService {
    var values: [String: String] = [
        "http.port": "0",
        "thumbnail.allowedHosts": "127.0.0.1,127.0.0.2",
        "loader.exemptAddresses": "127.0.0.1/32",
        "loader.timeout": "15s",
        "loader.maxResponseSize": "1MiB",
        "store.kind": "lmdb",
        "store.path": directory.appendingPathComponent("cache").path,
        "samples.path": directory.appendingPathComponent("samples").path,
    ]
    for (key, value) in overrides { values[key] = value }
    // The service's own defaults layer (guard on) is under these values, as in production.
    let config = try await ThumbnailSettings.reader(file: nil, environment: [:], flags: values)
    return try ThumbnailService(manager: try ConfigLayers.manager(config: config), settings: try ThumbnailSettings(config: config), metrics: metricsRegistry)
}

/// An HTTP client: Foundation's URLSession (libcurl underneath on Linux), without
/// a cache, so every status and header reaches the test as the server sent it.
struct Client: Sendable {
    struct Response: Sendable {
        var statusCode: Int
        var headers: [String: String]
        var data: Data
        var contentType: String? { headers["content-type"] }
        var etag: String? { headers["etag"] }
    }

    let port: Int

    func get(_ path: String, headers: [String: String] = [:]) async throws -> Response {
        guard let url = URL(string: "http://127.0.0.1:\(port)\(path)") else { throw WebImageError(.invalidURL, path) }
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 30)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw WebImageError(.loadFailed, "not an HTTP response") }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
        }
        return Response(statusCode: http.statusCode, headers: fields, data: data)
    }

    /// `/thumbnail?url=…` with the source URL percent-encoded, plus `rest`.
    func thumbnail(_ source: String, _ rest: String = "") async throws -> Response {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        return try await get("/thumbnail?url=\(source.addingPercentEncoding(withAllowedCharacters: unreserved)!)\(rest)")
    }
}

func temporaryDirectory() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("thumbnail-tests-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Decodes a response body with libvips, to check what a client would see.
func decode(_ data: Data) throws -> Image {
    try VipsImageCoder().decode(data, options: DecodeOptions())
}

/// Polls `condition` every 10 ms until it holds, for up to 60 s (an event, not
/// a timing: the bound only stops a hang); the caller's expectations say what
/// went wrong if it never did.
func waitFor(_ condition: @Sendable () -> Bool) async throws {
    for _ in 0..<6000 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
}
