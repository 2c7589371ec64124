public import Configuration
public import Foundation
import WebImage
import WebImageConfiguration
public import WebImageHTTP
import WebImageKit

/// The example's settings: the endpoint's (``ImageEndpoint/Settings``, every
/// `thumbnail.*` key, reached through this value by member, `settings.allowedHosts`),
/// plus where to listen and what the gallery shows.
///
/// | key | default | meaning |
/// | --- | --- | --- |
/// | `http.host` | `127.0.0.1` | address to listen on |
/// | `http.port` | `8080` | port to listen on (0: any free port) |
/// | `gallery.sources` | the bundled samples | the URLs the gallery page shows |
/// | `gallery.size` | `256` | the gallery's thumbnail box |
/// | `samples.path` | a temporary directory | where the bundled samples are written |
///
/// The `thumbnail.*` keys are in the package's docs/serving.md. The pipeline's keys
/// (`store.*`, `memory.*`, `loader.*`, `decode.*`, …) are in docs/configuration.md;
/// the service turns the SSRF guard (`loader.blockPrivateAddresses`) on unless the
/// configuration turns it off, limits downloads from one origin to 4 at once,
/// refuses an origin for 30 s after 5 transient failures in a row, and gives the
/// manager's memory tier, which holds finished thumbnails' bytes, 64 MiB.
@dynamicMemberLookup
public struct ThumbnailSettings: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// Nil: the bundled samples, served by the service itself under `/samples/`.
    public var gallerySources: [URL]?
    public var gallerySize = 256
    public var samplesDirectory: URL?
    /// The endpoint's own settings.
    public var endpoint = ImageEndpoint.Settings()

    public init() {}

    public subscript<T>(dynamicMember keyPath: WritableKeyPath<ImageEndpoint.Settings, T>) -> T {
        get { endpoint[keyPath: keyPath] }
        set { endpoint[keyPath: keyPath] = newValue }
    }

    /// The keys the example reads itself; unknown keys under these namespaces stop start-up.
    public static let keys: Set<String> = ImageEndpoint.Settings.standardKeys.union([
        "http.host", "http.port", "gallery.sources", "gallery.size", "samples.path",
    ])

    /// Reads the settings from `config`.
    /// - Parameter presetNames: the names under `thumbnail.presets` (``presetNames(file:environment:flags:)``).
    /// - Throws: `WebImageError(.invalidArgument)` naming the key of a bad value.
    public init(config: ConfigReader, presetNames: [String] = []) throws {
        endpoint = try .standard(config: config, presetNames: presetNames)
        let values = ConfigValues(config)
        if let host = values.text("http.host") { self.host = host }
        if let port = try values.int("http.port", minimum: 0) {
            guard port <= 65_535 else { throw values.invalid("http.port", String(port), "a port number") }
            self.port = port
        }
        if let sources = values.list("gallery.sources") {
            gallerySources = try sources.map { text in
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
                    throw values.invalid("gallery.sources", text, "an http or https URL")
                }
                return url
            }
        }
        if let size = try values.int("gallery.size", minimum: 16) { gallerySize = min(size, endpoint.maxDimension) }
        if let path = values.text("samples.path") { samplesDirectory = URL(fileURLWithPath: path) }
    }

    /// The service's defaults, below every layer but the library's: the library's
    /// defaults for a service (`ImageEndpoint.Settings.serviceDefaults`), and a
    /// cache directory of its own.
    static let defaults: [String: String] = ImageEndpoint.Settings.serviceDefaults.merging([
        "store.path": WebImageKit.defaultCacheDirectory.deletingLastPathComponent().appendingPathComponent("thumbnail-server").path,
    ]) { _, own in own }

    /// The layers a deployment configures the service with, highest precedence
    /// first: `flags` (values set in code, by key), `WEBIMAGE_*` environment
    /// variables (`WEBIMAGE_THUMBNAIL_ALLOWED_HOSTS`), a JSON file, then the
    /// service's defaults (SSRF guard on, no decoded-image memory cache, its own
    /// cache directory), then the library's.
    public static func reader(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                              flags: [String: String] = [:]) async throws -> ConfigReader {
        try await ConfigLayers.service(file: file, flags: flags, environment: environment, defaults: defaults, extraKeys: keys).config
    }

    /// The preset names set in any layer (`thumbnail.presets.NAME`).
    public static func presetNames(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                                   flags: [String: String] = [:]) throws -> [String] {
        try ConfigLayers.names(in: "thumbnail.presets", flags: flags, file: file, environment: environment)
    }
}
