import Configuration
import Foundation
import HTTPTypes
import Tracing
import WebImage
import WebImageConfiguration
import WebImageHTTP
import WebImageKit
import WebImageSamples
import WebImageTestSupport

/// A real origin on loopback serving the sample images, a manager with every
/// standard plugin (curl, libvips, an LMDB store in a temporary directory), and
/// an endpoint over them configured by `settings` (configuration keys).
struct EndpointFixture {
    let origin: TestHTTPServer
    let manager: ImageManager
    let endpoint: ImageEndpoint
    let directory: URL
    /// The samples' bytes by name (`photo-1.jpg`, `logo.png`, `oriented-6.jpg`, …).
    let samples: [String: Data]

    static func make(_ settings: [String: String] = [:], presets: [String] = [], tracer: (any Tracer)? = nil,
                     configure: (inout ImageEndpoint.Settings) -> Void = { _ in }) async throws -> EndpointFixture {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("endpoint-\(UUID().uuidString)")
        let names = try await onThread { try SampleImages.write(to: directory.appendingPathComponent("samples")) }
        let origin = try await TestHTTPServer.start()
        var samples: [String: Data] = [:]
        for name in names {
            let data = try Data(contentsOf: directory.appendingPathComponent("samples").appendingPathComponent(name))
            samples[name] = data
            origin.serve("/img/\(name)", data, contentType: ImageFormat.sniff(data)?.mimeType ?? "application/octet-stream")
        }
        var flags: [String: String] = [
            "store.kind": "lmdb", "store.path": directory.appendingPathComponent("cache").path,
            "thumbnail.allowedHosts": "127.0.0.1:\(origin.port)",
            // The origin is on loopback, which a service refuses by default.
            "thumbnail.blockPrivateAddresses": "false",
            // Generous, as every wait in the tests is: beside two CPU burners a cold
            // thumbnail in the full parallel suite once took past 30 s. Stretched
            // further under a sanitizer (TestTiming).
            "loader.timeout": "\(Int(30 * TestTiming.scale))s",
            "thumbnail.deadline": "\(Int(60 * TestTiming.scale))s",
        ]
        flags.merge(settings) { _, new in new }
        let config = try await ConfigLayers.reader(
            flags: flags, file: nil, environment: [:],
            knownKeys: PluginCatalog.standard.knownKeys.union(ImageEndpoint.Settings.standardKeys),
            keyFamilies: ImageEndpoint.Settings.keyFamilies)
        var endpointSettings = try ImageEndpoint.Settings.standard(config: config, presetNames: presets)
        configure(&endpointSettings)
        var configuration = try ImageManager.Configuration(config: config, catalog: .standard, defaultStorePath: directory)
        configuration.tracer = tracer
        let manager = ImageManager(configuration: configuration)
        return EndpointFixture(origin: origin, manager: manager, endpoint: ImageEndpoint(manager: manager, settings: endpointSettings),
                               directory: directory, samples: samples)
    }

    /// `url=` of a sample on the origin, percent-encoded for a query.
    func source(_ name: String) -> String {
        origin.url("/img/\(name)").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
    }

    func get(_ pathAndQuery: String, method: HTTPRequest.Method = .get, _ fields: HTTPFields = [:]) async -> ImageResponse {
        await endpoint.respond(to: HTTPRequest(method: method, scheme: "http", authority: "test", path: pathAndQuery, headerFields: fields))
    }

    /// The JSON object of an error or info response.
    static func json(_ response: ImageResponse) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] ?? [:]
    }

    func close() async {
        _ = await manager.shutdown(gracePeriod: .seconds(5))
        await origin.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}
