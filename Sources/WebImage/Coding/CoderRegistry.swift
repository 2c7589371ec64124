public import Foundation

/// The coders a manager may use, asked newest-registered first.
///
/// ```swift
/// let coders = CoderRegistry()
/// coders.register(VipsImageCoder(), name: "vips")
/// let token = coders.register(MyQOICoder(), name: "qoi")  // asked before vips
/// coders.unregister(token)
/// ```
public final class CoderRegistry: Sendable {
    private let registry = Registry<any ImageCoder>()

    public init() {}

    /// Registers a coder under a name; it is asked before every coder registered earlier.
    @discardableResult
    public func register(_ coder: any ImageCoder, name: String) -> RegistrationToken {
        registry.register(coder, names: [name])
    }

    /// Removes a registration. Returns false if the token was not registered.
    @discardableResult
    public func unregister(_ token: RegistrationToken) -> Bool { registry.unregister(token) }

    /// The newest coder registered under this name.
    public func coder(named name: String) -> (any ImageCoder)? { registry.value(named: name) }

    /// The newest coder that accepts these bytes. It may hand some decodes on
    /// (``ImageCoder/decodeIfHandled(_:options:)``): to decode or describe bytes,
    /// call ``decode(_:options:)`` or ``info(_:)``, which pass them on.
    public func decoder(for data: Data) -> (any ImageCoder)? {
        registry.entries.first { $0.value.canDecode(data) }?.value
    }

    /// The newest coder that can write this format. It may hand some images on;
    /// to encode, call ``encode(_:as:options:)``.
    public func encoder(for format: ImageFormat) -> (any ImageCoder)? {
        registry.entries.first { $0.value.canEncode(format) }?.value
    }

    /// Decodes with the newest coder that accepts the bytes and takes the decode
    /// (``ImageCoder/decodeIfHandled(_:options:)``): a coder may hand it on to
    /// the next one that accepts them.
    /// - Throws: ``WebImageError/Code/unsupportedFormat`` when no coder accepts the
    ///   bytes or every one that does hands them on; else the decoding coder's error.
    public func decode(_ data: Data, options: DecodeOptions) throws -> Image {
        for coder in coders where coder.canDecode(data) {
            if let image = try coder.decodeIfHandled(data, options: options) { return image }
        }
        throw unsupported(data, "decodes")
    }

    /// Encodes with the newest coder that writes the format and takes the image
    /// (``ImageCoder/encodeIfHandled(_:as:options:)``).
    /// - Throws: ``WebImageError/Code/unsupportedFormat`` when no coder writes the
    ///   format or every one that does hands the image on; else the coder's error.
    public func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
        for coder in coders where coder.canEncode(format) {
            if let data = try coder.encodeIfHandled(image, as: format, options: options) { return data }
        }
        throw noCoder("no registered coder writes this \(image.pixelSize) image as \(format) (coders: \(names.joined(separator: ", ")))")
    }

    /// Describes the image with the newest coder that accepts the bytes and takes them
    /// (``ImageCoder/infoIfHandled(_:)``).
    /// - Throws: ``WebImageError/Code/unsupportedFormat`` as ``decode(_:options:)`` does; else the coder's error.
    public func info(_ data: Data) throws -> ImageInfo {
        for coder in coders where coder.canDecode(data) {
            if let info = try coder.infoIfHandled(data) { return info }
        }
        throw unsupported(data, "reads")
    }

    private func unsupported(_ data: Data, _ verb: String) -> WebImageError {
        let what = ImageFormat.sniff(data).map { "\($0) data" } ?? "data no registered coder recognises"
        return noCoder("\(what), which no registered coder \(verb) (coders: \(names.joined(separator: ", ")))")
    }

    /// The error for bytes or a format no coder takes: `unsupportedFormat` with
    /// `message`, or ``WebImageError/Code/libraryUnavailable`` when a registered
    /// coder is unavailable (``ImageCoder/unavailability``) and might have taken them.
    func noCoder(_ message: String) -> WebImageError {
        guard let reason = unavailability else { return WebImageError(.unsupportedFormat, message) }
        return WebImageError(.libraryUnavailable, "\(message); \(reason.message)", underlying: reason.underlying)
    }

    /// Why a registered coder cannot be used (``ImageCoder/unavailability``),
    /// naming it: `the vips coder cannot be used: libvips cannot be loaded: …`;
    /// nil when every coder can. Asking may load a coder's library.
    public var unavailability: WebImageError? {
        for entry in registry.entries {
            if let reason = entry.value.unavailability {
                return WebImageError(.libraryUnavailable, "the \(entry.names.first ?? "") coder cannot be used: \(reason.message)", underlying: reason)
            }
        }
        return nil
    }

    /// Registered names, newest first.
    public var names: [String] { registry.names }

    /// Registered coders, newest first.
    public var coders: [any ImageCoder] { registry.entries.map(\.value) }
}
