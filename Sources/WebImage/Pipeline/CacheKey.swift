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
/// The default encodes in ``ImageContext/encodeFormat``, else the source format if
/// a coder writes it, else PNG for images with alpha and JPEG otherwise (as
/// SDWebImage does when it has no original bytes).
public struct CacheSerializer: Sendable {
    public let serialize: @Sendable (_ image: Image, _ key: String, _ coders: CoderRegistry) -> Data?
    public init(_ serialize: @escaping @Sendable (_ image: Image, _ key: String, _ coders: CoderRegistry) -> Data?) {
        self.serialize = serialize
    }

    public static func encoding(as preferred: ImageFormat?) -> CacheSerializer {
        CacheSerializer { image, _, coders in
            let candidates = [preferred, image.format, image.hasAlpha ? .png : .jpeg].compactMap { $0 }
            for format in candidates {
                if let coder = coders.encoder(for: format),
                   let data = try? coder.encode(image, as: format, options: EncodeOptions(quality: 90)) {
                    return data
                }
            }
            return nil
        }
    }
}

/// How derived keys are built.
enum CacheKey {
    /// The plain key plus every request parameter that changes the result:
    /// `https://x/a.jpg` becomes `https://x/a.jpg#webimage(thumb=256x256,t=blur(2))`.
    /// The original stays under the plain key, so a thumbnail never costs a second
    /// download of its original.
    static func derived(from key: String, options: ImageOptions, context: ImageContext) -> String {
        var parts: [String] = []
        if let size = context.thumbnailPixelSize {
            parts.append("thumb=\(size)" + (context.preserveAspectRatio ? "" : ",fill"))
        }
        if let transformer = context.transformer { parts.append("t=\(transformer.key)") }
        if let format = context.encodeFormat, !parts.isEmpty { parts.append("f=\(format)") }
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
