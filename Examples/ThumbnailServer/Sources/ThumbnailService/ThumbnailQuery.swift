import Foundation
import Hummingbird
import WebImage

/// A `/thumbnail` request's query: `url` (http or https), `w` and/or `h` (the box,
/// 1 to `thumbnail.maxDimension`; a missing side is unbounded up to the maximum),
/// and `format` (`webp`, `jpeg` or `png`; `thumbnail.defaultFormat` when absent).
struct ThumbnailQuery: Sendable, Equatable {
    var url: URL
    var box: PixelSize
    var format: ImageFormat

    /// The formats a thumbnail can be asked in.
    static let formats: [ImageFormat] = [.webp, .jpeg, .png]

    /// - Parameter query: the value of a query parameter by name, percent-decoded.
    init(_ query: (String) -> String?, settings: ThumbnailSettings) throws {
        guard let text = query("url"), !text.isEmpty else {
            throw WebImageError(.invalidArgument, "the query needs url=, an http or https URL of an image")
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = url.host, !host.isEmpty
        else {
            throw WebImageError(.invalidURL, "url='\(text)' is not an absolute http or https URL")
        }
        func side(_ name: String) throws -> Int? {
            guard let raw = query(name) else { return nil }
            guard let value = Int(raw), (1...settings.maxDimension).contains(value) else {
                throw WebImageError(.invalidArgument, "\(name)='\(raw)' is not a whole number from 1 to \(settings.maxDimension)")
            }
            return value
        }
        let width = try side("w"), height = try side("h")
        guard width != nil || height != nil else {
            throw WebImageError(.invalidArgument, "the query needs w= or h= (or both), the box to fit the image in")
        }
        self.url = url
        self.box = PixelSize(width: width ?? settings.maxDimension, height: height ?? settings.maxDimension)
        if let name = query("format") {
            guard let format = ImageFormat(name: name), ThumbnailQuery.formats.contains(format) else {
                throw WebImageError(.invalidArgument, "format='\(name)' is not webp, jpeg or png")
            }
            self.format = format
        } else {
            self.format = settings.defaultFormat
        }
    }
}
