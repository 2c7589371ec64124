public import Foundation

/// Turns a URL into the key its bytes are cached under.
///
/// ```swift
/// // Signed URLs change on every request; strip the signature to share one entry.
/// configuration.cacheKeyFilter = .removingQueryItems(["X-Amz-Signature", "X-Amz-Date", "Expires"])
/// ```
public struct CacheKeyFilter: Sendable {
    public let key: @Sendable (URL) -> String
    public init(_ key: @escaping @Sendable (URL) -> String) { self.key = key }

    /// The URL's absolute string, unchanged.
    public static let identity = CacheKeyFilter { $0.absoluteString }

    /// Drops the named query items (case-insensitive), keeping the others in order.
    public static func removingQueryItems(_ names: Set<String>) -> CacheKeyFilter {
        let lowered = Set(names.map { $0.lowercased() })
        return CacheKeyFilter { url in
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
                  let items = components.queryItems else { return url.absoluteString }
            let kept = items.filter { !lowered.contains($0.name.lowercased()) }
            components.queryItems = kept.isEmpty ? nil : kept
            return components.string ?? url.absoluteString
        }
    }
}

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
    /// chooses, with these options.
    public static func encoding(as preferred: ImageFormat?, options: EncodeOptions = .derivedDefault) -> CacheSerializer {
        CacheSerializer { image, _, coders in
            guard let format = ImageFormat.output(for: image, requested: preferred, canEncode: { coders.encoder(for: $0) != nil }),
                  let coder = coders.encoder(for: format) else { return nil }
            return try? coder.encode(image, as: format, options: options)
        }
    }
}

/// How derived keys are built.
enum CacheKey {
    /// The plain key plus every request parameter that changes the result:
    /// `https://x/a.jpg` becomes `https://x/a.jpg#webimage(thumb=256x256,t=blur(2))`.
    /// The original stays under the plain key, so a thumbnail never costs a second
    /// download of its original. Encode options other than the default are part of
    /// a derived key (`e=q80,e4`); keeping the colour profile changes the decoded
    /// pixels, so it marks even a plain decode's key (`icc`).
    static func derived(from key: String, options: ImageOptions, context: ImageContext, encodeOptions: EncodeOptions = .derivedDefault) -> String {
        var parts: [String] = []
        if let size = context.thumbnailPixelSize {
            parts.append("thumb=\(size)" + (context.preserveAspectRatio ? "" : ",fill") +
                         (context.preserveAspectRatio || context.cropFocus == .centre ? "" : ",\(context.cropFocus.key)"))
        }
        if let transformer = context.transformer { parts.append("t=\(transformer.key)") }
        if let accepted = context.acceptedFormats, !parts.isEmpty {
            parts.append("f=\(accepted.key)")
        } else if let format = context.encodeFormat, !parts.isEmpty {
            parts.append("f=\(format)")
        }
        if !parts.isEmpty, encodeOptions != .derivedDefault { parts.append("e=\(encodeOptions.key)") }
        if encodeOptions.keepColorProfile, parts.isEmpty { parts.append("icc") }
        if options.contains(.decodeFirstFrameOnly) { parts.append("first") }
        if options.contains(.scaleDownLargeImages) { parts.append("fit") }
        if context.keepOrientation { parts.append("raw") }
        if let scale = context.scaleFactor { parts.append("scale=\(scale)") }
        return parts.isEmpty ? key : key + "#webimage(" + parts.joined(separator: ",") + ")"
    }

    /// Whether a derived key's result differs in pixels from the original's decode.
    static func storesDerivedBytes(options: ImageOptions, context: ImageContext) -> Bool {
        context.thumbnailPixelSize != nil || context.transformer != nil
    }
}
