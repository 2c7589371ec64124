public import Foundation

/// Decodes and encodes images: the plugin point for formats.
///
/// The manager asks coders newest-registered first (see ``CoderRegistry``), so a
/// coder you register overrides the built-in one for the formats it accepts.
///
/// ## Implementation requirements
/// - ``canDecode(_:)`` must be cheap and decide from the bytes alone (sniff magic
///   numbers; see ``ImageFormat/sniff(_:)``), never from a URL or a file name.
/// - ``decode(_:options:)`` and ``encode(_:as:options:)`` are called on threads of
///   the manager's blocking pool, never on Swift's cooperative pool, so they may
///   block. They must be safe to call from many threads at once.
/// - Bad input throws ``WebImageError`` (``WebImageError/Code/decodeFailed``,
///   ``WebImageError/Code/unsupportedFormat``, ``WebImageError/Code/pixelLimitExceeded``)
///   with a message that says what was wrong. It never crashes or hangs.
/// - Decoding honours ``DecodeOptions``: the pixel limit (checked from the header,
///   before pixels are decoded), thumbnail size, first frame only, scale, orientation.
///   A coder that cannot honour an option documents it.
/// - A decoded image is upright unless ``DecodeOptions/keepOrientation`` is set,
///   and records the file's orientation in ``Image/storedOrientation``.
/// - Images the coder makes keep their pixels in an ``ImageStorage`` of the coder's
///   own; ``encode(_:as:options:)`` must also accept ``PixelBuffer`` storage, so
///   that images from other coders can be re-encoded.
///
/// - ``info(_:)`` reads what the header says; it allocates no pixels where the
///   format allows, so that describing a huge image stays cheap.
///
/// `WebImageTesting.ImageCoderConformance` checks these.
public protocol ImageCoder: Sendable {
    /// Whether these bytes look like a format this coder decodes.
    func canDecode(_ data: Data) -> Bool
    /// Decodes the bytes into an image.
    func decode(_ data: Data, options: DecodeOptions) throws -> Image
    /// Whether this coder can write the format.
    func canEncode(_ format: ImageFormat) -> Bool
    /// Encodes an image in the given format.
    func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data
    /// Describes the image from its header, without decoding its pixels where the
    /// format allows. It never applies the pixel limit (nothing is decoded). The
    /// default implementation decodes; coders that can read headers override it.
    func info(_ data: Data) throws -> ImageInfo

    /// Decodes, or returns nil to hand these bytes, with these options, to the
    /// next coder in the registry that accepts them (``CoderRegistry/decode(_:options:)``):
    /// a coder that takes only some decodes of its format says so here (the
    /// TurboJPEG coder takes JPEG thumbnails and leaves full decodes to libvips).
    /// The default decodes.
    func decodeIfHandled(_ data: Data, options: DecodeOptions) throws -> Image?
    /// Encodes, or returns nil to hand the image to the next coder that writes
    /// the format (``CoderRegistry/encode(_:as:options:)``). The default encodes.
    func encodeIfHandled(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data?
    /// Describes the image, or returns nil to hand the bytes to the next coder
    /// that accepts them (``CoderRegistry/info(_:)``). The default describes.
    func infoIfHandled(_ data: Data) throws -> ImageInfo?
    /// Why this coder can read and write nothing at all now, or nil (the
    /// default). The vips coder answers the failure to load libvips, which is
    /// loaded at its first use: bytes that no available coder accepts are then
    /// ``WebImageError/Code/libraryUnavailable``, not `unsupportedFormat`,
    /// because the missing coder might have read them, and a deployment's missing
    /// library must not block URLs or remove cache entries.
    var unavailability: WebImageError? { get }
}

extension ImageCoder {
    public func decodeIfHandled(_ data: Data, options: DecodeOptions) throws -> Image? { try decode(data, options: options) }
    public func encodeIfHandled(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data? {
        try encode(image, as: format, options: options)
    }
    public func infoIfHandled(_ data: Data) throws -> ImageInfo? { try info(data) }
    public var unavailability: WebImageError? { nil }
}
