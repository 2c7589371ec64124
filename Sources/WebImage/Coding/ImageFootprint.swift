/// The memory an image's pixels take, before they are made: width x height x
/// bands x bytes per sample x frames.
///
/// Coders compute it from a header before decoding, and transformers from their
/// input before they run (``ImageTransformer/footprint(after:)``), so that one
/// limit in bytes (``DecodeOptions/memoryLimit``) holds for every decode and every
/// intermediate of a chain: a 314-byte JPEG that declares ten components, or a
/// chain of rotations that grows the canvas, is refused before the memory is spent.
public struct ImageFootprint: Hashable, Sendable, CustomStringConvertible {
    /// One frame's size.
    public var size: PixelSize
    /// Bands per pixel (3 for RGB, 4 for RGBA, 10 for a ten-component JPEG).
    public var bands: Int
    /// Bytes per band: 1 for 8-bit, 2 for 16-bit.
    public var bytesPerSample: Int
    /// Frames of an animation (1 for a still image).
    public var frames: Int

    public init(size: PixelSize, bands: Int, bytesPerSample: Int = 1, frames: Int = 1) {
        self.size = size
        self.bands = max(1, bands)
        self.bytesPerSample = max(1, bytesPerSample)
        self.frames = max(1, frames)
    }

    /// The footprint of a decoded image, from the bytes its storage holds.
    public init(_ image: Image) {
        let pixels = max(1, image.pixelSize.area) * max(1, image.frameCount)
        let perPixel = image.cost / pixels
        self.init(size: image.pixelSize, bands: perPixel > 0 ? perPixel : (image.hasAlpha ? 4 : 3), frames: image.frameCount)
    }

    /// Pixels in every frame; saturates instead of overflowing.
    public var pixels: Int {
        let (area, o1) = size.width.multipliedReportingOverflow(by: size.height)
        let (all, o2) = area.multipliedReportingOverflow(by: frames)
        return o1 || o2 ? .max : all
    }

    /// Bytes of every pixel of every frame; saturates instead of overflowing.
    public var bytes: Int {
        let (perPixel, o1) = bands.multipliedReportingOverflow(by: bytesPerSample)
        let (all, o2) = pixels.multipliedReportingOverflow(by: perPixel)
        return o1 || o2 ? .max : all
    }

    public var description: String {
        "\(size)\(frames > 1 ? " x \(frames) frames" : "") x \(bands) band\(bands == 1 ? "" : "s")\(bytesPerSample > 1 ? " x \(bytesPerSample * 8)-bit" : "") (\(ByteCount.text(bytes)))"
    }

    /// Throws ``WebImageError/Code/pixelLimitExceeded`` when this footprint is over
    /// either limit, naming `step` (for example "decoding the JPEG header's
    /// 10000x10000" or "rotate(45.0)") and the sizes.
    public func check(pixelLimit: Int, memoryLimit: Int, step: @autoclosure () -> String) throws {
        if pixels > pixelLimit {
            throw WebImageError(.pixelLimitExceeded, "\(step()) would make \(self), \(pixels) pixels, over the limit of \(pixelLimit) pixels")
        }
        if bytes > memoryLimit {
            throw WebImageError(.pixelLimitExceeded, "\(step()) would make \(self), over the memory limit of \(ByteCount.text(memoryLimit))")
        }
    }
}
