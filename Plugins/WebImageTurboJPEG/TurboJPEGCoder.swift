internal import CJPEGTurbo
internal import CJPEGTurboOps
public import Foundation
public import WebImage
public import WebImageVips

/// Decodes JPEG thumbnails straight on libjpeg-turbo, and hands every other
/// decode to libvips.
///
/// ```swift
/// configuration.coders.registerVips()
/// configuration.coders.registerTurboJPEG()  // asked first, for JPEGs
/// ```
///
/// A thumbnail decode (`DecodeOptions/thumbnailPixelSize` set) of a JPEG reads
/// the header with libjpeg, picks the smallest DCT-domain scale (1/8, 2/8 … 8/8)
/// that keeps the image at least as large as the result, and decodes at that
/// scale (block smoothing off). A result of at most ``directPixelLimit`` pixels
/// is then finished on the direct path: one Lanczos-3 resample in C of ours, the
/// EXIF orientation, a fill's crop and an embedded ICC profile's conversion to
/// sRGB by lcms2, into a `PixelBuffer`, with no libvips image, operation or
/// thread. Larger results, smart crops, `keepColorProfile` and grey files with a
/// profile are finished by libvips instead, into the `VipsStorage` image
/// `VipsImageCoder` would have made. Both agree within about 1/255 on average
/// (docs/coder.md). libvips' own JPEG loader does the same shrink-on-load
/// through its pipeline, which costs more (docs/performance.md); libvips also
/// stops at 1/2, 1/4, 1/8 where this coder can use 3/8 or 5/8 and leave less to
/// the resize.
///
/// At 1/8 a file is decoded from its DC coefficients alone by `CJT_dc_decode`,
/// which keeps one value per block: a progressive file's AC scans are skipped
/// unread (libjpeg would hold all 64 coefficients of every block), a baseline
/// file's AC codes are decoded only to be skipped (no IDCT, no upsampling). The
/// pixels are libjpeg-turbo's decode of the DC coefficients, byte for byte; for
/// 4:4:4 and grey that is its decode of the whole file (docs/coder.md).
/// At 2/8 to 4/8 a progressive file is decoded without its AC refinement scans,
/// the slowest part of its decode, which move a 1/4 or 1/2 scale image by a
/// fraction of a level.
///
/// Handed to the fallback (`VipsImageCoder`), whose result is then exactly
/// the vips path's:
/// - full decodes (no thumbnail size) and thumbnails no smaller than the image;
/// - CMYK and YCCK files, 12-bit files and anything libjpeg cannot open;
/// - images over `DecodeOptions/pixelLimit` (the fallback refuses them or, with
///   `DecodeOptions/scaleDownLargeImages`, decodes them smaller).
///
/// A truncated file is a `WebImageError/Code/decodeFailed` error unless
/// `DecodeOptions/allowTruncated`; corrupt data is an error with libjpeg's message.
///
/// It also writes JPEG and WebP: images of at most ``encodePixelLimit`` pixels
/// that are 8-bit sRGB or grey (libvips images, or one-frame grey or RGB
/// `PixelBuffer`s), still, without alpha, and written without metadata (the
/// usual thumbnail) go straight to libjpeg-turbo's encoder, with the settings
/// libvips' `jpegsave` would use (optimised Huffman tables, no chroma
/// subsampling from quality 90 up, progressive if asked), or to libwebp's, with
/// the configuration libvips' `webpsave` would build (the default preset at the
/// quality, the effort as libwebp's method, lossless when asked, sharp YUV when
/// chroma subsampling is off). That skips the libvips save pipeline, about 1 ms
/// per thumbnail (docs/performance.md), and libvips' start-up when nothing else
/// needs it. Everything else, and every other format, goes to the fallback.
/// ``info(_:)`` is the fallback's.
public struct TurboJPEGCoder: ImageCoder {
    /// Where declined decodes and encodes go.
    public let fallback: VipsImageCoder
    /// The largest image (in pixels) this coder encodes itself; larger ones go to
    /// libvips, whose save pipeline is threaded.
    public let encodePixelLimit: Int
    /// The largest thumbnail (in pixels) finished on the direct path; larger
    /// ones are finished by libvips, whose resize runs on several threads when
    /// `VipsImageCoder.concurrency` allows.
    public let directPixelLimit: Int

    /// 1 MP: up to about 1000 x 1000, past every usual thumbnail and preview size.
    public static let defaultDirectPixelLimit = 1_000_000

    public init(fallback: VipsImageCoder = VipsImageCoder(), encodePixelLimit: Int = 1_000_000,
                directPixelLimit: Int = TurboJPEGCoder.defaultDirectPixelLimit) {
        self.fallback = fallback
        self.encodePixelLimit = encodePixelLimit
        self.directPixelLimit = directPixelLimit
    }

    public func canDecode(_ data: Data) -> Bool { ImageFormat.sniff(data) == .jpeg }

    /// JPEG and WebP: the registry asks the next coder (libvips) for other
    /// formats. Answered without asking libvips, so that a batch of thumbnails
    /// that all take the direct path never starts libvips (its start-up loads
    /// every module, ImageMagick and poppler among them: about 30 MiB and 40 ms).
    public func canEncode(_ format: ImageFormat) -> Bool { format == .jpeg || format == .webp }

