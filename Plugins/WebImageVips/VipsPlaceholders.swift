internal import CVips
internal import CVipsOps
public import Foundation
public import WebImage

extension Image {
    /// The image's BlurHash and ThumbHash, from a copy shrunk to fit 100x100
    /// (the first frame of an animation; colour as the pipeline hands it on:
    /// 8-bit sRGB). Decoding at that size first (a 100x100 thumbnail) makes this
    /// cheap; ``ImageManager/placeholders(for:options:context:)`` does that.
    /// - Throws: `WebImageError` when the pixels cannot be read.
    public func placeholders() throws -> ImagePlaceholders {
        try Vips.ensureInitialized()
        var handle = try VipsEncoder.handle(for: self)
        if isAnimated {
            let source = handle
            handle = try Vips.make(.transformFailed, "vips_extract_area") {
                CVips_extract_area(source.pointer, $0, 0, 0, Int32(source.width), Int32(pixelSize.height))
            }
        }
        let scale = min(1, 100 / Double(max(handle.width, handle.height)))
        if scale < 1 {
            let source = handle
            handle = try Vips.make(.transformFailed, "vips_resize") { CVips_resize(source.pointer, $0, scale, scale) }
        }
        let source = handle
        let rgb = try Vips.make(.transformFailed, "vips_colourspace") { CVips_srgb(source.pointer, $0) }
        let eight = try Vips.make(.transformFailed, "vips_cast") { CVips_cast_uchar(rgb.pointer, $0) }
        let pixels = try VipsStorage(eight).pixels(frameHeight: eight.height)
        return try ImagePlaceholders(smallImage: pixels)
    }
}

extension ImageManager {
    /// The BlurHash and ThumbHash of the image at `url`, from a 100x100
    /// thumbnail loaded through the pipeline (so it is cached like any other,
    /// under `…#webimage(thumb=100x100)`, and the original is downloaded once).
    /// The hashes are computed on the manager's blocking pool.
    ///
    /// They are made from the thumbnail's stored bytes, decoded, whether the
    /// thumbnail was just made or read from a cache: from the freshly made
    /// pixels they would differ by the encoder's loss, so that one URL's hashes
    /// would depend on whether this process had made its thumbnail.
    public func placeholders(for url: URL, options: ImageOptions = [], context: ImageContext = ImageContext()) async throws -> ImagePlaceholders {
        var context = context
        context.thumbnailPixelSize = PixelSize(100)
        context.preserveAspectRatio = true
        context.transformer = nil
        let result = try await loadImage(with: url, options: options.union(.avoidDecode), context: context)
        guard let data = result.data else { throw WebImageError(.decodeFailed, "no thumbnail to make placeholders from") }
        let coders = configuration.coders
        return try await configuration.pool.run {
            var decode = DecodeOptions()
            decode.keepOrientation = true  // a thumbnail's bytes are upright already
            return try coders.decode(data, options: decode).placeholders()
        }
    }
}
