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
/// Handed on to libvips, whose result is then exactly the vips path's (in a
/// registry, ``decodeIfHandled(_:options:)`` returns nil and the registry asks
/// the `VipsImageCoder` registered before it; on its own, ``fallback`` decodes):
/// - full decodes (no thumbnail size) and thumbnails no smaller than the image;
/// - CMYK and YCCK files, 12-bit files and anything libjpeg cannot open;
/// - images over `DecodeOptions/pixelLimit` (the fallback refuses them or, with
///   `DecodeOptions/scaleDownLargeImages`, decodes them smaller).
///
/// A truncated file is a `WebImageError/Code/decodeFailed` error unless
/// `DecodeOptions/allowTruncated`; a file libjpeg refuses is one with libjpeg's
/// message; corrupt data libjpeg decodes past is decoded. Whichever path a size
/// takes, the answer for a file is the same, and libvips' loader's
/// (docs/coder.md, "One answer per JPEG").
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
/// needs it. Everything else, and every other format, is handed on the same way,
/// and so is ``info(_:)``.
public struct TurboJPEGCoder: ImageCoder {
    /// Where declined decodes and encodes go when the coder is used on its own.
    /// Nil in a registry (`CoderRegistry.registerTurboJPEG(name:)`): it hands
    /// them on (``decodeIfHandled(_:options:)`` returns nil) and the registry asks
    /// the next coder, libvips, registered before it.
    public let fallback: VipsImageCoder?
    /// The largest image (in pixels) this coder encodes itself; larger ones go to
    /// libvips, whose save pipeline is threaded.
    public let encodePixelLimit: Int
    /// The largest thumbnail (in pixels) finished on the direct path; larger
    /// ones are finished by libvips, whose resize runs on several threads when
    /// `VipsImageCoder.concurrency` allows.
    public let directPixelLimit: Int

    /// Recent scaled decodes kept for the other sizes of the same file, or nil
    /// (the default): see ``ScaledDecodeReuse``.
    public let reuse: ScaledDecodeReuse?

    /// 1 MP: up to about 1000 x 1000, past every usual thumbnail and preview size.
    public static let defaultDirectPixelLimit = 1_000_000

    public init(fallback: VipsImageCoder? = VipsImageCoder(), encodePixelLimit: Int = 1_000_000,
                directPixelLimit: Int = TurboJPEGCoder.defaultDirectPixelLimit, reuse: ScaledDecodeReuse? = nil) {
        self.fallback = fallback
        self.encodePixelLimit = encodePixelLimit
        self.directPixelLimit = directPixelLimit
        self.reuse = reuse
    }

    public func canDecode(_ data: Data) -> Bool { ImageFormat.sniff(data) == .jpeg }

    /// JPEG and WebP: the registry asks the next coder (libvips) for other
    /// formats. Answered without asking libvips, so that a batch of thumbnails
    /// that all take the direct path never starts libvips (its start-up loads
    /// every module, ImageMagick and poppler among them: about 30 MiB and 40 ms).
    public func canEncode(_ format: ImageFormat) -> Bool { format == .jpeg || format == .webp }

