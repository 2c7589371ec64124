public import Foundation

/// The error every part of the pipeline throws: a code to match on, a message
/// that says what was wrong, and whether trying again later may succeed.
///
/// Codes are open-ended (a struct of static members, as Hummingbird's errors are),
/// so plugins and later versions can add codes without breaking `switch`es:
///
/// ```swift
/// do { _ = try await manager.loadImage(with: url) }
/// catch let error as WebImageError where error.code == .notFound { print("gone:", error.message) }
/// ```
public struct WebImageError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The URL or path cannot be loaded by any registered loader, or is malformed.
        public static let invalidURL = Code("invalidURL")
        /// The URL failed permanently before and is on the failed-URL blocklist.
        public static let blockedURL = Code("blockedURL")
        /// `.fromCacheOnly` was asked for and no cache tier has the image.
        public static let notCached = Code("notCached")
        /// The resource does not exist (HTTP 404/410, or no such file).
        public static let notFound = Code("notFound")
        /// The server answered with a status outside the acceptable range.
        public static let badStatus = Code("badStatus")
        /// The response or file is larger than the configured limit.
        public static let tooLarge = Code("tooLarge")
        /// The load did not finish in time because its origin (or the file it
        /// reads) did not: a download past the loader's timeout, or a deadline that
        /// passed while the download ran.
        public static let timedOut = Code("timedOut")
        /// The load's deadline passed while the service itself worked on it: the
        /// wait for room (the work or originals budget, the decode pool), the
        /// decode, the transform, the encode or the store, its download (if any)
        /// finished. The message names the stage. Transient, with a `retryAfter`.
        public static let workTimedOut = Code("workTimedOut")
        /// A network or I/O failure: connection refused or reset, DNS, a truncated body.
        public static let loadFailed = Code("loadFailed")
        /// Access was refused: a file not readable, an address the SSRF policy forbids.
        public static let forbidden = Code("forbidden")
        /// No registered coder recognises the bytes.
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// A coder recognised the bytes but could not decode them (corrupt, truncated).
        public static let decodeFailed = Code("decodeFailed")
        /// The image is larger than the decoded pixel limit.
        public static let pixelLimitExceeded = Code("pixelLimitExceeded")
        /// Encoding to the requested format failed or is not supported.
        public static let encodeFailed = Code("encodeFailed")
        /// A transformer failed: the service's own failure, not the request's.
        public static let transformFailed = Code("transformFailed")
        /// A transform step does not fit the image it was given: a crop outside
        /// it, a watermark margin that leaves no room in it. The request's
        /// mistake, though one that shows only once the image's size is known;
        /// a transformer checks it before any pixel work and names the step and
        /// the parameter. A service answers it 422 (an error of the request).
        public static let stepDoesNotFit = Code("stepDoesNotFit")
        /// A cache store failed to read or write.
        public static let storeFailed = Code("storeFailed")
        /// Invalid configuration or argument.
        public static let invalidArgument = Code("invalidArgument")
        /// The task was cancelled.
        public static let cancelled = Code("cancelled")
        /// The manager is shutting down and starts no new load.
        public static let shutDown = Code("shutDown")
        /// The URL's origin failed transiently too often in a row and its loads
        /// fail at once for a while (``OriginCircuitBreaker``).
        public static let originUnavailable = Code("originUnavailable")
        /// A shared library the work needs (libvips, libavif, libcurl: loaded at
        /// their first use) cannot be loaded: the deployment's failure, not the
        /// image's or its origin's. Transient, so it never blocks a URL; it never
        /// removes a cache entry and never opens an origin's circuit.
        public static let libraryUnavailable = Code("libraryUnavailable")
    }

    public var code: Code
    /// What went wrong, in words, including any message from the C library below:
    /// one line, its control characters escaped (``escapingControlCharacters(_:)``),
    /// so that text from a request or a C library cannot forge a log record.
    public var message: String
    /// Whether the failure may go away by itself (timeouts, 5xx, connection errors).
    /// Transient failures never put a URL on the blocklist.
    public var isTransient: Bool
    /// The HTTP status, where there was one.
    public var statusCode: Int?
    /// The error that caused this one, if any.
    public var underlying: (any Error)?
    /// How long a transient failure is known to last, where the library knows: an
    /// open origin circuit's remaining cooldown (``Code/originUnavailable``), or
    /// the pause an origin asked for with a 429 or 503 and `Retry-After`. A
    /// service can answer it as `Retry-After`.
    public var retryAfter: Duration?

    public init(_ code: Code, _ message: String, isTransient: Bool? = nil, statusCode: Int? = nil, underlying: (any Error)? = nil,
                retryAfter: Duration? = nil) {
        self.code = code
        self.message = Self.escapingControlCharacters(message)
        self.isTransient = isTransient ?? Self.defaultTransience(code)
        self.statusCode = statusCode
        self.underlying = underlying
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code): \(message)" }

    /// `text` with every control character (C0, DEL, C1), the Unicode line and
    /// paragraph separators, and the bidirectional marks, embeddings, overrides and
    /// isolates (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069) written as
    /// `\uXXXX`: one line whatever it held, safe to write into a log record or a
    /// terminal, where an override would show `photo\u{202E}gpj.exe` as
    /// `photoexe.jpg`. Text without such characters comes back as it was.
    /// `text` with a URL's user information (`user:password@`) replaced by
    /// `***@` (`redis://admin:s3cret@cache:6379/0` becomes
    /// `redis://***@cache:6379/0`), for messages and logs that quote a URL
    /// someone gave: a password must not be written where operators and clients read.
    public static func hidingCredentials(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let authority = text[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@") else { return text }
        return String(text[..<scheme.upperBound]) + "***" + String(text[at...])
    }

    public static func escapingControlCharacters(_ text: String) -> String {
        func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
            let value = scalar.value
            if value < 0x20 || (0x7F...0x9F).contains(value) { return true }
            guard value >= 0x61C else { return false }
            return value == 0x61C || value == 0x200E || value == 0x200F || value == 0x2028 || value == 0x2029
                || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
        }
        guard text.unicodeScalars.contains(where: { needsEscape($0) }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func defaultTransience(_ code: Code) -> Bool {
        switch code {
        case .timedOut, .workTimedOut, .loadFailed, .cancelled, .storeFailed, .shutDown, .libraryUnavailable: true
        default: false
        }
    }

    /// The error for a response outside the acceptable statuses: `notFound` for 404
    /// and 410 (permanent), `badStatus` otherwise; transient for 5xx, 408 and 429,
    /// so that those never block a URL. Loaders and the manager both use it.
    /// - Parameters:
    ///   - status: the response's HTTP status.
    ///   - url: the URL, for the message.
    ///   - retryAfter: the response's `Retry-After` header: for a 429 or 503 it
    ///     becomes ``retryAfter`` (the origin asked for a pause; an
    ///     ``OriginCircuitBreaker`` honours it).
    ///   - now: the time an HTTP-date `Retry-After` is measured from.
    public static func httpStatus(_ status: Int, url: String, retryAfter: String? = nil, now: Date = Date()) -> WebImageError {
        let pause = status == 429 || status == 503 ? retryAfter.flatMap { Self.retryAfter(parsing: $0, now: now) } : nil
        return WebImageError(status == 404 || status == 410 ? .notFound : .badStatus,
                             "\(url) answered HTTP \(status)\(pause.map { ", Retry-After \($0.components.seconds) s" } ?? "")",
                             isTransient: status >= 500 || status == 408 || status == 429, statusCode: status, retryAfter: pause)
    }

    /// The pause a `Retry-After` header asks for: delta-seconds (`120`) or an
    /// HTTP date (`Wed, 21 Oct 2026 07:28:00 GMT`, RFC 9110 §10.2.3), at most a
    /// day (it comes from an origin, and may be passed on to clients); nil for
    /// anything else, a date in the past, or no pause at all.
    /// - Parameters:
    ///   - value: the header's value.
    ///   - now: the time an HTTP date is measured from.
    public static func retryAfter(parsing value: String, now: Date = Date()) -> Duration? {
        let value = value.trimmingCharacters(in: .whitespaces)
        guard value.utf8.count <= 64 else { return nil }
        if !value.isEmpty, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            guard let seconds = Int64(value), seconds > 0 else { return nil }   // too many digits: nil
            return .seconds(min(seconds, 86_400))
        }
        guard let date = HTTPDate.parse(value) else { return nil }
        let seconds = date.timeIntervalSince(now)
        guard seconds >= 1 else { return nil }
        return .seconds(min(seconds, 86_400).rounded())
    }

    /// Wraps any error as a `WebImageError`, keeping one that already is.
    public static func wrap(_ error: any Error, as code: Code, _ context: @autoclosure () -> String) -> WebImageError {
        if let error = error as? WebImageError { return error }
        if error is CancellationError { return WebImageError(.cancelled, "cancelled", underlying: error) }
        return WebImageError(code, "\(context()): \(error)", underlying: error)
    }
}
