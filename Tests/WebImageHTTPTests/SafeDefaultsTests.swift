import Configuration
import Foundation
import HTTPTypes
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage
import WebImageConfiguration

import WebImageHTTP
import WebImageKit
import WebImageTestSupport

/// An endpoint embedded as serving.md shows it, over a manager that set none of
/// the service's guards: the endpoint brings them itself.
@Suite("ImageEndpoint's safe defaults, whatever the manager's", .serialized, .timeLimit(.minutes(3)))
struct SafeDefaultsTests {
    /// A manager as a library user makes one: the standard plugins, nothing else set.
    func plainManager(_ directory: URL) async throws -> ImageManager {
        let config = try await ConfigLayers.reader(flags: ["store.kind": "memory"], file: nil, environment: [:])
        var configuration = try ImageManager.Configuration(config: config, catalog: .standard, defaultStorePath: directory)
        configuration.timeout = .seconds(60)
        #expect(configuration.originBreaker == nil, "the library's manager has no breaker")
        return ImageManager(configuration: configuration)
    }

    func endpoint(_ manager: ImageManager, origin: TestHTTPServer, _ configure: (inout ImageEndpoint.Settings) -> Void = { _ in }) throws -> ImageEndpoint {
        var settings = ImageEndpoint.Settings()
        settings.allowedHosts = try #require(HostAllowList(["127.0.0.1:\(origin.port)"]))
        // These tests are about refusals, not time: the 30 s default once passed
        // beside two burners and the whole suite, and a refusal became a 504.
        settings.deadline = .seconds(600)
        configure(&settings)
        return ImageEndpoint(manager: manager, settings: settings)
    }

    func get(_ endpoint: ImageEndpoint, _ url: URL) async -> ImageResponse {
        let encoded = url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        return await endpoint.respond(to: HTTPRequest(method: .get, scheme: "http", authority: "test", path: "/thumbnail?url=\(encoded)&w=32"))
    }

