public import Foundation
public import WebImage

/// A `/thumbnail` request's parameters, checked:
///
/// | parameter | meaning |
/// | --- | --- |
/// | `url` | the image, http or https (or a scheme in ``ImageEndpoint/Settings/schemes``) |
/// | `w`, `h` | the box, 1 to `thumbnail.maxDimension` (after `dpr`); a missing side is unbounded up to the maximum |
/// | `format` | `auto` (from `Accept`, the default), or one of `thumbnail.formats` (`avif`, `webp`, `jpeg`, `png`, `gif`; `jxl` where added) |
/// | `crop` | `centre`, `attention`, `entropy` or `fp:X:Y`: fill the `w`x`h` box exactly, cropping to that part (needs both sides) |
/// | `dpr` | 0.1 to 5: multiplies `w` and `h` (and the sizes in `t`) for high-density screens |
/// | `t` | transformers after the thumbnail (`sharpen;round:12`), when the endpoint has a parser for them |
/// | `maxBytes` | the highest quality (down to a floor) whose JPEG, WebP or AVIF fits in this many bytes (`EncodeOptions.maxBytes`) |
/// | `preset` | a named set of the parameters above (`thumbnail.presets.NAME`); the request's own parameters win over the preset's |
/// | `s` | the signature, when the endpoint signs (``URLSigner``) |
///
/// With `thumbnail.onlyPresets` a request may carry only `url`, `preset` and `s`.
///
/// With `thumbnail.clientHints` (and not `onlyPresets`), a request's client
/// hints stand in for what its query leaves out (``ClientHints``): `Sec-CH-DPR`
/// for `dpr`, `Sec-CH-Width` (else `Sec-CH-Viewport-Width` times the DPR) for
/// `w`. A hinted DPR is rounded up to a half within 1...3 and a hinted width up
/// to `thumbnail.clientHintsWidthStep`, so that hints make no more sizes than
/// those steps: the derived key holds the resolved box, never a header.
public struct ThumbnailQuery: Sendable {
    public var url: URL
    public var box: PixelSize
    /// nil: `auto`, negotiated from the request's `Accept`.
    public var format: ImageFormat?
    public var crop: CropFocus?
    public var transform: (any ImageTransformer)?
    /// The preset the request named, if any.
    public var preset: String?
    /// `maxBytes=`: the size the encoding should fit (`EncodeOptions.maxBytes`).
    public var maxBytes: Int?
    /// The client hints the box was resolved with, consulted because the query
    /// left their parameter out: what the answer's `Vary` names beside `Accept`.
    public var hintsConsulted: [String] = []

    /// A request's client hints (RFC 8942; the values are numbers). A value
    /// that is no positive finite number is ignored: a hint is advice, never
    /// an error.
    public struct ClientHints: Sendable, Hashable {
        /// `Sec-CH-DPR`: device pixels per CSS pixel.
        public var dpr: Double?
        /// `Sec-CH-Width`: the image's intended width in device pixels.
        public var width: Int?
        /// `Sec-CH-Viewport-Width`: the viewport's width in CSS pixels.
        public var viewportWidth: Int?

        /// The hints asked for in `Accept-CH`, in this order.
        public static let names = ["Sec-CH-DPR", "Sec-CH-Width", "Sec-CH-Viewport-Width"]
        /// The DPRs a hint may resolve to: 1...3, in halves.
        public static let dprRange = 1.0...3.0

        public init(dpr: Double? = nil, width: Int? = nil, viewportWidth: Int? = nil) {
            self.dpr = dpr
            self.width = width
            self.viewportWidth = viewportWidth
        }

        /// From the header values (nil for a header not sent).
        public init(dpr: String?, width: String?, viewportWidth: String?) {
            func number(_ text: String?) -> Double? {
                guard let text, let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite, value > 0 else { return nil }
                return value
            }
            func whole(_ text: String?) -> Int? { number(text).map { Int(min($0, 1e9).rounded(.up)) } }
            self.init(dpr: number(dpr), width: whole(width), viewportWidth: whole(viewportWidth))
        }

        /// A hinted DPR as used: rounded up to a half, within ``dprRange``.
        public static func resolvedDPR(_ value: Double) -> Double {
            min(dprRange.upperBound, max(dprRange.lowerBound, (value * 2).rounded(.up) / 2))
        }
    }

