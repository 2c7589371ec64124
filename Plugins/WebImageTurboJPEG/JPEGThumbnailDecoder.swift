internal import CJPEGTurbo
internal import CJPEGTurboOps
import Foundation
package import WebImage
import WebImageVips

/// One thumbnail decode; `nil` from ``thumbnail()`` means "hand it to the fallback".
/// `package` so that the tests can see which path a file took.
package struct JPEGThumbnailDecoder {
    let bytes: UnsafeRawBufferPointer
    let options: DecodeOptions
    let box: PixelSize
    let directPixelLimit: Int
    let reuse: ScaledDecodeReuse?

    package init(bytes: UnsafeRawBufferPointer, options: DecodeOptions, box: PixelSize, directPixelLimit: Int = TurboJPEGCoder.defaultDirectPixelLimit,
                 reuse: ScaledDecodeReuse? = nil) {
        self.bytes = bytes
        self.options = options
        self.box = box
        self.directPixelLimit = directPixelLimit
        self.reuse = reuse
    }

    /// Why a decode was handed to the fallback.
    package enum Decline: Equatable, Sendable { case unreadableHeader, colourSpace, precision, overPixelLimit, noShrink }

    package struct Declined: Error { package let reason: Decline }

    /// How the scaled pixels were decoded.
    package enum Path: Equatable, Sendable {
        /// `CJT_dc_decode`: the DC coefficients of a progressive or baseline
        /// file, read without libjpeg (1/8 scale only).
        case dcCoefficients
        /// libjpeg on a copy of a progressive file without its AC scans (1/8
        /// scale, a layout `CJT_dc_decode` does not take, such as 4:2:2).
        case dcScans
        /// libjpeg on a copy of a progressive file without its AC refinement
        /// scans (`CJT_scan_filter`), at 2/8, 3/8 and 4/8.
        case firstPasses
        /// libjpeg on the whole file.
        case whole
    }

    /// What finished the thumbnail after the scaled decode.
    package enum Finish: Equatable, Sendable {
        /// `ThumbnailFinisher`: our resample, orientation and crop, lcms2 for a profile.
        case direct
        /// libvips (`VipsImageCoder.thumbnail(fromPixels:…)`): large results, smart
        /// crops, kept profiles, profiles lcms2 does not take as RGB.
        case vips
    }

    package struct Decoded {
        package let image: Image
        package let path: Path
        package let finish: Finish
    }

    /// `VipsImageCoder.maxJPEGScans`, for the C code's own count (which never
    /// trips first: `attempt()` checks the markers, which are never fewer).
    static let maxScans = Int32(VipsImageCoder.maxJPEGScans)

    /// Scaled pixels from libjpeg-turbo or the DC decoder, malloc'd (free with `CJT_free`).
    struct Pixels {
        let pixels: UnsafeMutablePointer<UInt8>
        let width: Int32, height: Int32, bands: Int32
        let path: Path
        /// libjpeg's warnings: corrupt data it decoded past (0 from the DC decoder, which declines such data).
        var warnings = 0
    }

    func thumbnail() throws -> Image? {
        switch try attempt() {
        case .success(let decoded): decoded.image
        case .failure: nil
        }
    }

    /// The decoded thumbnail, or why it was declined; throws for data libjpeg
    /// opened but could not decode.
    package func attempt() throws -> Result<Decoded, Declined> {
        try VipsImageCoder.checkJPEGScans(bytes)
        var header = CJT_header()
        var message = [CChar](repeating: 0, count: 512)
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let context = CJT_open(base, bytes.count, options.allowTruncated ? 0 : 1, &header, &message, message.count)
        else { return .failure(Declined(reason: .unreadableHeader)) }
        defer { CJT_close(context) }

        guard header.components == 1 || header.components == 3,
              header.colorSpace == Int32(JCS_GRAYSCALE.rawValue) || header.colorSpace == Int32(JCS_YCbCr.rawValue) || header.colorSpace == Int32(JCS_RGB.rawValue)
        else { return .failure(Declined(reason: .colourSpace)) }
        guard header.precision == 8 else { return .failure(Declined(reason: .precision)) }
        let stored = PixelSize(width: Int(header.width), height: Int(header.height))
        guard stored.area > 0, stored.area <= options.pixelLimit else { return .failure(Declined(reason: .overPixelLimit)) }

        // The result's size, computed as the vips path computes it (upright).
        let storedOrientation = ImageOrientation(exif: Int(header.orientation))
        let rotate = !options.keepOrientation && storedOrientation.swapsDimensions
        let width = rotate ? stored.height : stored.width, height = rotate ? stored.width : stored.height
        let fill = !options.preserveAspectRatio
        let scale = fill ? max(Double(box.width) / Double(width), Double(box.height) / Double(height))
                         : min(Double(box.width) / Double(width), Double(box.height) / Double(height))
        guard scale < 1 else { return .failure(Declined(reason: .noShrink)) }
        let target = PixelSize(width: max(1, Int((Double(width) * scale).rounded())), height: max(1, Int((Double(height) * scale).rounded())))
        // In the file's orientation, the decode must be at least this large.
        let needed = rotate ? PixelSize(width: target.height, height: target.width) : target

        var numerator: Int32 = 8
        for candidate in Int32(1)...8 {
            var w: Int32 = 0, h: Int32 = 0
            CJT_scaled_size(context, candidate, &w, &h)
            if Int(w) >= needed.width && Int(h) >= needed.height { numerator = candidate; break }
        }

        var profile: Data?
        if header.hasICC != 0 {
            var length: UInt32 = 0
            if let data = CJT_icc_profile(context, &length) {
                profile = Data(bytes: data, count: Int(length))
                CJT_free(data)
            }
        }
        // The scaled pixels' cost before libjpeg allocates them.
        let scaled = PixelSize(width: (stored.width * Int(numerator) + 7) / 8, height: (stored.height * Int(numerator) + 7) / 8)
        try ImageFootprint(size: scaled, bands: Int(header.components))
            .check(pixelLimit: .max, memoryLimit: options.memoryLimit, step: "decoding the JPEG at \(numerator)/8")
        // The same file at the same scale decoded a moment ago: the same pixels,
        // which a fresh decode would make again (see ScaledDecodeReuse).
        func decode() throws -> ScaledPixels {
            ScaledPixels(try Self.pixels(context: context, bytes: bytes, header: header, numerator: numerator, memoryLimit: options.memoryLimit))
        }
        let decoded = try reuse.map { reuse in
            try reuse.pixels(for: reuse.key(bytes, numerator: numerator, allowTruncated: options.allowTruncated), decode: decode)
        } ?? decode()
        let (w, h, bands) = (decoded.width, decoded.height, decoded.bands)
        let raw = decoded.raw
        let orientation = options.keepOrientation ? .up : storedOrientation
        if target.area <= directPixelLimit,
           let transform = ThumbnailFinisher.transform(profile: profile, bands: Int(bands), focus: options.cropFocus, keepColorProfile: options.keepColorProfile) {
            let buffer = try ThumbnailFinisher(pixels: raw, size: PixelSize(width: Int(w), height: Int(h)), bands: Int(bands), target: target, box: box,
                                          fill: fill, orientation: orientation, focus: options.cropFocus, transform: transform).run()
            let image = Image(pixelSize: buffer.size, scale: options.scale, orientation: orientation == .up ? storedOrientation : .up,
                              storedOrientation: storedOrientation, format: .jpeg, hasAlpha: false, storage: buffer)
            return .success(Decoded(image: image, path: decoded.path, finish: .direct))
        }
        let image = try VipsImageCoder.thumbnail(
            fromPixels: raw, size: PixelSize(width: Int(w), height: Int(h)), bands: Int(bands),
            target: target, box: box, fill: fill,
            orientation: orientation, storedOrientation: storedOrientation,
            format: .jpeg, scale: options.scale, loadShrink: max(1, 8 / Int(numerator)), focus: options.cropFocus,
            colorProfile: profile, keepColorProfile: options.keepColorProfile
        )
        return .success(Decoded(image: image, path: decoded.path, finish: .vips))
    }
}

