/// What a coder is asked to do while encoding.
public struct EncodeOptions: Hashable, Sendable {
    /// Lossy quality, 1...100.
    public var quality: Int = 80
    /// Lossless where the format offers both (WebP).
    public var lossless: Bool = false
    /// Progressive or interlaced output where the format has it (JPEG, PNG).
    public var progressive: Bool = false
    /// Keep EXIF, ICC and XMP metadata. Off by default: metadata leaks (GPS) and costs bytes.
    public var keepMetadata: Bool = false

    public init(quality: Int = 80, lossless: Bool = false, progressive: Bool = false, keepMetadata: Bool = false) {
        self.quality = min(100, max(1, quality))
        self.lossless = lossless
        self.progressive = progressive
        self.keepMetadata = keepMetadata
    }
}
