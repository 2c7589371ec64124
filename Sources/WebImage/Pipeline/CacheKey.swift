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

    /// The URL's absolute string without its fragment: a fragment names no other
    /// resource (no HTTP request carries it, and a file URL's path ends before it).
    public static let identity = CacheKeyFilter { CacheKey.withoutFragment($0.absoluteString) }

    /// Drops the named query items (case-insensitive), keeping the others in order,
    /// and the fragment.
    public static func removingQueryItems(_ names: Set<String>) -> CacheKeyFilter {
        let lowered = Set(names.map { $0.lowercased() })
        return CacheKeyFilter { url in
            let whole = CacheKey.withoutFragment(url.absoluteString)
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
                  let items = components.queryItems else { return whole }
            let kept = items.filter { !lowered.contains($0.name.lowercased()) }
            components.queryItems = kept.isEmpty ? nil : kept
            components.fragment = nil
            return components.string ?? whole
        }
    }
}

/// How plain and derived keys are built.
enum CacheKey {
    /// `text` up to its first `#`: in an absolute URL string that is where the
    /// fragment starts (a `#` anywhere else is percent-encoded).
    static func withoutFragment(_ text: String) -> String {
        guard let hash = text.utf8.firstIndex(of: UInt8(ascii: "#")) else { return text }
        return String(text[..<hash])
    }

    /// A key filter's answer made safe to derive from: each `#` in it becomes
    /// `#!`. A derived key is the plain key, `#webimage(`, its parameters, so a
    /// plain key holding `#webimage(…)` (a URL's fragment, when a filter keeps it)
    /// would be another request's derived key, and its bytes that request's
    /// answer. After this no plain key contains `#w`, and none equals a key that
    /// had no `#` to begin with. The standard filters drop the fragment, so their
    /// keys never change here.
    static func plain(_ filtered: String) -> String {
        guard filtered.utf8.contains(UInt8(ascii: "#")) else { return filtered }
        return filtered.replacingOccurrences(of: "#", with: "#!")
    }

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
