public import Configuration
public import Foundation
public import WebImage
import WebImageConfiguration
import WebImageKit

/// The service's own settings, read from the same configuration as the pipeline.
///
/// | key | default | meaning |
/// | --- | --- | --- |
/// | `http.host` | `127.0.0.1` | address to listen on |
/// | `http.port` | `8080` | port to listen on (0: any free port) |
/// | `thumbnail.allowedHosts` | empty: nothing | hosts `/thumbnail` fetches from (``HostAllowList``) |
/// | `thumbnail.maxDimension` | `2048` | the largest `w` or `h` accepted |
/// | `thumbnail.defaultFormat` | `auto` | the format when the request names none: `auto` picks AVIF, WebP, JPEG, PNG or GIF from `Accept` and the image |
/// | `thumbnail.watermarks` | none | a directory of PNGs that `t=watermark:NAME` may use (`NAME.png`); without it watermarks are refused |
/// | `thumbnail.signingKey` | none | a secret of 16 bytes or more: `/thumbnail` and `/placeholder` then answer only URLs signed with it (``URLSigner``) |
/// | `thumbnail.cacheMaxAge` | `1d` | `Cache-Control: public, max-age=…` of thumbnails |
/// | `thumbnail.maxSteps` | `8` | the most steps a `t=` spec may have; every size in it is bounded by `thumbnail.maxDimension` |
/// | `thumbnail.deadline` | `30s` | the longest one request may take: its download is cancelled and its transform chain stopped, answered 504 |
/// | `thumbnail.shutdownGrace` | `20s` | on SIGTERM, how long requests in flight may finish; then they are cancelled (503) and the process exits |
/// | `thumbnail.maxInFlight` | `256` | `/thumbnail` and `/placeholder` requests answered at once; past it, 503 with `Retry-After: 1` before any work |
/// | `gallery.sources` | the bundled samples | the URLs the gallery page shows |
/// | `gallery.size` | `256` | the gallery's thumbnail box |
/// | `samples.path` | a temporary directory | where the bundled samples are written |
///
/// The pipeline's keys (`store.*`, `memory.*`, `loader.*`, `decode.*`, …) are in
/// the package's docs/configuration.md; the service turns the SSRF guard
/// (`loader.blockPrivateAddresses`) on unless the configuration turns it off,
/// limits downloads from one origin to 4 at once (`loader.maxConcurrentPerHost`),
/// refuses an origin for 30 s after 5 transient failures in a row
/// (`loader.circuitBreaker.failures`: answered 503 without asking it), and
/// gives the manager's memory tier, which holds finished thumbnails' bytes,
/// `memory.costLimit = 64MiB`.
public struct ThumbnailSettings: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var allowedHosts = HostAllowList([])!
    public var maxDimension = 2048
    /// nil: `auto`, negotiated per request from `Accept`.
    public var defaultFormat: ImageFormat? = nil
    /// Where `t=watermark:NAME` finds `NAME.png`; nil refuses watermarks.
    public var watermarkDirectory: URL?
    public var cacheMaxAge: Duration = .seconds(86_400)
    /// `/thumbnail` and `/placeholder` requests answered at once; the next is shed
    /// with 503. Each can hold a downloaded original (up to
    /// `loader.maxResponseSize`) while it waits for a decode thread, so this
    /// bounds the memory a burst can take.
    public var maxInFlight = 256
    /// The most steps a `t=` spec may have.
    public var maxSteps = 8
    /// The longest one request may take (download, decode, chain, encode).
    public var deadline: Duration = .seconds(30)
    /// On SIGTERM: how long requests in flight may finish before they are cancelled.
    public var shutdownGrace: Duration = .seconds(20)
    /// With a signer, `/thumbnail` and `/placeholder` answer only signed URLs
    /// (`thumbnail.signingKey`, at least 16 bytes). Nil: unsigned URLs are served.
    public var signer: URLSigner?
    /// Nil: the bundled samples, served by the service itself under `/samples/`.
    public var gallerySources: [URL]?
    public var gallerySize = 256
    public var samplesDirectory: URL?

    public init() {}

    /// The keys the service reads itself; unknown keys under these namespaces stop start-up.
    public static let keys: Set<String> = [
        "http.host", "http.port", "thumbnail.allowedHosts", "thumbnail.maxDimension", "thumbnail.defaultFormat",
        "thumbnail.cacheMaxAge", "thumbnail.watermarks", "thumbnail.signingKey", "thumbnail.maxInFlight",
        "thumbnail.maxSteps", "thumbnail.deadline", "thumbnail.shutdownGrace",
        "gallery.sources", "gallery.size", "samples.path",
    ]

    /// Reads the settings from `config`.
    /// - Throws: `WebImageError(.invalidArgument)` naming the key of a bad value.
    public init(config: ConfigReader) throws {
        let values = ConfigValues(config)
        if let host = values.text("http.host") { self.host = host }
        if let port = try values.int("http.port", minimum: 0) {
            guard port <= 65_535 else { throw values.invalid("http.port", String(port), "a port number") }
            self.port = port
        }
        if let patterns = values.list("thumbnail.allowedHosts") {
            guard let list = HostAllowList(patterns) else {
                throw values.invalid("thumbnail.allowedHosts", patterns.joined(separator: ","), "a list of host, host:port, *.domain or *")
            }
            allowedHosts = list
        }
        if let size = try values.int("thumbnail.maxDimension", minimum: 1) { maxDimension = size }
        if let name = values.text("thumbnail.defaultFormat") {
            guard let format = ThumbnailQuery.format(named: name) else {
                throw values.invalid("thumbnail.defaultFormat", name, "auto, avif, webp, jpeg, png or gif")
            }
            defaultFormat = format
        }
        if let age = try values.duration("thumbnail.cacheMaxAge") { cacheMaxAge = age }
        if let limit = try values.int("thumbnail.maxInFlight", minimum: 1) { maxInFlight = limit }
        if let steps = try values.int("thumbnail.maxSteps", minimum: 1) { maxSteps = steps }
        if let deadline = try values.duration("thumbnail.deadline") {
            guard deadline > .zero else { throw values.invalid("thumbnail.deadline", "\(deadline)", "a duration longer than zero") }
            self.deadline = deadline
        }
        if let grace = try values.duration("thumbnail.shutdownGrace") { shutdownGrace = max(.zero, grace) }
        if let sources = values.list("gallery.sources") {
            gallerySources = try sources.map { text in
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
                    throw values.invalid("gallery.sources", text, "an http or https URL")
                }
                return url
            }
        }
        if let size = try values.int("gallery.size", minimum: 16) { gallerySize = min(size, maxDimension) }
        if let path = values.text("samples.path") { samplesDirectory = URL(fileURLWithPath: path) }
        if let key = values.text("thumbnail.signingKey") {
            guard let signer = URLSigner(key: key) else {
                // The value is a secret: the message gives its length, never the key.
                throw WebImageError(.invalidArgument, "thumbnail.signingKey: \(key.utf8.count) bytes is too short to sign with; use at least \(URLSigner.minimumKeyLength) (32 random bytes in hex, say)")
            }
            self.signer = signer
        }
        if let path = values.text("thumbnail.watermarks") {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw values.invalid("thumbnail.watermarks", path, "a directory of PNG files")
            }
            watermarkDirectory = URL(fileURLWithPath: path)
        }
    }

    /// The layers a deployment configures the service with, highest precedence
    /// first: `flags` (values set in code, by key), `WEBIMAGE_*` environment
    /// variables (`WEBIMAGE_THUMBNAIL_ALLOWED_HOSTS`), a JSON file, then the
    /// service's defaults (SSRF guard on, no decoded-image memory cache, its own
    /// cache directory), then the library's.
    public static func reader(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                              flags: [String: String] = [:]) async throws -> ConfigReader {
        let defaults: [String: String] = [
            "loader.blockPrivateAddresses": "true",
            // An origin that accepts connections and never answers holds at most
            // four download slots until their timeouts; other origins go on.
            "loader.maxConcurrentPerHost": "4",
            // An origin that failed transiently five times in a row (down, timing
            // out, 5xx) is answered 503 at once for 30 s, then tried once.
            "loader.circuitBreaker.failures": "5",
            // The manager's memory tier holds the finished thumbnails' bytes (the
            // service loads bytes only, so no decoded image is kept).
            "memory.costLimit": "64MiB",
            "store.path": WebImageKit.defaultCacheDirectory.deletingLastPathComponent().appendingPathComponent("thumbnail-server").path,
        ]
        return try await ConfigLayers.reader(flags: flags, file: file, environment: environment, defaults: defaults,
                                             knownKeys: PluginCatalog.standard.knownKeys.union(keys))
    }
}
