internal import CVips
internal import CVipsOps
import Foundation
import WebImage

enum VipsEncoder {
    /// A libvips image for any image: its own storage, or a `PixelBuffer` copied in.
    static func handle(for image: Image) throws -> VipsHandle {
        if let storage = image.storage(as: VipsStorage.self) { return storage.handle }
        if let buffer = image.storage(as: PixelBuffer.self) {
            let frames = max(1, buffer.bytes.count / max(1, buffer.size.area * buffer.channels))
            guard buffer.bytes.count == buffer.size.area * buffer.channels * frames, (1...4).contains(buffer.channels) else {
                throw WebImageError(.encodeFailed, "a \(buffer.size) PixelBuffer with \(buffer.channels) channels holds \(buffer.bytes.count) bytes, not whole frames")
            }
            let pointer = buffer.bytes.withUnsafeBytes {
                CVips_from_memory($0.baseAddress, $0.count, Int32(buffer.size.width), Int32(buffer.size.height * frames), Int32(buffer.channels))
            }
            guard let pointer else { throw Vips.error(.encodeFailed, "importing pixels") }
            return VipsHandle(pointer)
        }
        throw WebImageError(.encodeFailed, "VipsImageCoder cannot read \(type(of: image.storage)) pixels; pass a VipsStorage or PixelBuffer image")
    }