extension JPEGThumbnailDecoder {
    /// Decodes at `numerator`/8. At 1/8 a file needs only its DC coefficients:
    /// `CJT_dc_decode` reads them without libjpeg (and, for a progressive file,
    /// without its whole-image coefficient buffer); for a progressive layout it
    /// does not take, libjpeg decodes a copy without the AC scans. Anything
    /// unusual about either falls back to libjpeg on the whole file, which
    /// reports real errors.
    static func pixels(context: OpaquePointer, bytes: UnsafeRawBufferPointer, header: CJT_header, numerator: Int32,
                       memoryLimit: Int) throws -> Pixels {
        if numerator == 1, header.arithmetic == 0 {
            if let pixels = dcDecode(bytes, header: header) { return pixels }
        }
        if header.progressive != 0 {
            // libjpeg holds every coefficient of a progressive file, whatever the scale
            // (the DC decoder above keeps one value per block instead).
            let blocks = PixelSize(width: (Int(header.width) + 7) / 8 * 8, height: (Int(header.height) + 7) / 8 * 8)
            try ImageFootprint(size: blocks, bands: Int(header.components), bytesPerSample: 2)
                .check(pixelLimit: .max, memoryLimit: memoryLimit, step: "decoding the progressive JPEG's coefficients (\(blocks))")
        }
        if numerator == 1, header.progressive != 0, header.arithmetic == 0 {
            if let stream = dcOnlyStream(bytes), let pixels = stream.withUnsafeBytes({ libjpegDecode($0, numerator: 1, path: .dcScans) }) {
                return pixels
            }
        }
        if (2...4).contains(numerator), header.progressive != 0, header.arithmetic == 0 {
            // The refinement scans carry the AC coefficients' low bits, which a
            // 1/4 or 1/2 scale image barely shows; skipping them saves most of a
            // progressive decode's entropy decoding (docs/coder.md).
            if let stream = scanFiltered(bytes, keepFirstAC: true),
               let pixels = stream.withUnsafeBytes({ libjpegDecode($0, numerator: numerator, path: .firstPasses) }) {
                return pixels
            }
        }
        var out: UnsafeMutablePointer<UInt8>?
        var w: Int32 = 0, h: Int32 = 0, bands: Int32 = 0, truncated: Int32 = 0
        guard CJT_decode(context, numerator, maxScans, &out, &w, &h, &bands, &truncated) == 0, let out else {
            let reason = String(cString: CJT_message(context))
            throw WebImageError(.decodeFailed, "libjpeg-turbo: \(reason.isEmpty ? "the JPEG data is corrupt" : reason)")
        }
        return Pixels(pixels: out, width: w, height: h, bands: bands, path: .whole)
    }