    /// What answering it may cost, in megapixel passes, before the source is
    /// known: ``renderCost`` and the encode of its result in the format asked
    /// for (`format=auto`: AVIF's, the dearest it may answer), each size a
    /// `maxBytes` search tries (``encodeWeight``). An animation costs this per
    /// frame: the manager weighs the decoded image again.
    public var estimatedCost: Double {
        let footprint = ImageFootprint(size: box, bands: 4)
        let output = transform.map { $0.footprint(after: footprint) } ?? footprint
        return renderCost + TransformCost.pass(output) * encodeWeight
    }

    /// The decode and transform part of ``estimatedCost``: the box's pixels (the
    /// thumbnail made on decode), then the `t=` steps from a box-sized image of
    /// four bands (`TransformCost`). What decides, before the download, whether
    /// a render is heavy (a missing side counts at `thumbnail.maxDimension`, so
    /// the encode is weighed from the image's header, before its decode).
    public var renderCost: Double {
        let footprint = ImageFootprint(size: box, bands: 4)
        return TransformCost.pass(footprint) + (transform.map { TransformCost.estimate($0, input: footprint) } ?? 0)
    }

    /// Megapixel passes per megapixel of the encoded result: the format's
    /// weight (`format=auto`: AVIF's), times the encodes a `maxBytes` search makes.
    public var encodeWeight: Double {
        TransformCost.encodeWeight(format ?? .avif) * (maxBytes != nil ? Double(TransformCost.maxBytesEncodes) : 1)
    }

    /// The largest `maxBytes` accepted (64 MiB, the loader's default response limit).
    public static let maxBytesLimit = 64 << 20

    /// Every format a service can answer in (``ImageEndpoint/Settings/formats`` picks from these).
    public static let formats: [ImageFormat] = [.avif, .webp, .jpeg, .png, .gif, .jxl]
    /// The formats a service answers in unless configured (`thumbnail.formats`):
    /// JPEG XL is opt-in, as its input is (docs/coder.md).
    public static let defaultFormats: [ImageFormat] = [.avif, .webp, .jpeg, .png, .gif]

    /// The parameters a request may carry under `thumbnail.onlyPresets`.
    public static let presetOnlyParameters: Set<String> = ["url", "preset", "s"]

    /// Parses `name` as a thumbnail format: `.some(nil)` for `auto`, nil when unknown.
    public static func format(named name: String) -> ImageFormat?? {
        if name.lowercased() == "auto" { return .some(nil) }
        guard let format = ImageFormat(name: name), formats.contains(format) else { return nil }
        return .some(format)
    }

    /// `url=`, checked: an absolute URL of an allowed scheme, with a host.
    public static func sourceURL(_ parameters: QueryParameters, schemes: Set<String> = ["http", "https"]) throws -> URL {
        guard let text = parameters["url"], !text.isEmpty else {
            throw WebImageError(.invalidArgument, "the query needs url=, an http or https URL of an image")
        }
        // No image URL holds a control character, raw or escaped (%00, %0A, %7F):
        // passed on, they only make origins fail (and a failing origin trips its
        // circuit breaker for everyone). Checked on the text as given, before any
        // escaping could hide one (`%0a` escaped again is `%250a`).
        if let control = controlCharacter(in: text) {
            throw WebImageError(.invalidURL, "url='\(text)' holds a control character (\(control)): no image URL does")
        }
        // Characters a URL cannot hold (a space: the query's `%20`, decoded) are
        // escaped, and nothing else: an escape already in the text stays as it is.
        guard let escaped = text.addingPercentEncoding(withAllowedCharacters: urlCharacters),
              let url = URL(string: escaped, encodingInvalidCharacters: false), let scheme = url.scheme?.lowercased(), schemes.contains(scheme),
              let host = url.host, !host.isEmpty
        else {
            throw WebImageError(.invalidURL, "url='\(text)' is not an absolute \(schemes.sorted().joined(separator: " or ")) URL")
        }
        // A port no socket has (0, or past 65535) is a malformed URL (400), not a
        // host the allow-list refuses (403).
        if let port = url.port, !(1...65535).contains(port) {
            throw WebImageError(.invalidURL, "url='\(text)' names port \(port), which is not a port (1 to 65535)")
        }
        // Credentials do not belong in an image URL (RFC 9110 §4.2.4): passed on, the
        // loader would send them to the origin, and every user@ spelling of one
        // image would be an entry of its own. (A service that needs them sets them
        // on its requests to that origin.)
        if url.user(percentEncoded: true) != nil || url.password(percentEncoded: true) != nil {
            throw WebImageError(.invalidURL, "url='\(WebImageError.hidingCredentials(text))' names a user (user@host), which an image URL must not")
        }
        // An IPv4 address in another of the forms the resolver takes (127.10,
        // 2130706442, 0x7f00000a, 0177.0.0.1, 127.000.000.010): the same server as
        // its dotted form, but another origin to the per-origin limits, the breaker
        // and the cache keys, so one server could take every download slot.
        // The same for an IPv6 literal not in its shortest form ([0::1], [::0:1]),
        // or an IPv4 address mapped into IPv6 ([::ffff:7f00:a]); and a zone
        // ([fe80::1%25eth0]), which names an interface of this machine.
        if host.contains(":"), host.contains("%") {
            throw WebImageError(.invalidURL, "url='\(text)' names an IPv6 zone ('\(host)'), an interface of this machine")
        }
        if let canonical = Self.otherSpellingOfIPv4(host) ?? Self.otherSpellingOfIPv6(host) {
            throw WebImageError(.invalidURL, "url='\(text)' writes the address \(canonical) as '\(host)': write it as \(canonical)")
        }
        return Self.normalized(url)
    }

