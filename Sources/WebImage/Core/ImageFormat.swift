import Foundation

/// A container format of encoded image bytes.
///
/// Formats are recognised by their magic bytes (see ``sniff(_:)``), never by a
/// URL's extension or a server's `Content-Type`, both of which lie often.
public struct ImageFormat: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue.lowercased() }

    public static let jpeg = ImageFormat(rawValue: "jpeg")
    public static let png = ImageFormat(rawValue: "png")
    public static let gif = ImageFormat(rawValue: "gif")
    public static let tiff = ImageFormat(rawValue: "tiff")
    public static let webp = ImageFormat(rawValue: "webp")
    public static let heif = ImageFormat(rawValue: "heif")
    public static let avif = ImageFormat(rawValue: "avif")
    public static let jxl = ImageFormat(rawValue: "jxl")
    public static let svg = ImageFormat(rawValue: "svg")
    public static let pdf = ImageFormat(rawValue: "pdf")
    public static let bmp = ImageFormat(rawValue: "bmp")

    public var description: String { rawValue }

    /// The usual file extension, without the dot (`jpg` for JPEG).
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        case .tiff: "tif"
        case .heif: "heic"
        default: rawValue
        }
    }

    /// The IANA media type, as sent in `Content-Type`.
    public var mimeType: String {
        switch self {
        case .svg: "image/svg+xml"
        case .pdf: "application/pdf"
        default: "image/\(rawValue)"
        }
    }

    /// Parses a name as users write it: `jpeg`, `jpg`, `png`, `webp`, `tif`, ...
    public init?(name: String) {
        switch name.lowercased() {
        case "jpeg", "jpg": self = .jpeg
        case "png": self = .png
        case "gif": self = .gif
        case "tiff", "tif": self = .tiff
        case "webp": self = .webp
        case "heif", "heic": self = .heif
        case "avif": self = .avif
        case "jxl": self = .jxl
        case "svg": self = .svg
        case "pdf": self = .pdf
        case "bmp": self = .bmp
        default: return nil
        }
    }
}
