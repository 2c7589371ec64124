internal import CVips
internal import CVipsOps
import Foundation
import WebImage

/// AVIF through libavif (`avif_ops.c`): the clean aperture, rotation and mirror
/// applied, as EXIF orientation is for JPEG, and sequences decoded frame by frame.
/// libvips' heif loader (libheif 1.15) refuses transformed files and never reads
/// sequences. Colour: libavif converts YUV with the file's matrix; an ICC profile
/// goes to sRGB as in the other paths; nclx primaries other than BT.709 are taken
/// as sRGB, as libvips' heif loader takes them; PQ and HLG (HDR) are refused.
extension VipsDecoder {
    /// The most frames a sequence may have, as for GIF and APNG.
    static let maxAVIFFrames: UInt32 = 4096
    /// How an error begins when libavif could not parse the file at all.
    static let avifParseFailure = "AVIF: parsing"

    /// libavif's answer, released when it goes: read its pointers only through
    /// it, while it is alive.
    final class AVIFResult {
        var image = CAVIF_image()
        deinit { CAVIF_release(&image) }

        /// Frame durations in milliseconds; a duration that is not a finite, positive
        /// number of seconds (a hostile file's) is 0, which shows as 100 ms.
        var delays: [Int] {
            (0..<Int(image.frames)).map { index in
                let seconds = image.durations?[index] ?? 0
                return seconds.isFinite && seconds > 0 ? Int(min(seconds, 86_400) * 1000) : 0
            }
        }
    }

    private func libavif(headerOnly: Bool) throws -> AVIFResult {
        let result = AVIFResult()
        let limit = UInt32(clamping: options.pixelLimit)
        let status = CAVIF_decode(bytes.baseAddress, bytes.count, limit, Self.maxAVIFFrames, headerOnly ? 1 : 0, options.firstFrameOnly ? 1 : 0, &result.image)
        guard status == 0 else {
            let message = withUnsafeBytes(of: result.image.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            let code: WebImageError.Code = message.hasPrefix("libavif cannot be loaded") ? .libraryUnavailable
                : message.contains("limit") || message.contains("too large") ? .pixelLimitExceeded : .decodeFailed
            throw WebImageError(code, "AVIF: \(message)")
        }
        let image = result.image
        guard image.width > 0, image.height > 0, image.frames > 0 else { throw WebImageError(.decodeFailed, "AVIF: the file declares an empty image") }
        // CICP transfer characteristics 16 (PQ) and 18 (HLG): HDR, which this
        // pipeline's 8-bit sRGB output would show washed out or clipped.
        if image.transfer == 16 || image.transfer == 18 {
            throw WebImageError(.unsupportedFormat, "AVIF: HDR (\(image.transfer == 16 ? "PQ" : "HLG") transfer) is not tone-mapped here; it is refused rather than shown wrong")
        }
        return result
    }

    func avifInfo() throws -> ImageInfo {
        let result = try libavif(headerOnly: true)
        let image = result.image
        return ImageInfo(
            format: .avif,
            pixelSize: PixelSize(width: Int(image.width), height: Int(image.height)),
            storedPixelSize: PixelSize(width: Int(image.stored_width), height: Int(image.stored_height)),
            storedOrientation: .up,
            frameDurations: image.frames > 1 ? result.delays.map { .milliseconds(Self.shownDelay($0)) } : [.zero],
            loopCount: image.frames > 1 ? 0 : 1,
            hasAlpha: image.has_alpha != 0,
            hasColorProfile: image.icc_len > 0,
            colorSpace: "srgb"
        )
    }

    func decodeAVIF() throws -> Image {
        let header = try libavif(headerOnly: true).image
        let canvas = PixelSize(width: Int(header.width), height: Int(header.height))
        let frames = options.firstFrameOnly ? 1 : Int(header.frames)
        try ImageFootprint(size: canvas, bands: 4, bytesPerSample: 1, frames: frames)
            .check(pixelLimit: options.pixelLimit, memoryLimit: options.memoryLimit, step: "decoding the AVIF's \(frames) frame\(frames == 1 ? "" : "s") of \(canvas)")
        let decoded = try libavif(headerOnly: false)
        let image = decoded.image
        // The pixels are libavif's until `decoded` goes: copied into libvips while it lives.
        var strip = try withExtendedLifetime(decoded) {
            guard let pixels = decoded.image.pixels else { throw WebImageError(.decodeFailed, "AVIF: no pixels") }
            return try Vips.make(.decodeFailed, "building the AVIF's pixels") { out in
                guard let made = CVips_from_memory(pixels, Int(image.width) * Int(image.height) * 4 * Int(image.frames),
                                                   image.width, image.height * image.frames, 4) else { return -1 }
                out.pointee = made
                return 0
            }
        }
        if image.has_alpha == 0 {
            strip = try Vips.make(.decodeFailed, "vips_extract_band") { CVips_extract_band(strip.pointer, $0, 0, 3) }
        }
        if image.icc_len > 0 {
            strip = try Vips.make(.decodeFailed, "vips_copy") { CVips_copy(strip.pointer, $0) }
            withExtendedLifetime(decoded) {
                if let icc = decoded.image.icc { CVips_set_profile(strip.pointer, icc, decoded.image.icc_len) }
            }
        }
        let delays = decoded.delays
        if image.frames > 1 { strip = try strip.withAnimation(pageHeight: Int(image.height), delays: delays, loop: 0) }
        strip = try Self.outputColour(try strip.inMemory(), keepProfile: options.keepColorProfile)
        return try finishAnimation(strip, canvas: canvas, delays: delays, loop: 0)
    }
}
