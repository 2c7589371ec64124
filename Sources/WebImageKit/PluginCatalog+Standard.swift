import Configuration
public import Foundation
import WebImage
public import WebImageConfiguration
import WebImageCurl
import WebImageLMDB
import WebImageRedis
import WebImageS3
import WebImageTurboJPEG
import WebImageVips

extension PluginCatalog {
    /// Every plugin in the package: stores `lmdb`, `filesystem`, `memory`, and
    /// `redis` and `s3` for the shared tier; coders `turbojpeg` (JPEG thumbnails on
    /// libjpeg-turbo, asked first) and `vips`; loaders `curl` (http, https), `s3`
    /// (s3://, signed) and `file`.
    public static var standard: PluginCatalog {
        var catalog = PluginCatalog.core
        catalog.stores.registerLMDB()
        catalog.stores.registerRedis()
        catalog.stores.registerS3()
        // Listed first, so asked first: JPEG thumbnails. What it hands on, the
        // registry gives to the vips coder after it; only when `coders` leaves
        // vips out does it get a VipsImageCoder of its own, with the same vips.* options.
        // `turbojpeg.reuse`: bytes of recent scaled decodes kept for the other
        // sizes of the same file (0, the default, keeps none; serve's default is
        // 8 MiB), for `turbojpeg.reuseWindow` (10 s): see ScaledDecodeReuse.
        catalog.registerCoder(name: "turbojpeg", keys: ["turbojpeg.reuse", "turbojpeg.reuseWindow"]) { config in
            let values = ConfigValues(config)
            let reuseBytes = try values.bytes("turbojpeg.reuse") ?? 0
            let window = try values.duration("turbojpeg.reuseWindow") ?? .seconds(10)
            guard window > .zero else { throw values.invalid("turbojpeg.reuseWindow", values.text("turbojpeg.reuseWindow") ?? "", "a duration above zero") }
            let reuse = reuseBytes > 0 ? ScaledDecodeReuse(maxBytes: reuseBytes, window: window) : nil
            let coders = values.list("coders")?.map { $0.lowercased() }
            guard let coders, !coders.contains("vips") else { return TurboJPEGCoder(fallback: nil, reuse: reuse) }
            return TurboJPEGCoder(fallback: VipsImageCoder(options: try vipsOptions(values)), reuse: reuse)
        }
        catalog.registerCoder(name: "vips", keys: ["vips.allowUntrusted", "vips.svg", "vips.pdf", "vips.pdfTimeLimit", "vips.pdfConcurrency", "vips.concurrency", "vips.vector"]) { config in
            let values = ConfigValues(config)
            if let threads = try values.int("vips.concurrency", minimum: 1) { VipsImageCoder.concurrency = threads }
            if let vector = try values.bool("vips.vector") { VipsImageCoder.vectorEnabled = vector }
            return VipsImageCoder(options: try vipsOptions(values))
        }
        catalog.registerLoader(name: "curl", schemes: ["http", "https"], keys: [
            "loader.maxConcurrent", "loader.maxConcurrentPerHost", "loader.timeout", "loader.maxResponseSize", "loader.blockPrivateAddresses",
            "loader.exemptAddresses", "loader.proxy", "loader.order",
        ]) { config in
            CurlLoader(configuration: try curlConfiguration(ConfigValues(config)))
        }
        // s3:// over its own curl transfers with the same loader.* settings (the
        // SSRF guard judges the endpoint); the s3.* keys are the bucket store's too.
        catalog.registerLoader(name: "s3", schemes: ["s3"], keys: Set(S3Configuration.settingKeys.map { "s3.\($0)" })) { config in
            let values = ConfigValues(config)
            return try S3Loader(configuration: try S3Configuration(values: values.scoped(to: "s3")),
                                curl: CurlLoader(configuration: try curlConfiguration(values)))
        }
        return catalog
    }

    /// The curl loader's settings from the `loader.*` keys.
    private static func curlConfiguration(_ values: ConfigValues) throws -> CurlLoader.Configuration {
        var configuration = CurlLoader.Configuration()
        if let count = try values.int("loader.maxConcurrent", minimum: 1) { configuration.maxConcurrentDownloads = count }
        if let count = try values.int("loader.maxConcurrentPerHost", minimum: 1) { configuration.maxConcurrentDownloadsPerHost = count }
        if let timeout = try values.loaderTimeout() { configuration.timeout = timeout }
        if let size = try values.loaderMaxResponseSize() { configuration.maxResponseSize = size }
        if let block = try values.bool("loader.blockPrivateAddresses") { configuration.blockPrivateAddresses = block }
        if let ranges = values.list("loader.exemptAddresses") {
            configuration.exemptAddresses = try ranges.map { text in
                guard let range = CurlLoader.AddressRange(text) else {
                    throw values.invalid("loader.exemptAddresses", text, "an address or CIDR range such as 10.0.0.0/8 or fd00::/8")
                }
                return range
            }
        }
        if let proxy = values.text("loader.proxy"), !proxy.isEmpty {
            // Checked here: curl's own complaint about a bad one quotes it whole,
            // password included, in every load's error.
            let parts = URLComponents(string: proxy)
            guard let parts, let scheme = parts.scheme?.lowercased(), ["http", "https", "socks4", "socks4a", "socks5", "socks5h"].contains(scheme),
                  parts.host?.isEmpty == false, parts.port.map({ (1...65535).contains($0) }) ?? true, parts.path.isEmpty || parts.path == "/" else {
                throw values.invalid("loader.proxy", proxy, "a proxy URL such as http://proxy.internal:3128 or socks5h://host:1080")
            }
            configuration.proxy = proxy
        }
        if let order = values.text("loader.order") {
            guard let parsed = CurlLoader.Order(rawValue: order.lowercased()) else { throw values.invalid("loader.order", order, "fifo or lifo") }
            configuration.order = parsed
        }
        return configuration
    }
}

/// Defaults of the package as a whole.
public enum WebImageKit {
    /// `$XDG_CACHE_HOME/webimage`, else `$HOME/.cache/webimage`: where the default
    /// LMDB store lives.
    public static var defaultCacheDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("webimage")
        }
        // $HOME first: Foundation's home directory comes from the password database.
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) } ?? FileManager.default.homeDirectoryForCurrentUser
        return home.appendingPathComponent(".cache/webimage")
    }
}

/// `vips.allowUntrusted`, `vips.svg` and `vips.pdf`: the coder's opt-ins. A PDF
/// opt-in where poppler-utils is missing stops the start, not the first PDF.
private func vipsOptions(_ values: ConfigValues) throws -> VipsImageCoder.Options {
    var options = VipsImageCoder.Options(allowUntrusted: try values.bool("vips.allowUntrusted") ?? false,
                                         allowSVG: try values.bool("vips.svg") ?? false, allowPDF: try values.bool("vips.pdf") ?? false)
    if let limit = try values.duration("vips.pdfTimeLimit") {
        guard limit > .zero, limit <= .seconds(60) else { throw values.invalid("vips.pdfTimeLimit", values.text("vips.pdfTimeLimit") ?? "\(limit)", "a duration from above zero to 60s") }
        options.pdfTimeLimit = limit
    }
    if let concurrency = try values.int("vips.pdfConcurrency", minimum: 1) { options.pdfConcurrency = concurrency }
    if options.allowPDF, !VipsImageCoder.Options.canDrawPDF {
        throw values.invalid("vips.pdf", "true", "possible here: PDF pages are drawn by poppler's pdftocairo and pdfinfo (Debian: poppler-utils), which are not on PATH")
    }
    return options
}
