public import Foundation

/// What an image's header says, without its pixels: enough to answer "what is
/// this?" for a 100-megapixel file in a few kilobytes of memory.
public struct ImageInfo: Sendable, Hashable {
    public var format: ImageFormat?
    /// The size upright, as a decode would give it (EXIF orientation applied).
    public var pixelSize: PixelSize
    /// The size as the file stores it, before its orientation (EXIF, AVIF's
    /// `irot`) and crop (AVIF's `clap`) are applied: ``pixelSize`` when they
    /// change nothing, else what a viewer that ignores them would show.
    public var storedPixelSize: PixelSize
    /// The orientation the file stores (EXIF), `.up` when it has none.
    public var storedOrientation: ImageOrientation
    /// Frame durations, one per frame (a still image has one of zero).
    public var frameDurations: [Duration]
    /// How often an animation plays: 0 forever, 1 once.
    public var loopCount: Int
    public var hasAlpha: Bool
    /// Whether the file embeds an ICC colour profile.
    public var hasColorProfile: Bool
    /// The colour space the pixels are stored in, as the coder names it (`srgb`,
    /// `cmyk`, `b-w`, `rgb16`, …); nil when the coder does not say.
    public var colorSpace: String?
    /// The pages of a document (a PDF) or multi-page file (TIFF); 1 otherwise.
    /// A decode shows the first. An animation's frames are ``frameDurations``.
    public var pageCount: Int = 1

    /// `storedPixelSize` nil: `pixelSize`, with its sides exchanged when
    /// `storedOrientation` turns the image a quarter.
    public init(format: ImageFormat?, pixelSize: PixelSize, storedPixelSize: PixelSize? = nil, storedOrientation: ImageOrientation = .up,
                frameDurations: [Duration] = [.zero], loopCount: Int = 1, hasAlpha: Bool, hasColorProfile: Bool = false, colorSpace: String? = nil) {
        self.format = format
        self.pixelSize = pixelSize
        self.storedPixelSize = storedPixelSize
            ?? (storedOrientation.swapsDimensions ? PixelSize(width: pixelSize.height, height: pixelSize.width) : pixelSize)
        self.storedOrientation = storedOrientation
        self.frameDurations = frameDurations
        self.loopCount = loopCount
        self.hasAlpha = hasAlpha
        self.hasColorProfile = hasColorProfile
        self.colorSpace = colorSpace
    }

    public var frameCount: Int { frameDurations.count }

    /// The description of a decoded image (for coders that cannot read headers alone).
    public init(_ image: Image) {
        // A decode applies the stored orientation (unless kept: then `orientation` is the stored one, not `.up`).
        let turned = image.orientation == .up && image.storedOrientation.swapsDimensions
        self.init(format: image.format, pixelSize: image.pixelSize,
                  storedPixelSize: turned ? PixelSize(width: image.pixelSize.height, height: image.pixelSize.width) : image.pixelSize,
                  storedOrientation: image.storedOrientation,
                  frameDurations: image.frames.map(\.duration), loopCount: image.loopCount, hasAlpha: image.hasAlpha)
    }
}

extension ImageCoder {
    /// Decodes the image and describes it. Coders that can read their headers
    /// alone override this (``ImageCoder/info(_:)``): this default needs the pixels.
    public func info(_ data: Data) throws -> ImageInfo {
        try ImageInfo(decode(data, options: DecodeOptions()))
    }
}