    /// One spelling of a URL that HTTP reads as the same resource: the scheme and
    /// (for http and https) the host name in lower case, the port without leading zeros and left out when it is the
    /// scheme's own (80, 443), `.` and `..` segments resolved (RFC 3986 §5.2.4),
    /// an empty query (a trailing `?`) dropped. Each other spelling was a download
    /// and a cache entry of its own (`HTTP://`, `:024101`, `/./`); the path's
    /// escapes and the query are kept as they are.
    static func normalized(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        let scheme = components.scheme?.lowercased()
        components.scheme = scheme
        if let port = components.port { components.port = (scheme == "http" && port == 80) || (scheme == "https" && port == 443) ? nil : port }
        // A host name's case means nothing to HTTP (an s3:// bucket's may, so only these).
        if scheme == "http" || scheme == "https", let host = components.percentEncodedHost {
            components.percentEncodedHost = String(decoding: host.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
        var segments: [Substring] = []
        let parts = components.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, part) in parts.enumerated() {
            let last = index == parts.count - 1
            switch part {
            case ".": if last { segments.append("") }
            case "..":
                if !segments.isEmpty { segments.removeLast() }
                if last { segments.append("") }
            default: segments.append(part)
            }
        }
        if components.percentEncodedPath.hasPrefix("/") { components.percentEncodedPath = "/" + segments.joined(separator: "/") }
        if components.percentEncodedQuery == "" { components.percentEncodedQuery = nil }
        return components.url ?? url
    }

    /// The text of a NUL-terminated C buffer `inet_ntop` filled.
    private static func nulTerminated(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The dotted form of `host` when the resolver reads it as an IPv4 address
    /// written another way, or nil (a name, or the dotted form itself).
    static func otherSpellingOfIPv4(_ host: String) -> String? {
        var address = in_addr()
        guard inet_aton(host, &address) != 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return nil }
        let canonical = nulTerminated(text)
        return canonical == host ? nil : canonical
    }

    /// The shortest form of an IPv6 literal written another way (`[::1]` for
    /// `[0::1]`), or the dotted form of an IPv4 address mapped into IPv6
    /// (`127.0.0.10` for `[::ffff:7f00:a]`); nil for that form itself, in any
    /// case, and for anything that is not an IPv6 literal.
    static func otherSpellingOfIPv6(_ host: String) -> String? {
        var literal = Substring(host)
        if literal.hasPrefix("["), literal.hasSuffix("]") { literal = literal.dropFirst().dropLast() }
        guard literal.contains(":") else { return nil }
        var address = in6_addr()
        guard inet_pton(AF_INET6, String(literal), &address) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: address) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return nil }
        let canonical = nulTerminated(text)
        return canonical == literal.lowercased() ? nil : "[\(canonical)]"
    }

    /// What a URL may hold unescaped, `%` included (its escapes are kept).
    private static let urlCharacters = CharacterSet.urlQueryAllowed.union(.urlPathAllowed).union(.urlFragmentAllowed)
        .union(.urlHostAllowed).union(.urlUserAllowed).union(CharacterSet(charactersIn: "%#[]@:/?"))

    /// The first control character (U+0000–U+001F, U+007F) in `url`, raw or
    /// percent-escaped, named as `U+XXXX`; nil if none. (A raw one in the query's
    /// value is escaped by `URL(string:)`, and a double-escaped one arrives as an
    /// escape: decoding the URL's text once finds both.)
    static func controlCharacter(in text: String) -> String? {
        let decoded = QueryParameters.decode(Array(text.utf8)[...])
        guard let scalar = decoded.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return nil }
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: 4 - digits.count) + digits
    }

    /// The parameters a request stands for: its own, over its preset's. Refuses an
    /// unknown preset, and under `onlyPresets` anything but `url`, `preset` and `s`.
    public static func resolve(_ parameters: QueryParameters, settings: ImageEndpoint.Settings) throws -> QueryParameters {
        if settings.onlyPresets {
            if let extra = parameters.names.first(where: { !presetOnlyParameters.contains($0) }) {
                throw WebImageError(.invalidArgument, "\(extra)= is not accepted here: this service answers presets only (preset=NAME)")
            }
            guard parameters["preset"] != nil else {
                throw WebImageError(.invalidArgument, "this service answers presets only: add preset=NAME (\(settings.presets.keys.sorted().joined(separator: ", ")))")
            }
        }
        guard let name = parameters["preset"] else { return parameters }
        guard let preset = settings.presets[name] else {
            throw WebImageError(.invalidArgument, "preset='\(name)' is not a preset here" + (settings.presets.isEmpty ? "" : " (\(settings.presets.keys.sorted().joined(separator: ", ")))"))
        }
        return parameters.filling(from: preset)
    }

    /// Parses a request's parameters (after ``resolve(_:settings:)``), with its
    /// client hints where the settings read them (`clientHints`, not `onlyPresets`).
    public init(_ parameters: QueryParameters, settings: ImageEndpoint.Settings, hints: ClientHints? = nil) throws {
        let parameters = try Self.resolve(parameters, settings: settings)
        let hints = settings.clientHints && !settings.onlyPresets ? hints ?? ClientHints() : nil
        try self.init(sizing: parameters, url: try Self.sourceURL(parameters, schemes: settings.sourceSchemes), settings: settings, hints: hints)
        preset = parameters["preset"]
    }

    /// A number as a query writes it: decimal digits, without a sign or a leading
    /// zero, at most 9 of them. `Int("+100")` and `Int("0100")` are 100 too, and
    /// each spelling would be another URL for the same answer (a miss in every
    /// cache in front of the service).
    static func wholeNumber(_ text: String) -> Int? {
        let digits = text.utf8
        guard (1...9).contains(digits.count), digits.allSatisfy({ (48...57).contains($0) }),
              digits.first != 48 || digits.count == 1 else { return nil }
        return Int(text)
    }

    /// `dpr`'s number in its one spelling: digits with at most one point (`2`,
    /// `1.5`, `0.75`), no sign, exponent or hexadecimal (which `Double("0x1p1")`
    /// would take), no leading zero but the one before the point, no trailing
    /// zero after it (`01`, `1.0` and `1.50` are other URLs for `1` and `1.5`).
    static func decimal(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        guard (1...8).contains(bytes.count), bytes.allSatisfy({ (48...57).contains($0) || $0 == 46 }),
              bytes.filter({ $0 == 46 }).count <= 1, bytes.first != 46, bytes.last != 46 else { return nil }
        let whole = bytes.prefix { $0 != 46 }
        guard whole.first != 48 || whole.count == 1 else { return nil }
        if whole.count < bytes.count, bytes.last == 48 { return nil }
        return Double(text)
    }

    /// The parameters a thumbnail request may carry: any other is refused, so that
    /// a misspelt one (`width=`) is not answered as if it were absent, and no
    /// parameter makes another URL for the same answer.
    public static let parameterNames: Set<String> = ["url", "w", "h", "format", "crop", "dpr", "t", "maxBytes", "preset", "s"]

    /// Everything but the URL: used for presets too, which are checked at start-up.
    init(sizing parameters: QueryParameters, url: URL, settings: ImageEndpoint.Settings, hints: ClientHints? = nil) throws {
        try parameters.requireKnown(Self.parameterNames)
        self.url = url
        var dpr = 1.0
        if let raw = parameters["dpr"] {
            guard let value = Self.decimal(raw), (0.1...5).contains(value) else {
                throw WebImageError(.invalidArgument, "dpr='\(raw)' is not a number from 0.1 to 5 in its one spelling (digits and one point, no leading or trailing zero: 2, 1.5, 0.75)")
            }
            dpr = value
        } else if let hints {
            hintsConsulted.append("Sec-CH-DPR")
            if let value = hints.dpr { dpr = ClientHints.resolvedDPR(value) }
        }
        let maxDimension = settings.maxDimension
        // The viewport's width is in CSS pixels: times the DPR as hinted, not as
        // lowered below to fit the query's own sides.
        let viewportDPR = dpr
        if hintsConsulted.contains("Sec-CH-DPR") {
            // A hinted DPR is lowered until the query's sides fit: a hint is advice, and
            // never turns a valid request into a 400.
            let largest = ["w", "h"].compactMap { parameters[$0].flatMap(Self.wholeNumber) }.filter { $0 >= 1 && $0 <= maxDimension }.max() ?? 0
            if largest > 0 { dpr = max(1, min(dpr, Double(maxDimension) / Double(largest))) }
        }
        func side(_ name: String) throws -> Int? {
            guard let raw = parameters[name] else { return nil }
            guard let value = Self.wholeNumber(raw), value >= 1, case let scaled = Int((Double(value) * dpr).rounded()), (1...maxDimension).contains(scaled) else {
                throw WebImageError(.invalidArgument, "\(name)='\(raw)' is not a whole number from 1 to \(maxDimension)\(dpr == 1 ? "" : " after dpr=\(dpr)")")
            }
            return scaled
        }
        var width = try side("w")
        let height = try side("h")
        if width == nil, let hints {
            hintsConsulted += ["Sec-CH-Width", "Sec-CH-Viewport-Width"]
            // Sec-CH-Width is in device pixels already; the viewport's width in CSS pixels.
            if let hinted = hints.width ?? hints.viewportWidth.map({ Int(min(1e9, (Double($0) * viewportDPR).rounded(.up))) }) {
                let step = max(1, settings.clientHintsWidthStep)
                width = min(maxDimension, (min(hinted, maxDimension) + step - 1) / step * step)
            }
        }
        guard width != nil || height != nil else {
            throw WebImageError(.invalidArgument, "the query needs w= or h= (or both), the box to fit the image in")
        }
        box = PixelSize(width: width ?? maxDimension, height: height ?? maxDimension)
        if let name = parameters["crop"] {
            guard let focus = CropFocus(parsing: name) else {
                throw WebImageError(.invalidArgument, "crop='\(name)' is not centre, attention, entropy or fp:X:Y (a focal point, X and Y from 0 to 1)")
            }
            guard width != nil, height != nil else { throw WebImageError(.invalidArgument, "crop= fills a box: give both w= and h=") }
            crop = focus
        }
        if let name = parameters["format"] {
            guard let format = Self.format(named: name), format.map(settings.formats.contains) ?? true else {
                throw WebImageError(.invalidArgument, "format='\(name)' is not auto or one this service answers: \(settings.formats.map(\.rawValue).joined(separator: ", "))")
            }
            self.format = format
        } else {
            format = settings.defaultFormat
        }
        if let raw = parameters["maxBytes"] {
            guard let value = Self.wholeNumber(raw), (1...Self.maxBytesLimit).contains(value) else {
                throw WebImageError(.invalidArgument, "maxBytes='\(raw)' is not a whole number of bytes from 1 to \(Self.maxBytesLimit)")
            }
            maxBytes = value
        }
        if let spec = parameters["t"] {
            // `t=` with nothing is refused as `w=` is, not read as absent: one
            // answer, one URL (a CDN keeps `…&t=` apart from the URL without it).
            guard !spec.isEmpty else { throw WebImageError(.invalidArgument, "t= is empty: leave it out, or name steps such as t=blur:2") }
            guard let parser = settings.transformParser else {
                throw WebImageError(.invalidArgument, "t= is not accepted here: this service applies no transformers")
            }
            transform = try parser(dpr == 1 ? spec : spec + ";dpr:\(dpr)", settings.maxSteps, maxDimension)
        }
    }
}