    /// `CJT_dc_decode` of a file whose header libjpeg read, or nil when it does not take the file.
    static func dcDecode(_ bytes: UnsafeRawBufferPointer, header: CJT_header) -> Pixels? {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var out: UnsafeMutablePointer<UInt8>?
        var w: Int32 = 0, h: Int32 = 0, bands: Int32 = 0
        let ycc: Int32 = header.colorSpace == Int32(JCS_YCbCr.rawValue) ? 1 : 0
        guard CJT_dc_decode(base, bytes.count, ycc, maxScans, &out, &w, &h, &bands) == 0, let out else { return nil }
        return Pixels(pixels: out, width: w, height: h, bands: bands, path: .dcCoefficients)
    }

    /// libjpeg's strict decode of `bytes` (a file, or a copy without its AC scans)
    /// at `numerator`/8 in a context of its own, or nil when it fails.
    static func libjpegDecode(_ bytes: UnsafeRawBufferPointer, numerator: Int32, path: Path) -> Pixels? {
        var header = CJT_header()
        var ignored = [CChar](repeating: 0, count: 512)
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let context = CJT_open(base, bytes.count, 1, &header, &ignored, ignored.count)
        else { return nil }
        defer { CJT_close(context) }
        var out: UnsafeMutablePointer<UInt8>?
        var w: Int32 = 0, h: Int32 = 0, bands: Int32 = 0, truncated: Int32 = 0
        guard CJT_decode(context, numerator, maxScans, &out, &w, &h, &bands, &truncated) == 0, let out else { return nil }
        return Pixels(pixels: out, width: w, height: h, bands: bands, path: path, warnings: CJT_warnings(context))
    }

    /// The 1/8-scale pixels of a file by one path, for tests that compare the
    /// paths byte for byte: nil when that path does not take the file. `warnings`:
    /// libjpeg's, for corrupt data it decoded past.
    package static func eighthScale(_ bytes: UnsafeRawBufferPointer, path: Path) -> (size: PixelSize, bands: Int, bytes: [UInt8], warnings: Int)? {
        let pixels: Pixels?
        switch path {
        case .dcCoefficients:
            var header = CJT_header()
            var ignored = [CChar](repeating: 0, count: 512)
            guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                  let context = CJT_open(base, bytes.count, 1, &header, &ignored, ignored.count)
            else { return nil }
            CJT_close(context)
            pixels = dcDecode(bytes, header: header)
        case .dcScans:
            pixels = dcOnlyStream(bytes).flatMap { stream in stream.withUnsafeBytes { libjpegDecode($0, numerator: 1, path: .dcScans) } }
        case .firstPasses:
            pixels = scanFiltered(bytes, keepFirstAC: true).flatMap { stream in stream.withUnsafeBytes { libjpegDecode($0, numerator: 1, path: .firstPasses) } }
        case .whole:
            pixels = libjpegDecode(bytes, numerator: 1, path: .whole)
        }
        guard let pixels else { return nil }
        defer { CJT_free(pixels.pixels) }
        let count = Int(pixels.width) * Int(pixels.height) * Int(pixels.bands)
        return (PixelSize(width: Int(pixels.width), height: Int(pixels.height)), Int(pixels.bands),
                Array(UnsafeBufferPointer(start: pixels.pixels, count: count)), pixels.warnings)
    }

    /// The file without its AC scans (see `CJT_dc_only`), or nil when it is not a
    /// progressive Huffman JPEG or its structure is unusual.
    package static func dcOnlyStream(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? { scanFiltered(bytes, keepFirstAC: false) }

    /// The file without its AC scans, or (`keepFirstAC`) without its AC
    /// refinement scans only (see `CJT_scan_filter`); nil when it is not a
    /// progressive Huffman JPEG or its structure is unusual.
    package static func scanFiltered(_ bytes: UnsafeRawBufferPointer, keepFirstAC: Bool) -> [UInt8]? {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count >= 4 else { return nil }
        var out = [UInt8](repeating: 0, count: bytes.count)
        let length = out.withUnsafeMutableBufferPointer { CJT_scan_filter(base, bytes.count, maxScans, $0.baseAddress!, keepFirstAC ? 1 : 0) }
        guard length > 0 else { return nil }
        out.removeSubrange(length...)
        return out
    }
}