    /// An origin on loopback and a plain manager for one test (`directory`: its store path).
    func withOrigin(_ body: (TestHTTPServer, ImageManager, URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("safe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        try await body(origin, try await plainManager(directory), directory)
    }

    /// Two origins on loopback (the first to be kept silent with `/gate`) and an
    /// endpoint allowed both, over a plain manager, for one test.
    func withTwoOrigins(_ configure: (inout ImageEndpoint.Settings) -> Void = { _ in },
                        _ body: (TestHTTPServer, TestHTTPServer, ImageEndpoint) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("safe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let silent = try await TestHTTPServer.start()
        defer { Task { await silent.shutdown() } }
        let other = try await TestHTTPServer.start()
        defer { Task { await other.shutdown() } }
        var settings = ImageEndpoint.Settings()
        settings.allowedHosts = try #require(HostAllowList(["127.0.0.1:\(silent.port)", "127.0.0.1:\(other.port)"]))
        settings.blockPrivateAddresses = false
        configure(&settings)
        try await body(silent, other, ImageEndpoint(manager: try await plainManager(directory), settings: settings))
    }

    @Test("private addresses refused by default, where curl connects; the switch, or the loader's exempt range, lets a private origin through")
    func privateAddresses() async throws {
        try await withOrigin { origin, manager, directory in
            let refused = await get(try endpoint(manager, origin: origin), origin.url("/bytes/10"))
            #expect(refused.status == .forbidden, "\(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
            #expect(origin.requestCount(path: "/bytes/10") == 0, "refused before connecting")
            // (Another URL: the refused one is on the manager's blocklist for a while.)
            let allowed = await get(try endpoint(manager, origin: origin) { $0.blockPrivateAddresses = false }, origin.url("/bytes/12"))
            #expect(allowed.status != .forbidden && origin.requestCount(path: "/bytes/12") == 1, "\(allowed.status)")
            // The loader's exempt ranges hold for the endpoint's guard too.
            let exemptConfig = try await ConfigLayers.reader(flags: ["store.kind": "memory", "loader.exemptAddresses": "127.0.0.1/32"], file: nil, environment: [:])
            let exempt = ImageManager(configuration: try ImageManager.Configuration(config: exemptConfig, catalog: .standard, defaultStorePath: directory))
            let through = await get(try endpoint(exempt, origin: origin), origin.url("/bytes/11"))
            #expect(through.status != .forbidden && origin.requestCount(path: "/bytes/11") == 1, "\(through.status)")
        }
    }

    @Test("a per-origin limit: 8 requests to an origin that never answers reach it 4 at a time, and another origin is served meanwhile; a breaker: five 503s in a row, then 503 without asking the origin")
    func originLimitAndBreaker() async throws {
        try await withTwoOrigins { silent, other, endpoint in
            let held = (0..<8).map { index in Task { await get(endpoint, silent.url("/gate/\(index)")) } }
            #expect(await eventually { silent.stats.withLock { $0.arrivals.count } == 4 && endpoint.originLimit?.usage(of: "http://127.0.0.1:\(silent.port)").waiting == 4 })
            #expect(silent.stats.withLock { $0.arrivals.count } == 4)
            for index in 0..<5 {
                let answer = await get(endpoint, other.url("/status/503"))
                #expect(answer.status == .badGateway, "\(index): \(answer.status)")
            }
            #expect(other.requestCount(path: "/status/503") == 5)
            let open = await get(endpoint, other.url("/status/503"))
            #expect(open.status == .serviceUnavailable && other.requestCount(path: "/status/503") == 5, "the circuit is open: \(open.status)")
            silent.openGate()
            for task in held { _ = await task.value }
            #expect(silent.stats.withLock { $0.arrivals.count } == 8)
        }
    }

    @Test("one origin holds at most thumbnail.maxInFlightPerOrigin places (half of maxInFlight): past it a request for its images is 503 overloaded with Retry-After at once, whether it would share a download, repeat a request or wait for a slot, while another origin and the origin's memory hits are answered; the places come back")
    func originShareOfPlaces() async throws {
        try await withTwoOrigins({ settings in
            settings.deadline = .seconds(600)
            settings.maxInFlight = 12
        }) { silent, other, endpoint in
            #expect(endpoint.settings.effectiveMaxInFlightPerOrigin == 6)
            func ask(_ path: String) async -> ImageResponse {
                await endpoint.respond(to: HTTPRequest(method: .get, scheme: "http", authority: "test", path: path))
            }
            func thumbnail(_ url: URL, _ width: Int) -> String {
                "/thumbnail?url=\(url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&w=\(width)"
            }
            silent.serve("/image.gif", SyntheticImages.manyFrameGIF(frames: 1), contentType: "image/gif")
            let warm = await ask(thumbnail(silent.url("/image.gif"), 10))
            #expect(warm.status == .ok, "\(warm.status)")
            // Six that wait on the silent origin: two sizes of one URL (one download), the
            // second again (one job), and three more URLs (download slots, 4 per origin).
            let waiting = [thumbnail(silent.url("/gate/a"), 10), thumbnail(silent.url("/gate/a"), 11), thumbnail(silent.url("/gate/a"), 11),
                           thumbnail(silent.url("/gate/b"), 10), thumbnail(silent.url("/gate/c"), 10), thumbnail(silent.url("/gate/d"), 10)]
            let held = waiting.map { path in Task { await ask(path) } }
            #expect(await eventually { endpoint.requestsInFlight == 6 })
            // The seventh for that origin, whatever it asks, is shed before any work.
            let a = silent.url("/gate/a").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            for path in [thumbnail(silent.url("/gate/a"), 12), thumbnail(silent.url("/gate/a"), 11), thumbnail(silent.url("/gate/e"), 10),
                         "/info?url=\(a)", "/placeholder?url=\(a)"] {
                let shed = await ask(path)
                #expect(shed.status == .serviceUnavailable && shed.headerFields[.retryAfter] == "1", "\(path): \(shed.status)")
                #expect(String(decoding: shed.body, as: UTF8.self).contains("\"overloaded\""), "\(path)")
            }
            #expect(!silent.stats.withLock { $0.arrivals }.contains("e"), "a shed request never reaches the origin")
            // Another origin still has the other six places.
            let elsewhere = await ask(thumbnail(other.url("/status/404"), 10))
            #expect(elsewhere.status == .notFound, "\(elsewhere.status)")
            // A memory hit of the saturated origin is still answered, by respond(to:) (the router's door).
            let hit = await ask(thumbnail(silent.url("/image.gif"), 10))
            #expect(hit.status == .ok && hit.headerFields[.imageSource] == "memory", "\(hit.status)")
            silent.openGate()
            for task in held { #expect(await task.value.status != .serviceUnavailable) }
            #expect(endpoint.requestsInFlight == 0)
            // The places came back: the origin is asked again.
            let again = await ask(thumbnail(silent.url("/gate/f"), 10))
            #expect(again.status != .serviceUnavailable && silent.stats.withLock { $0.arrivals }.contains("f"), "\(again.status)")
        }
    }

    @Test("a stranger's URL that answers 500 does not close its origin: a 500 is about the URL, not the origin's health")
    func internalErrorsKeepTheOriginOpen() async throws {
        try await withOrigin { origin, manager, _ in
            let endpoint = try endpoint(manager, origin: origin) { $0.blockPrivateAddresses = false }
            #expect(endpoint.settings.circuitBreakerFailures == 5, "the service's breaker is on")
            for (index, status) in [500, 501, 505].enumerated() {
                for attempt in 0..<6 {
                    let answer = await get(endpoint, origin.url("/status/\(status)"))
                    #expect(answer.status == .badGateway, "\(status), attempt \(attempt): \(answer.status)")
                }
                #expect(origin.requestCount(path: "/status/\(status)") == 6, "every request reached the origin (\(index))")
            }
            // The same origin failing as a whole still opens it.
            for _ in 0..<5 { _ = await get(endpoint, origin.url("/status/502")) }
            let open = await get(endpoint, origin.url("/status/500"))
            #expect(open.status == .serviceUnavailable && origin.requestCount(path: "/status/500") == 6, "\(open.status)")
        }
    }
}

