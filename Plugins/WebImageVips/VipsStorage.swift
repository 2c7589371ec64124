public import WebImage
internal import CVips
internal import CVipsOps

/// The pixels of an image decoded by ``VipsImageCoder``: a libvips image held in
/// memory, frames stacked vertically as libvips stacks pages. Kept as it is
/// through transformers and encoders, so nothing is copied between them.
public struct VipsStorage: ImageStorage {
    let handle: VipsHandle
    /// The JPEG shrink-on-load factor the decoder chose for a thumbnail (1 if none).
    public let loadShrink: Int

    init(_ handle: VipsHandle, loadShrink: Int = 1) {
        self.handle = handle
        self.loadShrink = loadShrink
    }

    public var byteCount: Int { handle.byteCount }
    /// Bands per pixel (3 RGB, 4 RGBA, 1 grey ...).
    public var bands: Int { handle.bands }

    /// The pixels, when they are 8-bit sRGB (3 bands) or 8-bit grey (1 band) and
    /// at most `maxPixels`: what another JPEG encoder can write as they are.
    /// nil for anything else (alpha, 16-bit, CMYK, other colour spaces).
    package func plainEightBitPixels(maxPixels: Int) throws -> PixelBuffer? {
        guard CVips_is_plain_8bit(handle.pointer) != 0, handle.width * handle.height <= maxPixels else { return nil }
        return try pixels(frameHeight: handle.height)
    }

    /// The pixels as 8-bit bands (16-bit images are scaled down), every frame
    /// stacked, for code that wants to read them.
    public func pixels(frameHeight: Int) throws -> PixelBuffer {
        var length = 0
        guard let bytes = CVips_write_uchar(handle.pointer, &length) else { throw Vips.error(.encodeFailed, "reading pixels") }
        defer { CVips_free(bytes) }
        let buffer = [UInt8](UnsafeRawBufferPointer(start: bytes, count: length))
        return PixelBuffer(size: PixelSize(width: handle.width, height: frameHeight), channels: handle.bands, bytes: buffer)
    }
}
