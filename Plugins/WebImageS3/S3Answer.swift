public import Foundation
public import WebImage

/// What an S3 answer outside 2xx means, as a `WebImageError` (the operator's
/// message names the S3 error code and what to check; no secret is in it):
///
/// | answer | error |
/// | --- | --- |
/// | 403 `SignatureDoesNotMatch`, `InvalidAccessKeyId`, `ExpiredToken`, `InvalidToken` | `forbidden`, transient: the operator's key is wrong; the URL is never blocklisted for it |
/// | 403 `AccessDenied` and other 403s | `forbidden`, transient: the key's policy, fixed by the operator |
/// | 404 `NoSuchKey` (and any other 404) | `notFound`, permanent, as HTTP's 404 |
/// | 404 `NoSuchBucket` | `notFound`, transient: a configuration mistake, not the URL's |
/// | 301, 307, 400 `PermanentRedirect`, `AuthorizationHeaderMalformed` | `badStatus`, transient: the bucket is in another region than `s3.region` |
/// | 429, 500, 503 (`SlowDown`, `InternalError`) | as HTTP's: transient, with `Retry-After`; the origin breaker pauses the bucket for a 429 or 503, and counts a 500 as an answer about the key |
public enum S3Answer {
    /// The error for a status outside 2xx (and not 304) and its error document.
    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - body: the error document (XML), possibly empty (a HEAD's).
    ///   - headers: the response's headers, lower-case names.
    ///   - what: the request, for the message (`GET s3://bucket/key`).
    public static func error(status: Int, body: Data, headers: [String: String], what: String) -> WebImageError {
        let document = S3XML(body)
        let code = document.first("Code") ?? ""
        let named = code.isEmpty ? "HTTP \(status)" : "HTTP \(status) \(code)"
        switch (status, code) {
        case (403, "SignatureDoesNotMatch"), (403, "InvalidAccessKeyId"), (403, "InvalidToken"), (403, "ExpiredToken"),
             (400, "ExpiredToken"), (400, "InvalidToken"), (403, "TokenRefreshRequired"):
            return WebImageError(.forbidden, "\(what): the endpoint refused the credentials (\(named)): check the access key and secret (s3.accessKeyID and s3.secretAccessKey, or AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN)",
                                 isTransient: true, statusCode: status)
        case (403, _):
            return WebImageError(.forbidden, "\(what): access denied (\(named)): the key's policy must allow s3:GetObject (and s3:ListBucket, without which a missing object also answers AccessDenied)",
                                 isTransient: true, statusCode: status)
        case (404, "NoSuchBucket"):
            return WebImageError(.notFound, "\(what): no such bucket (\(named)) at \(headers["x-amz-bucket-region"].map { "region \($0)" } ?? "this endpoint")",
                                 isTransient: true, statusCode: status)
        case (404, _), (410, _):
            return WebImageError(.notFound, "\(what): no such object (\(named))", isTransient: false, statusCode: status)
        case (301, _), (307, _), (400, "PermanentRedirect"), (400, "AuthorizationHeaderMalformed"), (400, "IllegalLocationConstraintException"):
            let region = headers["x-amz-bucket-region"] ?? document.first("Region")
            return WebImageError(.badStatus, "\(what): the bucket is not at this endpoint and region (\(named))\(region.map { "; it is in \($0): set s3.region" } ?? "; check s3.region and s3.endpoint")",
                                 isTransient: true, statusCode: status)
        default:
            let http = WebImageError.httpStatus(status, url: what, retryAfter: headers["retry-after"])
            return WebImageError(http.code, code.isEmpty ? http.message : "\(http.message) (\(code))", isTransient: http.isTransient,
                                 statusCode: status, retryAfter: http.retryAfter)
        }
    }
}

/// One ListObjectsV2 page: each object's key and size, and whether more follow.
@_spi(Internals) public struct S3ListPage: Sendable {
    public let objects: [(key: String, size: Int)]
    public let isTruncated: Bool

    /// Parses a page; elements it does not find are absent (no key: no object; no size: 0).
    public init(_ data: Data) {
        let page = S3XML(data)
        objects = page.all("Contents").compactMap { contents in
            let object = S3XML(contents)
            return object.first("Key").map { ($0, object.first("Size").flatMap(Int.init) ?? 0) }
        }
        isTruncated = page.first("IsTruncated") == "true"
    }
}

/// The few elements this module reads from S3's XML answers (error documents,
/// ListObjectsV2 pages): a scanner for `<Name>text</Name>`, entities decoded.
/// S3's documents have no attributes on these elements and no CDATA.
struct S3XML {
    let text: Substring

    init(_ data: Data) { text = Substring(String(decoding: data.prefix(8 << 20), as: UTF8.self)) }
    init(_ text: Substring) { self.text = text }

    /// The text of the first `<name>` element.
    func first(_ name: String) -> String? { all(name).first.map { Self.unescape($0) } }

    /// The raw contents of every `<name>` element, in order.
    func all(_ name: String) -> [Substring] {
        let open = "<\(name)>", close = "</\(name)>"
        var found: [Substring] = []
        var rest = text[...]
        while let start = rest.range(of: open), let end = rest[start.upperBound...].range(of: close) {
            found.append(rest[start.upperBound..<end.lowerBound])
            rest = rest[end.upperBound...]
        }
        return found
    }

    /// XML's five named entities and numeric references.
    static func unescape(_ raw: Substring) -> String {
        guard raw.contains("&") else { return String(raw) }
        var out = ""
        var rest = raw[...]
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";"), rest.distance(from: amp, to: semi) <= 10 else {
                out += rest[amp...]
                return out
            }
            let entity = rest[rest.index(after: amp)..<semi]
            switch entity {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let number = entity.hasPrefix("#x") ? UInt32(entity.dropFirst(2), radix: 16) : entity.hasPrefix("#") ? UInt32(entity.dropFirst()) : nil
                if let number, let scalar = Unicode.Scalar(number) { out.unicodeScalars.append(scalar) } else { out += rest[amp...semi] }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }
}
