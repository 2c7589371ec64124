public import Foundation

/// What a coder is asked to do while encoding.
///
/// The manager encodes derived results (thumbnails, transforms) with
/// ``ImageManager/Configuration/encodeOptions``, or a load's
/// ``ImageContext/encodeOptions``; options other than the defaults become part
/// of the derived cache key (``key``).
public struct EncodeOptions: Hashable, Sendable {
    /// Lossy quality, 1...100.
    public var quality: Int = 80
    /// Lossless where the format offers both (WebP, AVIF, HEIC).
    public var lossless: Bool = false
    /// Progressive or interlaced output where the format has it (JPEG: SOF2 and
    /// several scans; PNG and GIF: interlaced).
    public var progressive: Bool = false
    /// Keep EXIF, ICC and XMP metadata. Off by default: metadata leaks (GPS) and costs bytes.
    public var keepMetadata: Bool = false
    /// Keep the source's ICC profile, and its pixels in that profile's colour
    /// space, instead of converting to sRGB; in every format that carries a
    /// profile (JPEG, PNG, WebP, AVIF, HEIC, TIFF; GIF carries none). Off by
    /// default, as in sharp and imgproxy: 8-bit sRGB without a profile is what
    /// every browser shows the same and costs no bytes. The manager decodes with
    /// ``DecodeOptions/keepColorProfile`` set to match.
    public var keepColorProfile: Bool = false
    /// CPU spent for smaller files, on the format's own scale: WebP's method
    /// (0...6), AVIF/HEIC's effort (0...9; higher is slower and smaller) and
    /// JPEG XL's (3...9 in libvips; lower values are taken as 3).
    /// Values over a format's top are taken as its top. nil: the format's
    /// default here (``defaultEffort(for:)``), chosen from the benchmark suite.
    public var effort: Int?
    /// Chroma subsampling for lossy formats that have a choice.
    public var chromaSubsampling: ChromaSubsampling = .auto
    /// What transparent pixels become in a format without alpha (JPEG). White by
    /// default; black, libvips' own default, is what users notice.
    public var background: RGBColor = .white
    /// A size to fit: the highest quality from ``quality`` down to
    /// ``minimumQuality`` whose encoding is at most this many bytes, found by
    /// bisection (about six encodes), for the lossy formats (JPEG, WebP, AVIF,
    /// HEIF) when not ``lossless``. When even ``minimumQuality`` does not fit, its
    /// encoding is the result: a target, not a guarantee. Nil: ``quality`` as it is.
    public var maxBytes: Int?
    /// The floor of the search for ``maxBytes``. Default 30: below it, JPEG and
    /// WebP show their blocks.
    public var minimumQuality: Int = 30

    /// How lossy encoders store colour.
    public enum ChromaSubsampling: String, Hashable, Sendable, CaseIterable {
        /// The encoder's choice: JPEG and AVIF/HEIC subsample below quality 90.
        case auto
        /// Always 4:2:0: smaller files.
        case on
        /// Never (4:4:4; WebP, which is always 4:2:0, uses its sharper "smart" subsampling):
        /// sharper red and blue edges in text and graphics.
        case off
    }

    public init(quality: Int = 80, lossless: Bool = false, progressive: Bool = false, keepMetadata: Bool = false,
                keepColorProfile: Bool = false, effort: Int? = nil, chromaSubsampling: ChromaSubsampling = .auto,
                background: RGBColor = .white) {
        self.quality = min(100, max(1, quality))
        self.lossless = lossless
        self.progressive = progressive
        self.keepMetadata = keepMetadata
        self.keepColorProfile = keepColorProfile
        self.effort = effort.map { min(9, max(0, $0)) }
        self.chromaSubsampling = chromaSubsampling
        self.background = background
    }

    /// What the manager encodes derived results with unless configured: quality
    /// 90, everything else as above.
    public static let derivedDefault = EncodeOptions(quality: 90)

    /// The effort used when ``effort`` is nil: WebP 2, AVIF and HEIC 0, JPEG XL 5. From
    /// `compare.py encoders` on a 2400x1600 photo at quality 80
    /// (docs/performance.md, "Encoders"): WebP effort 2 took 3.4x a JPEG's time
    /// for a file 3% larger than effort 4's at half its time; AVIF effort 0 took
    /// 3.8x, and efforts 2 and 4 took 16x and 101x for files no smaller on the
    /// photo (7% and 18% smaller on a synthetic image). libvips' own defaults
    /// (WebP 4, AVIF 4) are what made WebP "20x slower than JPEG". JPEG XL
    /// (libjxl 0.7) at effort 5 wrote the same file as effort 7 at 0.63x its CPU,
    /// and a file 42% smaller than effort 3's at the same error (effort 3 needed
    /// quality 87 to match effort 5's quality 80).
    public static func defaultEffort(for format: ImageFormat) -> Int {
        switch format {
        case .webp: 2
        case .jxl: 5
        default: 0
        }
    }

    /// The effort for a format: ``effort`` or the default, within the format's range.
    public func effort(for format: ImageFormat) -> Int {
        let value = effort ?? Self.defaultEffort(for: format)
        switch format {
        case .webp: return min(6, value)
        case .jxl: return max(3, value)
        default: return value
        }
    }

    /// Encodes with `encode`, fitting ``maxBytes`` by the quality when it is set
    /// and `format` is lossy (see ``maxBytes``).
    public func fitting(_ format: ImageFormat, _ encode: (EncodeOptions) throws -> Data) rethrows -> Data {
        guard let limit = maxBytes, !lossless, ([.jpeg, .webp, .avif, .heif, .jxl] as [ImageFormat]).contains(format) else { return try encode(self) }
        var options = self
        let top = max(1, min(100, quality)), floor = max(1, min(top, minimumQuality))
        options.quality = top
        let best = try encode(options)
        guard best.count > limit else { return best }
        // The highest quality in floor..<top that fits; the floor's bytes if none does.
        var low = floor, high = top - 1
        var fit: Data?
        var floorBytes: Data?
        while low <= high {
            let middle = (low + high + 1) / 2
            options.quality = middle
            let bytes = try encode(options)
            if middle == floor { floorBytes = bytes }
            if bytes.count <= limit {
                fit = bytes
                low = middle + 1
            } else {
                high = middle - 1
            }
        }
        if let fit { return fit }
        if let floorBytes { return floorBytes }
        options.quality = floor
        return try encode(options)
    }

    /// A short, stable text of every field: part of derived cache keys
    /// (`q90,e2,prog,icc,bg=ffffff,sub=off`), fields at their defaults left out.
    public var key: String {
        var parts = ["q\(quality)"]
        if lossless { parts.append("lossless") }
        if progressive { parts.append("prog") }
        if keepMetadata { parts.append("meta") }
        if keepColorProfile { parts.append("icc") }
        if let effort { parts.append("e\(effort)") }
        if chromaSubsampling != .auto { parts.append("sub=\(chromaSubsampling.rawValue)") }
        if background != .white { parts.append("bg=\(background)") }
        if let maxBytes { parts.append("max=\(maxBytes)" + (minimumQuality == 30 ? "" : ",min=q\(minimumQuality)")) }
        return parts.joined(separator: ",")
    }
}
