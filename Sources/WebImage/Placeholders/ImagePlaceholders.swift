import Foundation

/// A BlurHash and a ThumbHash of one image: what a page shows while the image
/// loads. Made from a small copy of the image (at most 100x100); with
/// `WebImageVips`, `ImageManager.placeholders(for:)` or `Image.placeholders()`.
public struct ImagePlaceholders: Hashable, Sendable, Codable {
    /// The BlurHash text (4x3 terms, 3x4 for a portrait image).
    public var blurHash: String
    /// The ThumbHash bytes.
    public var thumbHash: [UInt8]
    /// The ThumbHash as base64, the form it is usually sent in.
    public var thumbHashBase64: String { Data(thumbHash).base64EncodedString() }

    public init(blurHash: String, thumbHash: [UInt8]) {
        self.blurHash = blurHash
        self.thumbHash = thumbHash
    }

    /// Both hashes of a small image (at most 100x100, 8-bit sRGB, RGB or RGBA).
    /// The BlurHash, which has no alpha, sees the image composited onto white.
    /// - Throws: ``WebImageError/Code/invalidArgument`` for a larger image or other channel counts.
    public init(smallImage pixels: PixelBuffer) throws {
        thumbHash = try ThumbHash.encode(pixels)
        var opaque = pixels
        if pixels.channels == 4 {
            opaque = PixelBuffer(size: pixels.size, channels: 3, bytes: stride(from: 0, to: pixels.bytes.count, by: 4).flatMap { i -> [UInt8] in
                let alpha = Int(pixels.bytes[i + 3])
                return (0..<3).map { UInt8((Int(pixels.bytes[i + $0]) * alpha + 255 * (255 - alpha) + 127) / 255) }
            })
        }
        let landscape = pixels.size.width >= pixels.size.height
        blurHash = try BlurHash.encode(opaque, components: landscape ? (4, 3) : (3, 4))
    }
}
