import CWebImageCrypto
public import Foundation
import WebImage

/// One S3 request's shape: the URL and the headers that go with it, in the form
/// AWS Signature V4 signs. libcurl 7.88 signs the path and query exactly as they
/// are sent, so they are built here already canonical: every byte outside
/// `A-Z a-z 0-9 - . _ ~` percent-encoded with upper-case hex (`/` kept in the
/// path, encoded in query values), query parameters sorted by name. Every request
/// carries `x-amz-content-sha256`, which S3 requires of a signed request and curl
/// 7.88 does not add: the SHA-256 of the body (of nothing, for a GET).
public struct S3Request: Sendable {
    public var method: String
    public var url: URL
    public var headers: [String: String]
    public var body: Data?

    /// The SHA-256 of no bytes, the payload hash of a request without a body.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// A request for an object or a bucket (`key` nil) with query parameters.
    public init(method: String, bucket: String, key: String?, query: [(String, String)] = [], body: Data? = nil,
                contentType: String? = nil, configuration: S3Configuration) {
        self.method = method
        self.body = body
        let endpoint = configuration.resolvedEndpoint
        var components = URLComponents()
        components.scheme = endpoint.scheme?.lowercased()
        components.port = endpoint.port
        let host = endpoint.host ?? ""
        let basePath = endpoint.path.hasSuffix("/") ? String(endpoint.path.dropLast()) : endpoint.path
        let objectPath = key.map { "/" + Self.encodePath($0) } ?? ""
        if Self.usesPathStyle(configuration: configuration, bucket: bucket) {
            components.host = host
            components.percentEncodedPath = basePath + "/" + bucket + (key == nil ? "" : objectPath)
        } else {
            components.host = "\(bucket).\(host)"
            components.percentEncodedPath = basePath + (key == nil ? "/" : objectPath)
        }
        if !query.isEmpty { components.percentEncodedQuery = Self.canonicalQuery(query) }
        url = components.url!
        var headers = ["x-amz-content-sha256": body.map { Self.sha256Hex($0) } ?? Self.emptyPayloadHash]
        if let token = configuration.credentials?.sessionToken { headers["x-amz-security-token"] = token }
        // No `Expect:` header to turn off 100-continue: curl 7.88 would sign the
        // blanked header and then not send it (CurlCall bounds that wait instead).
        if body != nil { headers["Content-Type"] = contentType ?? "application/octet-stream" }
        self.headers = headers
    }

    /// Path-style when asked, and whenever the endpoint's host cannot take a
    /// bucket name in front (an IP address, `localhost`) or the bucket name is no
    /// single DNS label over TLS (a dotted name breaks the wildcard certificate).
    static func usesPathStyle(configuration: S3Configuration, bucket: String) -> Bool {
        if configuration.pathStyle { return true }
        let endpoint = configuration.resolvedEndpoint
        let host = endpoint.host ?? ""
        if host == "localhost" || host.contains(":") { return true }
        let labels = host.split(separator: ".")
        if labels.allSatisfy({ label in Int(label) != nil }) { return true }
        if bucket.contains(".") && endpoint.scheme?.lowercased() == "https" { return true }
        if bucket.contains("_") { return true }  // no host name may hold one
        return false
    }

    /// The path form of a key: each segment percent-encoded, the slashes kept.
    public static func encodePath(_ key: String) -> String { encode(key, keepingSlash: true) }

    /// A query string in canonical form: names and values encoded, sorted by name (then value).
    public static func canonicalQuery(_ items: [(String, String)]) -> String {
        let encoded: [(name: String, value: String)] = items.map { item in
            (encode(item.0, keepingSlash: false), encode(item.1, keepingSlash: false))
        }
        let sorted = encoded.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        return sorted.map { item in item.name + "=" + item.value }.joined(separator: "&")
    }

    /// RFC 3986 encoding as AWS Signature V4 defines it: unreserved bytes as they
    /// are, every other byte of the UTF-8 as `%XX` with upper-case hex.
    static func encode(_ text: String, keepingSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepingSlash:
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A payload's digest for SigV4, by libcrypto: bodies are megabytes, where
    /// OpenSSL's use of the CPU's SHA extensions matters. Cache keys are hashed by
    /// the core's `SHA256Digest`.
    static func sha256Hex(_ data: Data) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        // A failed digest (OpenSSL out of memory) leaves zeros: S3 refuses the
        // upload as a bad digest, which the store reports, rather than a crash.
        _ = data.withUnsafeBytes { raw in CWI_sha256(raw.baseAddress, raw.count, &digest) }
        return digest.map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }
}
