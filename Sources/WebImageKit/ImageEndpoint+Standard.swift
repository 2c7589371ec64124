public import Configuration
import Foundation
import WebImage
import WebImageConfiguration
public import WebImageHTTP
import WebImageVips

extension ImageEndpoint.Settings {
    /// The keys an endpoint built by ``standard(config:presetNames:)`` reads: the
    /// endpoint's own, plus `thumbnail.watermarks`.
    public static let standardKeys: Set<String> = keys.union(["thumbnail.watermarks", "thumbnail.fonts"])

    /// The pipeline defaults of a service that loads URLs its users choose, to put
    /// below every configuration layer (`ConfigLayers.reader(defaults:)`): the SSRF
    /// guard on; four downloads per origin at once (an origin that accepts
    /// connections and never answers holds at most four slots) among 32 at once
    /// (the library's 6 would let two such origins hold every slot, stalling
    /// every other origin until `loader.timeout`); an origin answered
    /// 503 at once for 30 s after five transient failures in a row; and 64 MiB of
    /// memory tier for finished thumbnails' bytes (the endpoint loads bytes only,
    /// so no decoded image is kept); and 8 MiB of recent scaled JPEG decodes,
    /// kept 10 s for the other sizes of the same photo (`turbojpeg.reuse`).
    /// `webimage serve` and the example use them.
    public static let serviceDefaults: [String: String] = [
        "loader.blockPrivateAddresses": "true",
        "loader.maxConcurrentPerHost": "4",
        "loader.maxConcurrent": "32",
        "loader.circuitBreaker.failures": "5",
        "memory.costLimit": "64MiB",
        // Other sizes of a photo asked for close together start from its scaled decode.
        "turbojpeg.reuse": "8MiB",
    ]

    /// The endpoint's settings with the standard plugins' parts: `t=` in
    /// ``TransformSpec``'s grammar, libvips' placeholders, and
    /// `thumbnail.watermarks` (a directory of PNGs that `t=watermark:NAME` may
    /// use, decoded once here; without it watermarks are refused). Presets are
    /// checked against that grammar.
    /// - Throws: `WebImageError(.invalidArgument)` naming the key of a bad value.
    public static func standard(config: ConfigReader, presetNames: [String] = []) throws -> Self {
        var settings = try Self(config: config, presetNames: presetNames)
        var overlays: [String: ImageTransformers.Watermark.Overlay]?
        let values = ConfigValues(config)
        if let path = values.text("thumbnail.watermarks") {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw values.invalid("thumbnail.watermarks", path, "a directory of PNG files")
            }
            var found: [String: ImageTransformers.Watermark.Overlay] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: path) where name.hasSuffix(".png") {
                let file = URL(fileURLWithPath: path).appendingPathComponent(name)
                do {
                    found[String(name.dropLast(4))] = try ImageTransformers.Watermark.Overlay(data: try TransformSpec.readWatermark(at: file))
                } catch {
                    let reason = (error as? WebImageError)?.message ?? error.localizedDescription
                    throw WebImageError(.invalidArgument, "thumbnail.watermarks: \(file.path) is not a usable watermark: \(reason)")
                }
            }
            overlays = found
        }
        let watermarks = overlays
        let fonts = values.list("thumbnail.fonts") ?? [ImageTransformers.TextWatermark.defaultFont]
        if let named = values.list("thumbnail.fonts") {
            // A family fontconfig does not have would be drawn in another without a word.
            for font in named where ImageTransformers.TextWatermark.isInstalled(font) == false {
                throw values.invalid("thumbnail.fonts", font, "a font family installed here (fc-list : family lists them), or sans, serif or monospace")
            }
        }
        settings.transformParser = { spec, maxSteps, maxSide in
            try TransformSpec.parse(spec, limits: TransformSpec.Limits(maxSteps: maxSteps, maxSide: maxSide, fonts: fonts)) { name in
                guard let watermarks else {
                    throw WebImageError(.invalidArgument, "watermark '\(name)': watermarks are not enabled here")
                }
                guard let overlay = watermarks[name] else {
                    throw WebImageError(.invalidArgument, "watermark '\(name)': no such watermark; known: \(watermarks.keys.sorted().joined(separator: ", "))")
                }
                return overlay
            }
        }
        settings.placeholderMaker = { manager, url, context in try await manager.placeholders(for: url, context: context) }
        try settings.validatePresets()
        return settings
    }
}