    static func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
        var source = try handle(for: image)
        let pageHeight = image.pixelSize.height
        if image.isAnimated, format == .avif {
            return try avifSequence(image, source, options: options)
        }
        if image.isAnimated {
            if format.supportsAnimation {
                source = try source.withAnimation(pageHeight: pageHeight, delays: Self.writableDelays(image), loop: min(max(0, image.loopCount), Self.maxLoopCount))
            } else {
                // A still format gets the first frame.
                source = try Vips.make(.encodeFailed, "vips_extract_area") {
                    CVips_extract_area(source.pointer, $0, 0, 0, Int32(source.width), Int32(pageHeight))
                }
            }
        }
        if options.keepMetadata, image.orientation != .up {
            // Pixels kept as stored (keepOrientation): say how to show them.
            let copy = try Vips.make(.encodeFailed, "vips_copy") { CVips_copy(source.pointer, $0) }
            CVips_set_int(copy.pointer, "orientation", Int32(image.orientation.rawValue))
            source = copy
        }
        if !options.keepColorProfile, !options.keepMetadata, CVips_has_profile(source.pointer) != 0 {
            // Pixels decoded with keepColorProfile, encoded without it: convert
            // them rather than write their values unlabelled.
            var ignored: Int32 = 0
            source = try Vips.make(.encodeFailed, "converting to sRGB") { CVips_output_colour(source.pointer, $0, 0, &ignored) }
        }
        if source.hasAlpha, !format.supportsAlpha {
            // libvips would drop alpha onto black; flatten onto the chosen background.
            let b = options.background
            source = try Vips.make(.encodeFailed, "vips_flatten") {
                CVips_flatten(source.pointer, $0, Double(b.red), Double(b.green), Double(b.blue))
            }
        }
        // Metadata: all of it, only the colour profile, or none.
        var strip: Int32 = options.keepMetadata ? 0 : 1
        if !options.keepMetadata, options.keepColorProfile, CVips_has_profile(source.pointer) != 0 {
            source = try Vips.make(.encodeFailed, "vips_copy") { CVips_profile_only(source.pointer, $0) }
            strip = 0
        }
        let quality = Int32(options.quality)
        let subsample: Int32 = switch options.chromaSubsampling { case .auto: 0; case .on: 1; case .off: 2 }
        let effort = Int32(options.effort(for: format))
        switch format {
        case .jpeg:
            return try Vips.save("jpegsave") { CVips_jpegsave(source.pointer, $0, $1, quality, options.progressive ? 1 : 0, strip, subsample) }
        case .png:
            return try Vips.save("pngsave") { CVips_pngsave(source.pointer, $0, $1, options.progressive ? 1 : 0, strip) }
        case .webp:
            let file = try Vips.save("webpsave") {
                CVips_webpsave(source.pointer, $0, $1, quality, options.lossless ? 1 : 0, strip, effort, options.chromaSubsampling == .off ? 1 : 0)
            }
            // libvips 8.14 writes EXIF into WebP even when stripping (WebPMetadata).
            return options.keepMetadata ? file : WebPMetadata.removing(from: file, keepColorProfile: strip == 0)
        case .gif:
            return try Vips.save("gifsave") { CVips_gifsave(source.pointer, $0, $1, options.progressive ? 1 : 0, strip) }
        case .tiff:
            return try Vips.save("tiffsave") { CVips_tiffsave(source.pointer, $0, $1, strip) }
        case .avif, .heif:
            return try Vips.save("heifsave") {
                CVips_heifsave(source.pointer, $0, $1, quality, options.lossless ? 1 : 0, strip, format == .avif ? 1 : 0, effort, subsample)
            }
        case .jxl:
            return try Vips.save("jxlsave") { CVips_jxlsave(source.pointer, $0, $1, quality, effort, options.lossless ? 1 : 0, strip) }
        default:
            throw WebImageError(.encodeFailed, "VipsImageCoder does not write \(format)")
        }
    }

    /// The longest frame any animated output can say: GIF's 65535 hundredths of a
    /// second (WebP's 24-bit milliseconds go further; libwebp refused a 65535 s frame).
    static let maxFrameDelay = 655_350
    /// The most plays GIF's and WebP's 16-bit loop counts can say; more is taken as this
    /// (a larger count wrapped to 0, forever, in libwebp).
    static let maxLoopCount = 65_535

    /// Frame delays in milliseconds, each within what every animated format can write.
    static func writableDelays(_ image: Image) -> [Int] {
        image.frames.map { min(max(0, Int(clamping: $0.duration.wholeMilliseconds)), maxFrameDelay) }
    }

    /// An animation asked for as AVIF: an AVIF sequence with the same frames and
    /// durations, written by libavif (libvips' heifsave writes stills only). The
    /// pixels go as 8-bit sRGB; libavif 0.11 writes no repetition count, so it plays
    /// forever, as browsers play a sequence without one.
    static func avifSequence(_ image: Image, _ handle: VipsHandle, options: EncodeOptions) throws -> Data {
        var source = handle
        if CVips_has_profile(source.pointer) != 0 {
            var ignored: Int32 = 0
            source = try Vips.make(.encodeFailed, "converting to sRGB") { CVips_output_colour(source.pointer, $0, 0, &ignored) }
        }
        if source.bands < 3 { source = try Vips.make(.encodeFailed, "vips_colourspace") { CVips_srgb(source.pointer, $0) } }
        let frames = image.frameCount, width = source.width, height = image.pixelSize.height, channels = source.bands
        var length = 0
        guard let pixels = CVips_write_uchar(source.pointer, &length) else { throw Vips.error(.encodeFailed, "reading the frames") }
        defer { CVips_free(pixels) }
        guard (3...4).contains(channels), length == width * height * channels * frames else {
            throw WebImageError(.encodeFailed, "an AVIF sequence needs \(frames) frames of \(width)x\(height) RGB or RGBA; the image has \(channels) bands")
        }
        let durations = Self.writableDelays(image).map { Int32($0) }
        var output: UnsafeMutablePointer<UInt8>?
        var size = 0
        var message = [CChar](repeating: 0, count: 256)
        let speed = Int32(10 - min(9, max(0, options.effort(for: .avif))))
        let status = durations.withUnsafeBufferPointer { durations in
            CAVIF_encode_sequence(pixels.assumingMemoryBound(to: UInt8.self), Int32(width), Int32(height), Int32(frames), Int32(channels),
                                  durations.baseAddress, Int32(options.quality), speed, &output, &size, &message, message.count)
        }
        guard status == 0, let output else {
            let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw WebImageError(text.hasPrefix("libavif cannot be loaded") ? .libraryUnavailable : .encodeFailed, "writing the AVIF sequence: \(text)")
        }
        defer { CAVIF_free(output) }
        return Data(bytes: output, count: size)
    }
}
