public import Foundation
import WebImage

/// The name a result is written under inside an output directory (`--out`):
/// always one safe path component, whatever the input URL holds.
///
/// The name comes from the input's last path segment, percent-decoded the way a
/// user reads it, then made harmless: `/`, `\`, NUL and other control characters
/// become `_`, Unicode format characters (the bidirectional overrides and
/// isolates U+202A–U+202E and U+2066–U+2069 among them, which make
/// `gpj.exe` read as `exe.jpg`) and unassigned scalars are dropped, leading dots and spaces go (so `..`, `.hidden` and `%2E%2E` cannot
/// name a parent or a hidden file), the extension is replaced by the output
/// format's, and the length is capped. When nothing is left, the name is
/// `image-` and the first 16 hex digits of the cache key's SHA-256.
@_spi(Internals) public enum OutputFileName {
    /// The longest stem kept, in UTF-8 bytes (file systems allow 255 per name).
    static let maxStemBytes = 200

    /// - Parameters:
    ///   - url: the input (a file URL or a network URL).
    ///   - key: the cache key, for the fallback name.
    ///   - fileExtension: the output format's extension, without the dot.
    public static func make(for url: URL, key: String, fileExtension: String) -> String {
        "\(stem(for: url, key: key)).\(fileExtension)"
    }

    public static func stem(for url: URL, key: String) -> String {
        var stem = sanitized(lastSegment(of: url))
        if let dot = stem.lastIndex(of: "."), dot != stem.startIndex { stem = String(stem[..<dot]) }
        stem = String(stem.drop { $0 == "." || $0 == " " })
        while stem.utf8.count > maxStemBytes { stem.removeLast() }
        if stem.isEmpty { return "image-" + SHA256Digest.hex(key).prefix(16) }
        return stem
    }

    /// The last segment of the path as written (still percent-encoded), then decoded:
    /// splitting after decoding would let `%2F` make new segments.
    static func lastSegment(of url: URL) -> String {
        let encoded = url.isFileURL ? url.path : (URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path)
        let segment = encoded.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? ""
        if url.isFileURL { return segment }
        return segment.removingPercentEncoding ?? segment
    }

    static func sanitized(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "/" || scalar == "\\" || scalar.properties.generalCategory == .control {
                out.append("_")
            } else if ![.format, .unassigned, .privateUse, .surrogate, .lineSeparator, .paragraphSeparator]
                .contains(scalar.properties.generalCategory) {
                out.append(scalar)
            }
        }
        return String(out)
    }
}
