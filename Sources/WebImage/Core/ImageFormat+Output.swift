import Foundation

extension ImageFormat {
    /// Whether the format stores transparency. JPEG and BMP do not; GIF does,
    /// one bit deep.
    public var supportsAlpha: Bool {
        switch self {
        case .jpeg, .bmp, .pdf: false
        default: true
        }
    }

    /// Whether the format stores animations that this package writes (GIF, WebP).
    public var supportsAnimation: Bool { self == .gif || self == .webp }

    /// The format a result is written in when nobody insisted on a lossy
    /// flattening: `requested` (``ImageContext/encodeFormat``, `--format`), else
    /// the source's format, else PNG with alpha and JPEG without; the first of
    /// those that `canEncode`. An image with alpha never goes to a format without
    /// it: it becomes PNG, or stays WebP/AVIF/HEIC when one of those was asked
    /// for. To get JPEG from a transparent image, flatten it first
    /// (`ImageTransformers.Flatten`, `flatten:ffffff`); an encoder asked for JPEG
    /// directly flattens onto ``EncodeOptions/background``.
    ///
    /// - Returns: nil when no coder writes any candidate. Without a PNG encoder,
    ///   another format with alpha (WebP, AVIF, HEIC, TIFF, GIF) replaces it.
    public static func output(for image: Image, requested: ImageFormat?, canEncode: (ImageFormat) -> Bool) -> ImageFormat? {
        let candidates = [requested, image.format, image.hasAlpha ? .png : .jpeg].compactMap { $0 }
        guard var format = candidates.first(where: canEncode) else { return nil }
        if image.hasAlpha, !format.supportsAlpha {
            // PNG, or the first other format with alpha that a coder writes; with
            // none, the format as chosen (its encoder flattens).
            format = ([.png, .webp, .avif, .heif, .tiff, .gif] as [ImageFormat]).first(where: canEncode) ?? format
        }
        return format
    }

    /// Picks the format to answer an HTTP request in, from its `Accept` header,
    /// the image, and the formats the service allows (those its coders write):
    /// ``AcceptedFormats/format(hasAlpha:isAnimated:)`` of
    /// ``AcceptedFormats/init(accept:allowed:)``, which say how.
    ///
    /// ```swift
    /// let format = ImageFormat.negotiate(accept: request.headers[.accept], hasAlpha: image.hasAlpha,
    ///                                    isAnimated: image.isAnimated, allowed: [.avif, .webp, .jpeg, .png, .gif])
    /// ```
    public static func negotiate(accept: String?, hasAlpha: Bool, isAnimated: Bool, allowed: Set<ImageFormat>) -> ImageFormat {
        AcceptedFormats(accept: accept, allowed: allowed).format(hasAlpha: hasAlpha, isAnimated: isAnimated)
    }

    /// Media type (lowercased, parameters other than q dropped) to its q value.
    /// The first mention of a type wins; a q that does not parse counts as 1.
    static func acceptedQualities(_ header: String) -> [String: Double] {
        var result: [String: Double] = [:]
        for entry in header.split(separator: ",").prefix(64) {
            let parts = entry.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let type = parts.first, type.contains("/"), !type.isEmpty, result[type] == nil else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() where parameter.hasPrefix("q=") {
                if let value = Double(parameter.dropFirst(2)), value.isFinite { q = min(1, max(0, value)) }
            }
            result[type] = q
        }
        return result
    }
}

/// What a client accepts, reduced to what decides the answer: the modern formats
/// (JPEG XL, AVIF, WebP) it names, in its order of preference, within an allowed set.
/// Thousands of different `Accept` headers reduce to a handful of these, so a
/// cache keyed by ``key`` keeps one entry per answer, not per header.
///
/// Put one in ``ImageContext/acceptedFormats`` and the manager picks each
/// result's format when it encodes it, from the image's alpha and animation
/// (`format=auto` in the example server); answer with `Vary: Accept`.
public struct AcceptedFormats: Hashable, Sendable {
    /// JPEG XL, AVIF and WebP as the client ranks them, those it does not accept
    /// or the allowed set lacks left out.
    public let modern: [ImageFormat]
    /// The formats the service may answer in.
    public let allowed: Set<ImageFormat>

    /// Still images get JPEG XL (when allowed: a service opts in), then AVIF,
    /// then WebP, when the client names them with a
    /// quality above zero (a bare `*/*` or `image/*` does not count: clients that
    /// send only those, curl or old browsers, may not show them), and otherwise
    /// JPEG, or PNG when the image has alpha. Animated images get animated WebP
    /// when accepted, else GIF. When the client gives the modern formats
    /// different `q` values, the higher wins. JPEG, PNG and GIF are answered even
    /// when the header leaves them out: every client shows them, and an image is
    /// more use than a 406. JPEG XL is never chosen for an animation (it is
    /// written as a still). Media types this does not know (`image/heic`,
    /// `video/*`) and malformed entries are ignored; only the first 64 entries are read.
    public init(accept: String?, allowed: Set<ImageFormat>) {
        let quality = ImageFormat.acceptedQualities(accept ?? "")
        let ranked = [ImageFormat.jxl, .avif, .webp].enumerated().compactMap { index, format -> (ImageFormat, Double, Int)? in
            guard allowed.contains(format), let q = quality[format.mimeType], q > 0 else { return nil }
            return (format, q, index)
        }
        modern = ranked.sorted { ($0.1, -$0.2) > ($1.1, -$1.2) }.map(\.0)
        self.allowed = allowed
    }

    /// The format for an image with these properties. A modern format goes only
    /// to a client that named it; otherwise JPEG, PNG or GIF, the first of them the
    /// allowed set has, else PNG (alpha, animation) or JPEG, which every client
    /// shows, whatever the set says.
    public func format(hasAlpha: Bool, isAnimated: Bool) -> ImageFormat {
        if let best = modern.first(where: { !isAnimated || $0.supportsAnimation }) { return best }
        let fallback: [ImageFormat] = isAnimated ? [.gif, .png] : hasAlpha ? [.png, .gif] : [.jpeg, .png]
        return fallback.first { allowed.contains($0) } ?? (hasAlpha || isAnimated ? .png : .jpeg)
    }

    /// `auto(avif,webp)` (`auto(jxl,avif,webp)` for a client that names JPEG XL
    /// where it is allowed): part of derived keys. When the allowed set lacks one of
    /// JPEG, PNG and GIF, the legacy formats it allows follow (`auto(webp;jpeg)`):
    /// they change the answer for a client that names no modern format, so a
    /// result made under one set is never served under another.
    public var key: String {
        let modernPart = modern.map(\.rawValue).joined(separator: ",")
        let legacy = [ImageFormat.jpeg, .png, .gif].filter(allowed.contains)
        guard legacy.count < 3 else { return "auto(" + modernPart + ")" }
        return "auto(" + modernPart + ";" + legacy.map(\.rawValue).joined(separator: ",") + ")"
    }
}