    public func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
        guard format == .jpeg || format == .webp, let pixels = try directPixels(image, options: options) else {
            return try fallback.encode(image, as: format, options: options)
        }
        if format == .webp { return try WebPEncode(options).encode(pixels) }
        let subsampling: TurboJPEGEncode.Subsampling = switch options.chromaSubsampling {
        case .auto: options.quality >= 90 ? .none : .both
        case .on: .both
        case .off: .none
        }
        let settings = TurboJPEGEncode(quality: options.quality, progressive: options.progressive, subsampling: subsampling)
        return try settings.encode(pixels)
    }

    /// The pixels to encode directly, or nil to hand the image to libvips.
    func directPixels(_ image: Image, options: EncodeOptions) throws -> PixelBuffer? {
        guard !options.keepMetadata, !options.keepColorProfile, !image.isAnimated, !image.hasAlpha, image.pixelSize.area <= encodePixelLimit
        else { return nil }
        if let buffer = image.storage(as: PixelBuffer.self) {
            // The direct decode's thumbnails, and pixels made in Swift: one frame of grey or RGB.
            guard buffer.channels == 1 || buffer.channels == 3, buffer.size == image.pixelSize,
                  buffer.bytes.count == buffer.size.area * buffer.channels else { return nil }
            return buffer
        }
        return try image.storage(as: VipsStorage.self)?.plainEightBitPixels(maxPixels: encodePixelLimit)
    }

    public func info(_ data: Data) throws -> ImageInfo { try fallback.info(data) }

    public func decode(_ data: Data, options: DecodeOptions) throws -> Image {
        guard let box = options.thumbnailPixelSize, canDecode(data) else { return try fallback.decode(data, options: options) }
        let outcome = try data.withUnsafeBytes { raw -> Image? in
            try TurboJPEGDecode(bytes: raw, options: options, box: box, directPixelLimit: directPixelLimit).thumbnail()
        }
        return try outcome ?? fallback.decode(data, options: options)
    }
}

/// One thumbnail decode; `nil` from ``thumbnail()`` means "hand it to the fallback".
/// `package` so that the tests can see which path a file took.
package struct TurboJPEGDecode {
    let bytes: UnsafeRawBufferPointer
    let options: DecodeOptions
    let box: PixelSize
    let directPixelLimit: Int

    package init(bytes: UnsafeRawBufferPointer, options: DecodeOptions, box: PixelSize, directPixelLimit: Int = TurboJPEGCoder.defaultDirectPixelLimit) {
        self.bytes = bytes
        self.options = options
        self.box = box
        self.directPixelLimit = directPixelLimit
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
        /// `DirectFinish`: our resample, orientation and crop, lcms2 for a profile.
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

    /// Scaled pixels from libjpeg-turbo or the DC decoder, malloc'd (free with `CJT_free`).
    struct Pixels {
        let pixels: UnsafeMutablePointer<UInt8>
        let width: Int32, height: Int32, bands: Int32
        let path: Path
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
        let decoded = try Self.pixels(context: context, bytes: bytes, header: header, numerator: numerator, memoryLimit: options.memoryLimit)
        let pixels = decoded.pixels
        defer { CJT_free(pixels) }
        let (w, h, bands) = (decoded.width, decoded.height, decoded.bands)
        let raw = UnsafeRawBufferPointer(start: pixels, count: Int(w) * Int(h) * Int(bands))
        let orientation = options.keepOrientation ? .up : storedOrientation
        if target.area <= directPixelLimit,
           let transform = DirectFinish.transform(profile: profile, bands: Int(bands), focus: options.cropFocus, keepColorProfile: options.keepColorProfile) {
            let buffer = try DirectFinish(pixels: raw, size: PixelSize(width: Int(w), height: Int(h)), bands: Int(bands), target: target, box: box,
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

extension TurboJPEGDecode {
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
        guard CJT_decode(context, numerator, &out, &w, &h, &bands, &truncated) == 0, let out else {
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
        guard CJT_dc_decode(base, bytes.count, ycc, &out, &w, &h, &bands) == 0, let out else { return nil }
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
        guard CJT_decode(context, numerator, &out, &w, &h, &bands, &truncated) == 0, let out else { return nil }
        return Pixels(pixels: out, width: w, height: h, bands: bands, path: path)
    }

    /// The 1/8-scale pixels of a file by one path, for tests that compare the
    /// paths byte for byte: nil when that path does not take the file.
    package static func eighthScale(_ bytes: UnsafeRawBufferPointer, path: Path) -> (size: PixelSize, bands: Int, bytes: [UInt8])? {
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
                Array(UnsafeBufferPointer(start: pixels.pixels, count: count)))
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
        let length = out.withUnsafeMutableBufferPointer { CJT_scan_filter(base, bytes.count, $0.baseAddress!, keepFirstAC ? 1 : 0) }
        guard length > 0 else { return nil }
        out.removeSubrange(length...)
        return out
    }
}

extension CoderRegistry {
    /// Registers ``TurboJPEGCoder`` under `turbojpeg`. Register it after
    /// `VipsImageCoder` so that it is asked first for JPEGs.
    @discardableResult
    public func registerTurboJPEG(fallback: VipsImageCoder = VipsImageCoder(), name: String = "turbojpeg") -> RegistrationToken {
        register(TurboJPEGCoder(fallback: fallback), name: name)
    }
}
