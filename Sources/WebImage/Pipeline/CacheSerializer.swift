public import Foundation

/// Makes the bytes stored on disk for a derived (transformed or thumbnailed)
/// result. Returning nil stores nothing for it on disk.
///
/// The default, ``encoding(as:options:)``, picks the format with
/// ``ImageFormat/output(for:requested:canEncode:)``: the requested format, else
/// the source's, with PNG for a result that gained alpha (rounded corners on a
/// JPEG), so that the disk copy shows what the memory copy does.
public struct CacheSerializer: Sendable {
    public let serialize: @Sendable (_ image: Image, _ key: String, _ coders: CoderRegistry) -> Data?
    public init(_ serialize: @escaping @Sendable (_ image: Image, _ key: String, _ coders: CoderRegistry) -> Data?) {
        self.serialize = serialize
    }

    /// Encodes in the format `accepted` picks for each image
    /// (``AcceptedFormats/format(hasAlpha:isAnimated:)``), falling back as
    /// ``encoding(as:options:)`` does when no coder writes it.
    public static func negotiating(_ accepted: AcceptedFormats, options: EncodeOptions = .derivedDefault) -> CacheSerializer {
        CacheSerializer { image, key, coders in
            let format = accepted.format(hasAlpha: image.hasAlpha, isAnimated: image.isAnimated)
            return encoding(as: format, options: options).serialize(image, key, coders)
        }
    }

    /// Encodes in the format ``ImageFormat/output(for:requested:canEncode:)``
    /// chooses, with these options; nothing when `preferred` is written by no
    /// coder because a coder is unavailable (``ImageCoder/unavailability``).
    public static func encoding(as preferred: ImageFormat?, options: EncodeOptions = .derivedDefault) -> CacheSerializer {
        CacheSerializer { image, _, coders in
            guard let format = ImageFormat.output(for: image, requested: preferred, canEncode: { coders.encoder(for: $0) != nil })
            else { return nil }
            // A format asked for that no coder writes because one cannot be used
            // (its library is missing) gets no substitute: it would be kept under
            // the key of the format asked for, and outlive the library's return.
            // (Asked only when another format was chosen: off the usual path.)
            if let preferred, format != preferred, coders.encoder(for: preferred) == nil, coders.unavailability != nil { return nil }
            return try? options.fitting(format) { try coders.encode(image, as: format, options: $0) }
        }
    }
}
