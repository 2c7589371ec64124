/// What a coder is asked to do while decoding.
public struct DecodeOptions: Hashable, Sendable {
    /// Decode straight to a size that fits in this box (shrink on load), never
    /// decoding the full image first. `nil` decodes at full size.
    public var thumbnailPixelSize: PixelSize?
    /// Keep the aspect ratio when making a thumbnail (fit inside the box); when
    /// false the thumbnail fills the box exactly.
    public var preserveAspectRatio: Bool = true
    /// What a fill thumbnail (``preserveAspectRatio`` false) keeps when it crops
    /// to the box: the centre, or a smart crop (``CropFocus/attention``).
    public var cropFocus: CropFocus = .centre
    /// The scale to record on the image (from the key or the context).
    public var scale: Double = 1
    /// Decode only the first frame of an animated image.
    public var firstFrameOnly: Bool = false
    /// The largest number of pixels (width x height x frames) a decoded image may
    /// have. Checked from the header before decoding. Default 100 megapixels.
    public var pixelLimit: Int = 100_000_000
    /// The most memory, in bytes, that one decode or one intermediate of a
    /// transform chain may take: width x height x bands x bytes per sample x
    /// frames (``ImageFootprint``), computed from the header or from the
    /// transformer's input before the memory is spent. Past it the load fails
    /// with ``WebImageError/Code/pixelLimitExceeded``. The pixel limit counts
    /// pixels; this counts what they cost, so a file that declares ten components
    /// or 16 bits per sample is bounded too. For a progressive JPEG it includes
    /// libjpeg's coefficient buffer (two bytes per sample of the whole image),
    /// which a scaled decode still needs. Default 400 MB (100 megapixels of RGBA).
    public var memoryLimit: Int = 400_000_000
    /// Instead of failing over ``pixelLimit``, decode scaled down to fit it.
    public var scaleDownLargeImages: Bool = false
    /// Keep the pixels as stored instead of turning them upright.
    public var keepOrientation: Bool = false
    /// Accept truncated or slightly corrupt data instead of failing.
    public var allowTruncated: Bool = false
    /// Keep the pixels in the colour space of the file's ICC profile, with the
    /// profile attached, instead of converting them to sRGB. Off by default:
    /// decoded images are 8-bit sRGB (or 8-bit grey), whatever the file held
    /// (a Display P3 or Adobe RGB profile, CMYK, 16 bits per sample). CMYK is
    /// converted either way. Set from ``EncodeOptions/keepColorProfile`` by the
    /// manager, so that what is encoded keeps the profile it was decoded with.
    public var keepColorProfile: Bool = false

    public init(
        thumbnailPixelSize: PixelSize? = nil,
        preserveAspectRatio: Bool = true,
        scale: Double = 1,
        firstFrameOnly: Bool = false,
        pixelLimit: Int = 100_000_000,
        memoryLimit: Int = 400_000_000,
        scaleDownLargeImages: Bool = false,
        keepOrientation: Bool = false,
        allowTruncated: Bool = false,
        keepColorProfile: Bool = false
    ) {
        self.thumbnailPixelSize = thumbnailPixelSize
        self.preserveAspectRatio = preserveAspectRatio
        self.scale = scale
        self.firstFrameOnly = firstFrameOnly
        self.pixelLimit = pixelLimit
        self.memoryLimit = memoryLimit
        self.scaleDownLargeImages = scaleDownLargeImages
        self.keepOrientation = keepOrientation
        self.allowTruncated = allowTruncated
        self.keepColorProfile = keepColorProfile
    }
}