    public func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
        guard let data = try encodeIfHandled(image, as: format, options: options) else { throw declined("encodes \(format) itself only for small 8-bit images without alpha or metadata") }
        return data
    }

    /// The direct encode, else the fallback's, else nil: the registry asks the next coder.
    public func encodeIfHandled(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data? {
        guard format == .jpeg || format == .webp, let pixels = try directPixels(image, options: options) else {
            return try fallback?.encode(image, as: format, options: options)
        }
        if format == .webp { return try WebPEncoder(options).encode(pixels) }
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

    public func info(_ data: Data) throws -> ImageInfo {
        guard let info = try infoIfHandled(data) else { throw declined("reads headers only through its fallback") }
        return info
    }

    /// The fallback's description, else nil: the registry asks the next coder.
    public func infoIfHandled(_ data: Data) throws -> ImageInfo? { try fallback?.info(data) }

    public func decode(_ data: Data, options: DecodeOptions) throws -> Image {
        guard let image = try decodeIfHandled(data, options: options) else { throw declined("decodes JPEG thumbnails only") }
        return image
    }

    /// A JPEG thumbnail decoded directly, else the fallback's decode, else nil:
    /// the registry asks the next coder that accepts the bytes.
    public func decodeIfHandled(_ data: Data, options: DecodeOptions) throws -> Image? {
        guard let box = options.thumbnailPixelSize, canDecode(data) else { return try fallback?.decode(data, options: options) }
        let outcome = try data.withUnsafeBytes { raw -> Image? in
            try JPEGThumbnailDecoder(bytes: raw, options: options, box: box, directPixelLimit: directPixelLimit, reuse: reuse).thumbnail()
        }
        return try outcome ?? fallback?.decode(data, options: options)
    }

    /// The error of work handed on with nowhere to go: no fallback, and called
    /// directly rather than through a registry.
    private func declined(_ what: String) -> WebImageError {
        WebImageError(.unsupportedFormat, "TurboJPEGCoder \(what); without a fallback, use it in a CoderRegistry after VipsImageCoder, which takes the rest")
    }
}

extension TurboJPEGCoder {
    /// Internal to the package (SPI `Internals`, for its fuzzers and tests).
    ///
    /// Nil when the shortcuts of a 1/8-scale decode agree with libjpeg on
    /// `data`: the DC decoder and libjpeg on the copies without AC scans decode
    /// only what libjpeg decodes, at its size and bands, and (when libjpeg met
    /// no corrupt data) the DC decoder's pixels are libjpeg's on the DC scans.
    /// Else what differs (docs/coder.md, "One answer per JPEG").
    @_spi(Internals) public static func pathDisagreement(_ data: Data) -> String? {
        data.withUnsafeBytes { raw -> String? in
            let whole = JPEGThumbnailDecoder.eighthScale(raw, path: .whole)
            let dcScans = JPEGThumbnailDecoder.eighthScale(raw, path: .dcScans)
            for path in [JPEGThumbnailDecoder.Path.dcCoefficients, .dcScans, .firstPasses] {
                let shortcut = path == .dcScans ? dcScans : JPEGThumbnailDecoder.eighthScale(raw, path: path)
                guard let shortcut else { continue }
                guard let whole else { return "\(path) decodes a file libjpeg refuses" }
                if shortcut.size != whole.size || shortcut.bands != whole.bands {
                    return "\(path) decodes \(shortcut.size) x \(shortcut.bands), libjpeg \(whole.size) x \(whole.bands)"
                }
                if path == .dcCoefficients, let dcScans, whole.warnings == 0, dcScans.warnings == 0, dcScans.bytes != shortcut.bytes {
                    return "the DC decoder's pixels differ from libjpeg's on the DC scans"
                }
            }
            return nil
        }
    }
}

extension CoderRegistry {
    /// Registers ``TurboJPEGCoder`` under `turbojpeg`, with no fallback of its
    /// own: what it hands on, the registry gives to the next coder. Register it
    /// after `VipsImageCoder`, so that it is asked first for JPEGs and libvips
    /// takes the rest.
    @discardableResult
    public func registerTurboJPEG(name: String = "turbojpeg") -> RegistrationToken {
        register(TurboJPEGCoder(fallback: nil), name: name)
    }
}

/// With ``TurboJPEGCoder/reuse``, its figures on a service's `/metrics`:
/// `webimage_turbojpeg_reuse_bytes` and `webimage_turbojpeg_reuse_entries` (what
/// is kept now) and `webimage_turbojpeg_reuse_hits_total` (thumbnails that
/// started from a kept or a shared decode).
extension TurboJPEGCoder: PluginFiguresReporting {
    public var figures: [PluginFigure] {
        guard let reuse else { return [] }
        let (bytes, entries, hits) = reuse.counts
        return [PluginFigure("webimage_turbojpeg_reuse_bytes", .gauge, bytes),
                PluginFigure("webimage_turbojpeg_reuse_entries", .gauge, entries),
                PluginFigure("webimage_turbojpeg_reuse_hits_total", .total, hits)]
    }
}
