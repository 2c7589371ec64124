public import Foundation

/// Turns a URL into the key its bytes are cached under.
///
/// ```swift
/// // Signed URLs change on every request; strip the signature to share one entry.
/// configuration.cacheKeyFilter = .removingQueryItems(["X-Amz-Signature", "X-Amz-Date", "Expires"])
/// ```
public struct CacheKeyFilter: Sendable {
    public let key: @Sendable (URL) -> String
    /// Whether every key this filter gives is without a `#` (the standard
    /// filters drop the fragment), so that making it a plain key needs no search.
    let dropsFragment: Bool
    public init(_ key: @escaping @Sendable (URL) -> String) { self.init(key, dropsFragment: false) }
    init(_ key: @escaping @Sendable (URL) -> String, dropsFragment: Bool) {
        self.key = key
        self.dropsFragment = dropsFragment
    }

    /// The URL's absolute string without its fragment: a fragment names no other
    /// resource (no HTTP request carries it, and a file URL's path ends before it).
    public static let identity = CacheKeyFilter({ CacheKey.withoutFragment($0.absoluteString) }, dropsFragment: true)

    /// Drops the named query items (case-insensitive), keeping the others in order,
    /// and the fragment.
    public static func removingQueryItems(_ names: Set<String>) -> CacheKeyFilter {
        let lowered = Set(names.map { $0.lowercased() })
        return CacheKeyFilter({ url in
            let whole = CacheKey.withoutFragment(url.absoluteString)
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
                  let items = components.queryItems else { return whole }
            let kept = items.filter { !lowered.contains($0.name.lowercased()) }
            components.queryItems = kept.isEmpty ? nil : kept
            components.fragment = nil
            return CacheKey.withoutFragment(components.string ?? whole)
        }, dropsFragment: true)
    }
}

/// How plain and derived keys are built.
enum CacheKey {
    /// `text` up to its first `#`: in an absolute URL string that is where the
    /// fragment starts (a `#` anywhere else is percent-encoded).
    static func withoutFragment(_ text: String) -> String {
        guard let offset = firstHash(in: text) else { return text }
        return String(text[..<text.utf8.index(text.utf8.startIndex, offsetBy: offset)])
    }

    /// The byte offset of the first `#` in `text`, by `memchr` over a native
    /// string's bytes (a key is looked for twice on every load, a memory hit's
    /// included; a byte-by-byte search was a quarter of working out the keys).
    static func firstHash(in text: String) -> Int? {
        let found = text.utf8.withContiguousStorageIfAvailable { bytes -> Int? in
            guard let base = bytes.baseAddress, let hit = memchr(base, Int32(UInt8(ascii: "#")), bytes.count) else { return nil }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
        }
        if let found { return found }
        return text.utf8.firstIndex(of: UInt8(ascii: "#")).map { text.utf8.distance(from: text.utf8.startIndex, to: $0) }
    }

    /// A key filter's answer made safe to derive from: each `#` in it becomes
    /// `#!`. A derived key is the plain key, `#webimage(`, its parameters, so a
    /// plain key holding `#webimage(…)` (a URL's fragment, when a filter keeps it)
    /// would be another request's derived key, and its bytes that request's
    /// answer. After this no plain key contains `#w`, and none equals a key that
    /// had no `#` to begin with. The standard filters drop the fragment, so their
    /// keys never change here.
    static func plain(_ filtered: String) -> String {
        guard firstHash(in: filtered) != nil else { return filtered }
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
