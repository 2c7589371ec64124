import Foundation
import Hummingbird
import WebImage
import WebImageKit
import WebImageVips

/// A `/thumbnail` request's query:
///
/// | parameter | meaning |
/// | --- | --- |
/// | `url` | the image, http or https |
/// | `w`, `h` | the box, 1 to `thumbnail.maxDimension` (after `dpr`); a missing side is unbounded up to the maximum |
/// | `format` | `auto` (from `Accept`, the default), `avif`, `webp`, `jpeg`, `png`, `gif` |
/// | `crop` | `centre`, `attention` or `entropy`: fill the `w`x`h` box exactly, cropping to that part (needs both sides) |
/// | `dpr` | 0.1 to 5: multiplies `w` and `h` (and the sizes in `t`) for high-density screens |
/// | `t` | transformers after the thumbnail, as `webimage load --transform` writes them (`sharpen;round:12`); `watermark:NAME` takes NAME from `thumbnail.watermarks` |
struct ThumbnailQuery: Sendable {
    var url: URL
    var box: PixelSize
    /// nil: `auto`, negotiated from the request's `Accept`.
    var format: ImageFormat?
    var crop: CropFocus?
    var transform: (any ImageTransformer)?

    /// The formats a thumbnail can be asked in by name.
    static let formats: [ImageFormat] = [.avif, .webp, .jpeg, .png, .gif]

    /// Parses `name` as a thumbnail format: nil for `auto`.
    static func format(named name: String) -> ImageFormat?? {
        if name.lowercased() == "auto" { return .some(nil) }
        guard let format = ImageFormat(name: name), formats.contains(format) else { return nil }
        return .some(format)
    }

    /// `url=`, checked: an absolute http or https URL with a host.
    static func sourceURL(_ query: (String) -> String?) throws -> URL {
        guard let text = query("url"), !text.isEmpty else {
            throw WebImageError(.invalidArgument, "the query needs url=, an http or https URL of an image")
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = url.host, !host.isEmpty
        else {
            throw WebImageError(.invalidURL, "url='\(text)' is not an absolute http or https URL")
        }
        return url
    }

    /// - Parameters:
    ///   - query: the value of a query parameter by name, percent-decoded.
    ///   - watermark: turns a `watermark:NAME` into its overlay, decoded earlier.
    init(_ query: (String) -> String?, settings: ThumbnailSettings,
         watermark: (String) throws -> ImageTransformers.Watermark.Overlay = TransformSpec.refuseWatermarkOverlays) throws {
        url = try Self.sourceURL(query)
        var dpr = 1.0
        if let raw = query("dpr") {
            guard let value = Double(raw), value.isFinite, (0.1...5).contains(value) else {
                throw WebImageError(.invalidArgument, "dpr='\(raw)' is not a number from 0.1 to 5")
            }
            dpr = value
        }
        func side(_ name: String) throws -> Int? {
            guard let raw = query(name) else { return nil }
            guard let value = Int(raw), value >= 1, case let scaled = Int((Double(value) * dpr).rounded()), (1...settings.maxDimension).contains(scaled) else {
                throw WebImageError(.invalidArgument, "\(name)='\(raw)' is not a whole number from 1 to \(settings.maxDimension)\(dpr == 1 ? "" : " after dpr=\(dpr)")")
            }
            return Int((Double(value) * dpr).rounded())
        }
        let width = try side("w"), height = try side("h")
        guard width != nil || height != nil else {
            throw WebImageError(.invalidArgument, "the query needs w= or h= (or both), the box to fit the image in")
        }
        box = PixelSize(width: width ?? settings.maxDimension, height: height ?? settings.maxDimension)
        if let name = query("crop") {
            guard let focus = CropFocus(parsing: name) else {
                throw WebImageError(.invalidArgument, "crop='\(name)' is not centre, attention, entropy or fp:X:Y (a focal point, X and Y from 0 to 1)")
            }
            guard width != nil, height != nil else { throw WebImageError(.invalidArgument, "crop= fills a box: give both w= and h=") }
            crop = focus
        }
        if let name = query("format") {
            guard let format = Self.format(named: name) else {
                throw WebImageError(.invalidArgument, "format='\(name)' is not auto, avif, webp, jpeg, png or gif")
            }
            self.format = format
        } else {
            format = settings.defaultFormat
        }
        if let spec = query("t"), !spec.isEmpty {
            let scaled = dpr == 1 ? spec : spec + ";dpr:\(dpr)"
            transform = try TransformSpec.parse(scaled, limits: TransformSpec.Limits(maxSteps: settings.maxSteps, maxSide: settings.maxDimension),
                                                watermarkOverlay: watermark)
        }
    }
}
