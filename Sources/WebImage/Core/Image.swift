import Foundation

/// A decoded image: what the pipeline caches in memory and hands to callers.
///
/// Geometry is given for one frame and as the pixels are now: after a coder has
/// applied the EXIF orientation, ``orientation`` is `.up` and ``storedOrientation``
/// keeps what the file said. Animated images have several ``frames``, each with its
/// own duration; a still image has exactly one frame.
///
/// The pixels live in ``storage``, which belongs to the coder that made them.
public struct Image: Sendable {
    /// Width and height of one frame, in pixels.
    public var pixelSize: PixelSize
    /// Pixels per point: 2 for `@2x` assets. Always positive.
    public var scale: Double
    /// The frames, in display order; at least one.
    public var frames: [Frame]
    /// How many times an animation plays; 0 means forever. 1 for still images.
    public var loopCount: Int
    /// The orientation of the pixels as they are now (`.up` once applied).
    public var orientation: ImageOrientation
    /// The orientation the source file declared.
    public var storedOrientation: ImageOrientation
    /// The format the image was decoded from, if known.
    public var format: ImageFormat?
    /// Whether the pixels carry an alpha channel.
    public var hasAlpha: Bool
    /// The pixels, in the coder's own representation.
    public var storage: any ImageStorage

    /// One frame of an animation.
    public struct Frame: Hashable, Sendable {
        /// How long the frame is shown; zero for a still image.
        public var duration: Duration
        public init(duration: Duration) { self.duration = duration }
    }

    public init(
        pixelSize: PixelSize,
        scale: Double = 1,
        frames: [Frame] = [Frame(duration: .zero)],
        loopCount: Int = 1,
        orientation: ImageOrientation = .up,
        storedOrientation: ImageOrientation = .up,
        format: ImageFormat? = nil,
        hasAlpha: Bool = false,
        storage: any ImageStorage
    ) {
        self.pixelSize = pixelSize
        self.scale = scale > 0 ? scale : 1
        self.frames = frames.isEmpty ? [Frame(duration: .zero)] : frames
        self.loopCount = loopCount
        self.orientation = orientation
        self.storedOrientation = storedOrientation
        self.format = format
        self.hasAlpha = hasAlpha
        self.storage = storage
    }

    /// Width in points: pixel width divided by ``scale``.
    public var width: Double { Double(pixelSize.width) / scale }
    /// Height in points: pixel height divided by ``scale``.
    public var height: Double { Double(pixelSize.height) / scale }
    /// The number of frames; 1 for a still image.
    public var frameCount: Int { frames.count }
    /// Whether the image has more than one frame.
    public var isAnimated: Bool { frames.count > 1 }
    /// The bytes the pixels occupy: what the memory cache charges for this image.
    public var cost: Int { storage.byteCount }

    /// The storage as a concrete type, when it is one.
    public func storage<S: ImageStorage>(as type: S.Type) -> S? { storage as? S }
}
